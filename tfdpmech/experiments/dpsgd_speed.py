"""DP-SGD training speed and memory per engine and clipping path, on the same model and batch.

The models (:data:`MODELS`): the demo's tanh MLP, the standard MNIST CNN and DP-SGD's tanh CNN, and on
Keras 3 today's architectures (:mod:`tfdpmech.models.architectures`: a ViT, a transformer text
classifier, token and position embeddings, Conv1D, GroupNorm and LayerNorm CNNs, depthwise/separable,
transposed and 3-D convolutions, LSTM, GRU) and the tanh CNN under ``mixed_bfloat16``, and with the text extra
keras-hub language models (:mod:`.text_models`: GPT-2 and Gemma causal LMs, a BERT classifier, full and with
LoRA, each LoRA model against its own non-private LoRA training). Each model's
variants (:func:`variants`) train on one fixed batch of its expected size L:

* ``nonprivate``: Keras's own ``fit`` on the L records;
* ``tfdpmech fast_clipping``: the ghost-norm path (the layer registry; layers without a rule alone) on
  the batch as the run pads it (to a multiple of 8);
* ``tfdpmech fast_clipping, padded to P``: the same on the batch padded to ``L + 6 sd`` rows (the fixed
  shape a strategy needs): the cost of padding;
* ``tfdpmech vectorized``: the per-record path (one gradient per record, the whole model);
* ``tfdpmech fast_clipping, K = 4 views`` and ``..., users of k = 4 records`` (:data:`GROUP_MODELS`): the
  ghost-norm path with every 4 consecutive rows one clipping unit (augmentation multiplicity; user level) on
  the same number of rows, L/4 units of 4: the cost of group norms against row norms;
* tensorflow-privacy's paths where it imports (TensorFlow 2.15).

Each model runs in a fresh process (:func:`run_isolated`). Every variant is built, traced and warmed up
once, then fitted once more untimed after all are built (each build sets the random seed, which clears
TensorFlow's kernel cache: a variant built earlier then instantiates its step again in its next fit, 45–66 s
against 1.2–2.6 s for a 4-step fit of MobileNetV2's ghost-norm step); then ``repeats`` rounds each time one ``fit`` of ``steps``
steps per variant, in a rotated order, and every ratio is taken within a round. A fit's time is its training
loop's (``on_train_begin`` to ``on_train_end``): the teardown of Keras's ``tf.data`` iterator can wait for
tf.data's autotuning thread to wake (10 ms · (2ᵏ − 1) after the iterator began), which would round a short fit
up to 0.31, 0.63, ..., 10.23, 20.47 s whatever its steps cost. The table gives median and
min–max over rounds; examples/s count the L records of a step. Peak memory: the growth of a
fresh process's peak RSS over one variant's build, warm-up and timed fit
(:func:`~tfdpmech.experiments.peak_rss.peak_rss_mib`): TensorFlow's traced graphs and, for DP-SGD, the
compile-time probe included; memory per record: the growth of that peak from batch L to batch 4L, divided
by 3L (what training holds per record, the fixed part cancelled). Both for the non-private and the ghost-norm
variants (:data:`MEMORY_VARIANTS`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys

import keras
import numpy as np
import tensorflow as tf

from ..mechanisms.dpsgd import DPSGD
from ..mechanisms.dpsgd.runs.paths import tf_privacy_available
from ..mechanisms.dpsgd.runs.train_step import KERAS_3  # noqa: F401  (the tests read it here)
from ..mechanisms.dpsgd.sampling.poisson_sampling import padded_batch_size, row_multiple
from ..mechanisms.dpsgd.sampling.position_weights import split_position_weights
from .measuring import TrainingLoopClock, device_description, format_median_range as cell, median_range
from .speed_models import APPLICATIONS, MODELS, Model, batch as _batch  # noqa: F401  (the models timed)
from .text_models import keras_hub_available  # noqa: F401  (the tests read it here)

__all__ = ["MODELS", "Model", "variants", "measure", "run", "run_isolated", "format_table"]



PHYSICAL_BATCH = 16  # the chunk of the applications' physical-batch variant

GROUP = 4  # the rows of one clipping unit in the group variants
GROUP_MODELS = ("mlp", "tanh_cnn", "vit", "lstm_rows")  # the models timed with groups of rows
VIEWS, USERS = f"tfdpmech fast_clipping, K = {GROUP} views", f"tfdpmech fast_clipping, users of k = {GROUP} records"


def variants(model: str) -> list[tuple[str, str | None, str | None]]:
    """``(label, engine, path)`` of every variant that runs here (engine None: non-private)."""
    if MODELS[model].text:  # the per-record path would hold batch × parameters (the vocabulary's table each)
        return [("nonprivate", None, None), ("tfdpmech fast_clipping", "tfdpmech", "fast_clipping")]
    if MODELS[model].kind == "image32":  # the per-record path of a 150-layer network takes minutes a step
        chunks = [(f"tfdpmech fast_clipping, physical batch {PHYSICAL_BATCH}", "tfdpmech", "fast_clipping")]
        return [("nonprivate", None, None), ("tfdpmech fast_clipping", "tfdpmech", "fast_clipping"),
                *(chunks if MODELS[model].chunked else [])]
    out = [("nonprivate", None, None), ("tfdpmech fast_clipping", "tfdpmech", "fast_clipping"),
           ("tfdpmech fast_clipping, padded to P", "tfdpmech", "fast_clipping"),
           ("tfdpmech vectorized", "tfdpmech", "vectorized")]
    if model in GROUP_MODELS:
        out += [(VIEWS, "tfdpmech", "fast_clipping"), (USERS, "tfdpmech", "fast_clipping")]
    if tf_privacy_available():
        if model == "mlp":  # tensorflow-privacy has no ghost-norm rule for Conv2D (the CNNs)
            out.append(("tensorflow_privacy fast_clipping", "tensorflow_privacy", "fast_clipping"))
        out.append(("tensorflow_privacy vectorized", "tensorflow_privacy", "vectorized"))
    return out


def _rows(spec: Model, label: str) -> int:
    if "padded to P" in label or label.startswith("tensorflow_privacy"):
        return padded_batch_size(spec.n, spec.expected / spec.n)
    multiple = row_multiple(spec.expected)
    return multiple * -(-spec.expected // multiple) if label != "nonprivate" else spec.expected


def _grouped_run(label: str, spec: Model) -> DPSGD:
    """The DP-SGD run of a group variant: L/4 units of 4 rows (a record's views, or a user's records)."""
    units = spec.expected // GROUP
    if label == VIEWS:
        return DPSGD(1.0, 1e-5, expected_batch_size=units, epochs=10_000, n=spec.n, engine="tfdpmech",
                     path="fast_clipping", seed=0, augmentation=lambda x, seed: x, augmentation_multiplicity=GROUP)
    users = spec.n // GROUP
    return DPSGD(1.0, 1e-5, expected_batch_size=units, epochs=10_000, n=users, engine="tfdpmech", path="fast_clipping",
                 seed=0, user_ids=np.repeat(np.arange(users), GROUP), records_per_user=GROUP)


@dataclasses.dataclass
class _Variant:
    model: object
    dp: object
    batch: tuple

    def dataset(self, steps: int) -> tf.data.Dataset:
        x, y, mask = self.batch
        if self.dp is None:  # Keras's own fit: a causal LM's per-position weights as its sample_weight
            targets, weights = split_position_weights(y)
            return tf.data.Dataset.from_tensors((x, y) if weights is None else (x, targets, weights)).repeat(steps)
        start, rows, run_id = self.dp.global_step(), len(mask), self.dp.run_id
        return tf.data.Dataset.range(start, start + steps).map(
            lambda t: (x, y, (mask, tf.tile(tf.stack([tf.constant(run_id, tf.int64), t])[None], [rows, 1]))))

    def timed_fit(self, steps: int) -> float:
        """Seconds of the training loop of one ``fit`` of ``steps`` steps (:class:`.measuring.TrainingLoopClock`)."""
        clock = TrainingLoopClock()
        self.model.fit(self.dataset(steps).prefetch(2), epochs=1, verbose=0, callbacks=[clock])
        return clock.seconds


def _variant(name: str, label: str, engine, path, spec: Model | None = None) -> _Variant:
    """A built, compiled and warmed-up variant (the model under its dtype policy; ``spec`` default ``MODELS[name]``)."""
    spec = spec or MODELS[name]
    previous = keras.mixed_precision.global_policy().name
    keras.mixed_precision.set_global_policy(spec.policy)
    try:
        keras.utils.set_random_seed(0)
        model = spec.build()
    finally:
        keras.mixed_precision.set_global_policy(previous)
    loss = (keras.losses.SparseCategoricalCrossentropy(from_logits=True) if spec.text else
            keras.losses.CategoricalCrossentropy(from_logits=True))
    dp = None
    if engine is None:
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=loss)
    else:
        chunk = PHYSICAL_BATCH if "physical batch" in label else None
        dp = (_grouped_run(label, spec) if label in (VIEWS, USERS) else
              DPSGD(1.0, 1e-5, expected_batch_size=spec.expected, epochs=10_000, n=spec.n, engine=engine, path=path,
                    seed=0, physical_batch_size=chunk))
        model = dp.compile(model, loss=loss)
    variant = _Variant(model, dp, _batch(spec, _rows(spec, label)))
    variant.timed_fit(2)  # trace and warm up
    return variant


def measure(model_name: str, label: str, steps: int, batch_scale: int = 1) -> float:
    """Seconds of one timed ``fit`` of ``steps`` steps of a freshly built variant (after its warm-up), its
    expected batch ``batch_scale`` times the model's."""
    engine, path = {lab: (e, p) for lab, e, p in variants(model_name)}[label]
    spec = MODELS[model_name]
    spec = dataclasses.replace(spec, expected=spec.expected * batch_scale)
    return _variant(model_name, label, engine, path, spec).timed_fit(steps)


def _peak_rss_growth(model_name: str, label: str, steps: int, batch_scale: int = 1) -> float | None:
    code = (f"from tfdpmech.experiments import dpsgd_speed as s; from tfdpmech.experiments.peak_rss import peak_rss_mib; "
            f"before = peak_rss_mib(); s.measure({model_name!r}, {label!r}, {steps}, {batch_scale}); "
            "print(peak_rss_mib() - before)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    try:
        return float(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return None


def _memory_per_record(model_name: str, label: str, steps: int, at_batch: float | None) -> float | None:
    """KiB of peak memory per record: the growth of the peak from a batch of L to one of 4L, divided by 3L
    (fresh processes). The fixed part (TensorFlow, the traced graph, the compile-time probe) cancels."""
    at_four = _peak_rss_growth(model_name, label, steps, batch_scale=MEMORY_BATCH_SCALE)
    if at_batch is None or at_four is None:
        return None
    return 1024.0 * (at_four - at_batch) / ((MEMORY_BATCH_SCALE - 1) * MODELS[model_name].expected)


def run(models=None, repeats: int = 5, steps: dict | None = None, memory: bool = True, log=print) -> dict:
    """Interleaved timing of every variant of every model; see the module docstring."""
    models = tuple(MODELS) if models is None else tuple(models)
    steps = {name: MODELS[name].steps for name in models} | dict(steps or {})
    result = {"tensorflow": tf.__version__, "keras": keras.__version__,
              "python": ".".join(map(str, sys.version_info[:3])), "repeats": repeats, "models": {}}
    for name in models:
        labels = variants(name)
        built = {label: _variant(name, label, engine, path) for label, engine, path in labels}
        for variant in built.values():  # untimed: the kernel cache the later builds cleared
            variant.timed_fit(1)
        seconds = {label: [] for label, _, _ in labels}
        for r in range(repeats):
            for label, _, _ in labels[r % len(labels):] + labels[:r % len(labels)]:
                seconds[label].append(built[label].timed_fit(steps[name]))
            log(f"  {name} repeat {r + 1}/{repeats}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in seconds.items()))
        spec, table = MODELS[name], {}
        for label, _, _ in labels:
            row = {"rows": _rows(spec, label),
                   "examples_per_second": median_range([steps[name] * spec.expected / t for t in seconds[label]]),
                   "ratio_to_nonprivate": median_range([a / b for a, b in zip(seconds["nonprivate"], seconds[label])])}
            if label.startswith("tfdpmech") and built[label].dp is not None:
                row["path"] = built[label].dp.path
            fastest_tfp = [k for k in seconds if k.startswith("tensorflow_privacy")]
            if fastest_tfp and label.startswith("tfdpmech"):
                row["ratio_to_tensorflow_privacy"] = median_range(
                    [min(seconds[k][i] for k in fastest_tfp) / t for i, t in enumerate(seconds[label])])
            if memory and label in MEMORY_VARIANTS:
                row["peak_memory_mib"] = _peak_rss_growth(name, label, steps[name])
                row["memory_per_record_kib"] = _memory_per_record(name, label, steps[name], row["peak_memory_mib"])
            table[label] = row
        result["models"][name] = {"expected_batch": spec.expected, "padded_rows": _rows(spec, "padded to P"),
                                  "n": spec.n, "policy": spec.policy, "steps": steps[name], "variants": table}
        del built
    return result


MEMORY_BATCH_SCALE = 4  # the per-record memory: the peak at batch 4L against the peak at L
MEMORY_VARIANTS = ("nonprivate", "tfdpmech fast_clipping",  # the variants whose memory is measured
                   f"tfdpmech fast_clipping, physical batch {PHYSICAL_BATCH}")


def run_isolated(models, repeats: int = 5, memory: bool = True, steps: dict | None = None, done=None,
                 on_model=None) -> dict:
    """:func:`run` for each model in a fresh process (its progress on stderr), the results merged, so that a
    model's timings do not depend on what the models measured before it left in the process.

    ``done``: a result of earlier models (kept, those models not run again); ``on_model(result)``: called with the
    merged result after each model, so that a long run can be kept as it goes.

    Raises:
        ValueError: ``models`` names none or an unknown model, or ``repeats`` is below 1.
    """
    models = tuple(models)
    unknown = sorted(set(models) - set(MODELS))
    if unknown or not models:
        raise ValueError(f"models={models!r}: give some of {', '.join(MODELS)}")
    if int(repeats) < 1:
        raise ValueError(f"repeats={repeats!r}: give at least 1")
    result = done
    for name in models:
        if result is not None and name in result["models"]:
            continue
        code = (f"import json, sys; from tfdpmech.experiments import dpsgd_speed as s; "
                f"r = s.run(models=({name!r},), repeats={int(repeats)}, memory={bool(memory)}, "
                f"steps={dict(steps or {})!r}, "
                f"log=lambda m: print(m, file=sys.stderr, flush=True)); print(json.dumps(r))")
        out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, check=True)
        one = json.loads(out.stdout.strip().splitlines()[-1])
        if result is None:
            result = one
        else:
            result["models"].update(one["models"])
        if on_model is not None:
            on_model(result)
    return result


def format_table(result: dict) -> str:
    """A markdown table of :func:`run`'s result."""
    lines = [f"DP-SGD speed on TensorFlow {result['tensorflow']}, Keras {result['keras']}, Python {result['python']} "
             f"({result['repeats']} interleaved repeats; median [min–max])", "",
             "| model | variant | rows | examples/s | ÷ non-private | ÷ tensorflow-privacy's fastest | peak memory (MiB) | "
             "memory per record (KiB) |",
             "|---|---|---|---|---|---|---|---|"]

    for name, m in result["models"].items():
        policy = "" if m.get("policy", "float32") == "float32" else f", {m['policy']}"
        for label, row in m["variants"].items():
            memory, per_record = row.get("peak_memory_mib"), row.get("memory_per_record_kib")
            path = f" ({row['path']})" if row.get("path") and row["path"] not in label else ""
            lines.append(f"| {name} (batch {m['expected_batch']}{policy}) | {label}{path} | {row.get('rows', '–')} | "
                         f"{cell(row['examples_per_second'])} | {cell(row['ratio_to_nonprivate'])} | "
                         f"{cell(row.get('ratio_to_tensorflow_privacy'))} | {'–' if memory is None else f'{memory:.0f}'} | "
                         f"{'–' if per_record is None else f'{per_record:.1f}'} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    """``python -m tfdpmech.experiments.dpsgd_speed [--models tanh_cnn,vit] [--out DIR]``: the table, and
    ``results.json`` + ``results.md`` in ``DIR`` when given, written after each model (a run stopped half-way
    resumes: the models already in ``DIR`` are kept; ``--no-resume`` starts it afresh)."""
    parser = argparse.ArgumentParser(prog="python -m tfdpmech.experiments.dpsgd_speed", description=__doc__)
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-memory", action="store_true", help="skip the fresh-process memory probes")
    parser.add_argument("--out", default=None, help="a folder for results.json and results.md, written as each "
                        "model finishes; the models already there are kept")
    parser.add_argument("--no-resume", action="store_true",
                        help="start --out afresh (its models measured again, the others dropped)")
    args = parser.parse_args(argv)
    models = tuple(m for m in args.models.split(",") if m)
    unknown = sorted(set(models) - set(MODELS))
    if unknown or not models:
        parser.error(f"--models={args.models!r}: give some of {', '.join(MODELS)}, comma-separated")
    if args.repeats < 1:
        parser.error(f"--repeats={args.repeats}: give at least 1")
    command = "python -m tfdpmech.experiments.dpsgd_speed " + " ".join(argv if argv is not None else sys.argv[1:])
    done = None
    if args.out and os.path.exists(os.path.join(args.out, "results.json")) and not args.no_resume:
        with open(os.path.join(args.out, "results.json"), encoding="utf-8") as fh:
            done = json.load(fh)  # the models measured there are kept
        here = {"repeats": args.repeats, "tensorflow": tf.__version__, "keras": keras.__version__,
                "python": ".".join(map(str, sys.version_info[:3]))}
        differs = {k: done.get(k) for k, v in here.items() if done.get(k) != v}
        if differs:
            parser.error(f"{args.out}/results.json was measured with {differs}, here {here}: pass the same --repeats "
                         "on the same stack, --no-resume, or another --out")

    def write(result):
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)
        with open(os.path.join(args.out, "results.md"), "w", encoding="utf-8") as fh:
            fh.write(f"# DP-SGD engine speed\n\nCommand: `{command}`. {device_description()}. `results.json` beside "
                     f"this file holds every number.\n\n{format_table(result)}\n")

    result = run_isolated(models, repeats=args.repeats, memory=not args.no_memory, done=done,
                          on_model=write if args.out else None)
    print(format_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
