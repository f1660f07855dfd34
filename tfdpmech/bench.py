"""Throughput benchmark (``make bench``): examples/s of each method on the same model and batch size.

For the paper's MNIST CNN and for an MLP, in one process: non-private training, AdLM, ILM and
DP-SGD (every tensorflow-privacy path available for the model), plus peak memory and AdLM's
one-time preprocessing cost (relevance + perturbation) in units of one non-private epoch.
Ratios are taken within this one run, since absolute times on shared machines are noisy.
Writes ``bench/results.json`` and prints the ratios.

Usage: ``python -m tfdpmech.bench [--out bench/results.json] [--steps 30] [--batch-size 200]``
"""

from __future__ import annotations

import argparse
import json
import os
import time

import keras
import tensorflow as tf

from . import data as data_module
from .compare import MODEL_FAMILIES, PeakMemory
from .losses import TaylorCrossEntropy, taylor_coefficients
from .mechanisms import AdLM, ILM


class StepTimer(keras.callbacks.Callback):
    """Wall time of the training batches after ``warmup`` batches (tracing excluded)."""

    def __init__(self, warmup: int):
        super().__init__()
        self.warmup = warmup
        self.times: list[float] = []

    def on_train_batch_end(self, batch, logs=None):
        self.times.append(time.perf_counter())

    def examples_per_second(self, batch_size: int) -> float:
        timed = self.times[self.warmup - 1:]
        return batch_size * (len(timed) - 1) / (timed[-1] - timed[0])


def _throughput(model, dataset, steps: int, batch_size: int, warmup: int = 3) -> tuple[float, int]:
    timer = StepTimer(warmup)
    with PeakMemory() as memory:
        model.fit(dataset.repeat(), steps_per_epoch=steps + warmup, epochs=1, verbose=0, callbacks=[timer])
    return timer.examples_per_second(batch_size), memory.peak_bytes


def _coefficient_dataset(x, phi, batch_size):
    return tf.data.Dataset.from_tensor_slices((x, phi)).shuffle(len(x), seed=0).batch(batch_size, drop_remainder=True)


def bench_family(family: str, x, y, x_public, y_public, *, batch_size: int, steps: int, log=print) -> dict:
    """Measure every method for one model family; returns examples/s, memory and ratios."""
    private_builder, standard_builder = MODEL_FAMILIES[family]
    n, shape, classes = len(x), x.shape[1:], y.shape[1]
    out: dict = {"examples_per_second": {}, "peak_memory_mb": {}}

    def record(name, eps_and_mem):
        out["examples_per_second"][name] = eps_and_mem[0]
        out["peak_memory_mb"][name] = eps_and_mem[1] / 2**20
        log(f"  {family:4s} {name:22s} {eps_and_mem[0]:9.0f} examples/s")

    keras.utils.set_random_seed(0)
    model = private_builder(classes, input_shape=shape)
    model.compile(keras.optimizers.Adam(1e-3), loss=TaylorCrossEntropy(batch_size=batch_size))
    record("nonprivate", _throughput(model, _coefficient_dataset(x, taylor_coefficients(y), batch_size),
                                     steps, batch_size))
    epoch_seconds = n / out["examples_per_second"]["nonprivate"]

    relevance_model = private_builder(classes, input_shape=shape)
    relevance_model.compile(keras.optimizers.Adam(1e-3), loss=TaylorCrossEntropy())
    relevance_model.fit(x_public, y_public, epochs=1, batch_size=50, verbose=0)
    for name, cls in (("adlm", AdLM), ("ilm", ILM)):
        keras.utils.set_random_seed(0)
        start = time.perf_counter()
        mech = cls.from_total(1.0, batch_size, seed=0)
        if name == "adlm":
            mech.fit_relevance(relevance_model, x, y)
        model = private_builder(classes, input_shape=shape)
        data = mech.perturb(x, y, model)
        out.setdefault("preprocessing_seconds", {})[name] = time.perf_counter() - start
        model.compile(keras.optimizers.Adam(1e-3), loss=mech.loss())
        record(name, _throughput(model, data.to_dataset(seed=0), steps, batch_size))
    out["preprocessing_in_nonprivate_epochs"] = {
        k: v / epoch_seconds for k, v in out["preprocessing_seconds"].items()}

    keras.utils.set_random_seed(0)
    model = standard_builder(classes, input_shape=shape)
    model.compile(keras.optimizers.Adam(1e-3), loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    labels = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(n, seed=0).batch(batch_size, drop_remainder=True)
    record("nonprivate_standard", _throughput(model, labels, steps, batch_size))
    try:
        from .dpsgd import DPSGD, supports_fast_clipping
    except ImportError as exc:  # pragma: no cover - Keras 3 stack
        out["dpsgd_skipped"] = str(exc)
    else:
        paths = (["fast_clipping"] if supports_fast_clipping(standard_builder(classes)) else []) + [
            "vectorized", "microbatch"]
        for path in paths:
            keras.utils.set_random_seed(0)
            dp = DPSGD(1.0, 1e-5, batch_size, epochs=1000, n=n, path=path, learning_rate=1e-3)
            model = dp.compile(standard_builder(classes, input_shape=shape))
            # the DP Keras optimizers cost batch_size² per step: time fewer steps
            dp_steps = max(3, steps // 6) if path == "microbatch" else steps
            record(f"dpsgd_{path}", _throughput(model, dp.dataset(x, y, seed=0), dp_steps, batch_size))

    eps = out["examples_per_second"]
    ratios = {"adlm_vs_nonprivate": eps["adlm"] / eps["nonprivate"], "ilm_vs_nonprivate": eps["ilm"] / eps["nonprivate"]}
    for path in ("fast_clipping", "vectorized", "microbatch"):
        key = f"dpsgd_{path}"
        if key in eps:
            ratios[f"{key}_vs_nonprivate_standard"] = eps[key] / eps["nonprivate_standard"]
            ratios[f"adlm_vs_{key}"] = eps["adlm"] / eps[key]
    out["ratios"] = ratios
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tfdpmech.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join("bench", "results.json"))
    parser.add_argument("--steps", type=int, default=30, help="timed steps per method (after 3 warm-up steps)")
    parser.add_argument("--batch-size", default="mlp=200,cnn=50",
                        help="per family; the CNN uses 50 because tensorflow-privacy's microbatch optimizers need "
                             "memory growing with batch_size² (23 GB at 250)")
    parser.add_argument("--families", default="mlp,cnn")
    args = parser.parse_args(argv)
    splits = data_module.load("mnist_sample")
    x_public, y_public = splits.x_train[:1000], splits.y_train[:1000]
    x, y = splits.x_train[1000:], splits.y_train[1000:]
    batch_sizes = dict(item.split("=") for item in args.batch_size.split(","))
    results = {
        "environment": {"tensorflow": tf.__version__, "keras": keras.__version__, "cpu_count": os.cpu_count(),
                        "device": "GPU" if tf.config.list_logical_devices("GPU") else "CPU"},
        "batch_size": batch_sizes, "steps": args.steps, "n": len(x),
    }
    print(f"benchmark: batch sizes {batch_sizes}, {args.steps} timed steps per method, n={len(x)}")
    for family in args.families.split(","):
        results[family] = bench_family(family, x, y, x_public, y_public, batch_size=int(batch_sizes[family]),
                                       steps=args.steps)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(results, fh, indent=2)
    print("\nratios (same process, same model and batch size):")
    for family in args.families.split(","):
        for key, value in results[family]["ratios"].items():
            print(f"  {family:4s} {key:40s} {value:8.3f}")
        for key, value in results[family]["preprocessing_in_nonprivate_epochs"].items():
            print(f"  {family:4s} {key + ' preprocessing (non-private epochs)':40s} {value:8.2f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
