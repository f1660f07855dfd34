"""DP-SGD training speed and memory per engine and clipping path, on the same model and batch.

For each model (the demo's tanh MLP at the recipe's padded Poisson batch, the standard MNIST CNN
at a batch of 250, and DP-SGD's tanh CNN at the whole-MNIST preset's expected batch of 512 of
60,000) and each variant — non-private training, tfdpmech's ghost-norm and per-record
paths, tensorflow-privacy's fast-clipping and vectorized paths where it imports — one Keras
``fit`` of ``steps`` optimizer steps on one fixed batch is timed after a warm-up fit (tracing
excluded). Repeats are interleaved (repeat r runs every variant once, in a rotated order) and every
ratio is taken within a repeat; the table gives median and min–max over repeats. Peak memory: the
growth of the process's peak RSS during a fresh process's warm-up and timed fits
(:func:`~tfdpmech.experiments.peak_rss.peak_rss_mib`), one process per variant.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from ..mechanisms.dpsgd import RECIPE, DPSGD, tanh_mlp
from ..mechanisms.dpsgd.paths import tf_privacy_available
from ..mechanisms.dpsgd.poisson_sampling import padded_batch_size
from ..models import standard_cnn, tanh_cnn
from .measuring import device_description

__all__ = ["MODELS", "variants", "measure", "run", "format_table"]

N = 7000  # the demo's private records
N_MNIST = 60_000  # the whole-MNIST preset's private records
MODELS = {
    # model builder, expected batch L, padded rows, private records n
    "mlp": (tanh_mlp, RECIPE.expected_batch_size, padded_batch_size(N, RECIPE.expected_batch_size / N), N),
    "cnn": (standard_cnn, 250, padded_batch_size(N, 250 / N), N),
    "tanh_cnn": (tanh_cnn, 512, padded_batch_size(N_MNIST, 512 / N_MNIST), N_MNIST),
}


def variants(model: str) -> list[tuple[str, str | None, str | None]]:
    """``(label, engine, path)`` of every variant that runs here (engine None: non-private)."""
    out = [("nonprivate", None, None), ("tfdpmech fast_clipping", "tfdpmech", "fast_clipping"),
           ("tfdpmech vectorized", "tfdpmech", "vectorized")]
    if tf_privacy_available():
        if model == "mlp":  # tensorflow-privacy has no ghost-norm rule for Conv2D (the CNNs)
            out.append(("tensorflow_privacy fast_clipping", "tensorflow_privacy", "fast_clipping"))
        out.append(("tensorflow_privacy vectorized", "tensorflow_privacy", "vectorized"))
    return out


def _batch(model_name: str, seed: int = 0):
    _, expected, rows, _ = MODELS[model_name]
    rng = np.random.default_rng(seed)
    x = rng.random((rows, 28, 28, 1), dtype=np.float32)
    y = keras.utils.to_categorical(rng.integers(0, 10, rows), 10).astype(np.float32)
    mask = (np.arange(rows) < expected).astype(np.float32)
    return x, y, mask


def _trainable(model_name: str, engine, path):
    """The compiled model and, for a private variant, its run (None for the non-private one)."""
    build, expected, _, n = MODELS[model_name]
    keras.utils.set_random_seed(0)
    model = build()
    if engine is None:
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=keras.losses.CategoricalCrossentropy(from_logits=True))
        return model, None
    dp = DPSGD(1.0, 1e-5, expected_batch_size=expected, epochs=10_000, n=n, engine=engine, path=path, seed=0)
    return dp.compile(model), dp


def _repeated(batch, steps: int, dp) -> tf.data.Dataset:
    """``batch`` for ``steps`` steps; for a private run each tagged as the run's batch of its step (the timed
    batch is fixed, so that every variant computes the same rows)."""
    x, y, mask = batch  # the mask is the non-private run's sample weight: the same rows count
    if dp is None:
        return tf.data.Dataset.from_tensors(batch).repeat(steps)
    start, rows = dp.global_step(), len(mask)
    return tf.data.Dataset.range(start, start + steps).map(
        lambda t: (x, y, (mask, tf.tile(tf.stack([tf.constant(dp.run_id, tf.int64), t])[None], [rows, 1]))))


def measure(model_name: str, engine, path, steps: int) -> tuple[object, float]:
    """A compiled model and the seconds of one timed ``fit`` of ``steps`` steps (after a warm-up fit)."""
    model, dp = _trainable(model_name, engine, path)
    batch = _batch(model_name)
    model.fit(_repeated(batch, 2, dp), epochs=1, verbose=0)  # trace and warm up
    ds = _repeated(batch, steps, dp).prefetch(2)
    start = time.perf_counter()
    model.fit(ds, epochs=1, verbose=0)
    return model, time.perf_counter() - start


def _peak_rss_growth(model_name: str, label: str, steps: int) -> float | None:
    code = (f"from tfdpmech.experiments import dpsgd_speed as s; from tfdpmech.experiments.peak_rss import peak_rss_mib; "
            f"v = {{l: (e, p) for l, e, p in s.variants({model_name!r})}}[{label!r}]; "
            f"before = peak_rss_mib(); "
            f"s.measure({model_name!r}, *v, {steps}); "
            f"print(peak_rss_mib() - before)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    try:
        return float(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return None


def run(models=("mlp", "cnn", "tanh_cnn"), repeats: int = 5, steps: dict | None = None, memory: bool = True,
        log=print) -> dict:
    """Interleaved timing of every variant of every model; see the module docstring."""
    steps = steps or {"mlp": 20, "cnn": 6, "tanh_cnn": 20}
    result = {"tensorflow": tf.__version__, "keras": keras.__version__,
              "python": ".".join(map(str, sys.version_info[:3])), "repeats": repeats, "models": {}}
    for name in models:
        labels = variants(name)
        rows = MODELS[name][1]
        seconds = {label: [] for label, _, _ in labels}
        for r in range(repeats):
            order = labels[r % len(labels):] + labels[:r % len(labels)]
            for label, engine, path in order:
                _, t = measure(name, engine, path, steps[name])
                seconds[label].append(t)
            log(f"  {name} repeat {r + 1}/{repeats}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in seconds.items()))
        table = {}
        for label, _, _ in labels:
            ex_s = [steps[name] * rows / t for t in seconds[label]]
            table[label] = {"examples_per_second": _summary(ex_s),
                            "ratio_to_nonprivate": _summary([a / b for a, b in zip(seconds["nonprivate"],
                                                                                   seconds[label])])}
            fastest_tfp = _fastest(seconds, "tensorflow_privacy")
            if fastest_tfp and label.startswith("tfdpmech"):
                table[label]["ratio_to_tensorflow_privacy"] = _summary(
                    [min(seconds[k][i] for k in fastest_tfp) / t for i, t in enumerate(seconds[label])])
            if memory:
                table[label]["peak_memory_mib"] = _peak_rss_growth(name, label, steps[name])
        result["models"][name] = {"expected_batch": rows, "padded_rows": MODELS[name][2], "steps": steps[name],
                                  "variants": table}
    return result


def _fastest(seconds: dict, prefix: str) -> list[str]:
    return [k for k in seconds if k.startswith(prefix)]


def _summary(values) -> dict:
    v = np.asarray(values, float)
    return {"median": float(np.median(v)), "min": float(v.min()), "max": float(v.max())}


def format_table(result: dict) -> str:
    """A markdown table of :func:`run`'s result."""
    lines = [f"DP-SGD speed on TensorFlow {result['tensorflow']}, Keras {result['keras']}, Python {result['python']} "
             f"({result['repeats']} interleaved repeats; median [min–max])", "",
             "| model | variant | examples/s | ÷ non-private | ÷ tensorflow-privacy's fastest | peak memory (MiB) |",
             "|---|---|---|---|---|---|"]

    def cell(s):
        return "–" if not s else f"{s['median']:.3g} [{s['min']:.3g}–{s['max']:.3g}]"

    for name, m in result["models"].items():
        for label, row in m["variants"].items():
            memory = row.get("peak_memory_mib")
            lines.append(f"| {name} (batch {m['expected_batch']}) | {label} | {cell(row['examples_per_second'])} | "
                         f"{cell(row['ratio_to_nonprivate'])} | {cell(row.get('ratio_to_tensorflow_privacy'))} | "
                         f"{'–' if memory is None else f'{memory:.0f}'} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    """``python -m tfdpmech.experiments.dpsgd_speed [--models tanh_cnn] [--out DIR]``: the table, and
    ``results.json`` + ``results.md`` in ``DIR`` when given."""
    parser = argparse.ArgumentParser(prog="python -m tfdpmech.experiments.dpsgd_speed", description=__doc__)
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-memory", action="store_true", help="skip the fresh-process memory probes")
    parser.add_argument("--out", default=None, help="a folder for results.json and results.md")
    args = parser.parse_args(argv)
    models = tuple(m for m in args.models.split(",") if m)
    unknown = sorted(set(models) - set(MODELS))
    if unknown or not models:
        parser.error(f"--models={args.models!r}: give some of {', '.join(MODELS)}, comma-separated")
    if args.repeats < 1:
        parser.error(f"--repeats={args.repeats}: give at least 1")
    result = run(models=models, repeats=args.repeats, memory=not args.no_memory)
    table = format_table(result)
    print(table)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)
        command = "python -m tfdpmech.experiments.dpsgd_speed " + " ".join(argv if argv is not None else sys.argv[1:])
        with open(os.path.join(args.out, "results.md"), "w", encoding="utf-8") as fh:
            fh.write(f"# DP-SGD engine speed\n\nCommand: `{command}`. {device_description()}. `results.json` beside "
                     f"this file holds every number.\n\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
