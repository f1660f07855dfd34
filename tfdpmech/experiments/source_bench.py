"""DP-SGD fed from a NumPy memmap against the same records in memory: examples/s of the same DP fit.

A DP-SGD ``fit`` samples a memmap where it lies (each Poisson step reads its sampled rows,
:mod:`tfdpmech.mechanisms.dpsgd.sampling.record_sources`), so a data set larger than memory costs only the reads of each
step. This benchmark measures what that costs: the same records (the bundled MNIST sample's 10,000 images),
the same model, run and seed, once from an array in memory and once from ``np.load(path, mmap_mode="r")`` of
the same array saved to disk; examples/s is the records of epochs 2 to 5 over their seconds (the first traces
the train step), and the ratio is taken within each repeat (the two fits interleaved, their order
alternating), reported as median [min–max]. Both fits train the same weights (the same Poisson batches and
noise), which the benchmark checks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import keras
import numpy as np

from ..data import load
from ..mechanisms.dpsgd import DPSGD, tanh_mlp
from ..models import tanh_cnn
from ..private_training import make_private
from .measuring import device_description, median_range

MODELS = {"tanh_cnn": tanh_cnn, "tanh_mlp": tanh_mlp}
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
EPOCHS = 5  # the first traces the train step; the other four are timed


class _EpochSeconds(keras.callbacks.Callback):
    """The seconds of every epoch after the first."""

    timed = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if epoch:
            self.timed += time.perf_counter() - self.start


def _records():
    """The bundled MNIST sample's 10,000 images and labels (real data, on every machine)."""
    splits = load("mnist_sample", seed=0)
    x = np.concatenate([splits.x_train, splits.x_test])
    return x, np.concatenate([splits.y_train, splits.y_test]).argmax(-1)


def _fit(model_name: str, x, y, batch: int, seed: int):
    """Examples/s of epochs 2 to 5 of a DP fit on ``x``, and the trained weights."""
    keras.utils.set_random_seed(seed)
    model = make_private(MODELS[model_name](), DPSGD(epsilon=3.0, delta=1e-5, n=len(x), expected_batch_size=batch,
                                                     epochs=EPOCHS, seed=seed))
    model.compile(loss=LOSS)
    seconds = _EpochSeconds()
    model.fit(x, y, callbacks=[seconds], verbose=0)
    return len(x) * (EPOCHS - 1) / seconds.timed, [w.numpy() for w in model.trainable_variables]


def run(models=("tanh_cnn", "tanh_mlp"), n: int = 10_000, batch: int = 512, repeats: int = 3, log=print) -> dict:
    """Examples/s of a DP fit from memory and from a memmap of the same records, per model, ``repeats`` times.

    Raises:
        AssertionError: the two fits of a repeat trained different weights (they would not be the same run).
    """
    x, y = _records()
    x, y = x[:n], y[:n]
    result = {"records": "images of the bundled MNIST sample", "n": len(x), "expected_batch_size": batch,
              "repeats": repeats, "models": {}}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "x.npy")
        np.save(path, x)
        mapped = np.load(path, mmap_mode="r")
        for name in models:
            speeds = {"memory": [], "memmap": []}
            ratios = []
            for r in range(repeats):
                order = ("memory", "memmap") if r % 2 == 0 else ("memmap", "memory")
                got = {}
                for source in order:
                    got[source] = _fit(name, x if source == "memory" else mapped, y, batch, seed=r)
                    speeds[source].append(got[source][0])
                for a, b in zip(got["memory"][1], got["memmap"][1]):
                    np.testing.assert_array_equal(a, b)  # the same run from either source
                ratios.append(got["memmap"][0] / got["memory"][0])
                log(f"source bench {name} repeat {r + 1}/{repeats}: memory {got['memory'][0]:.0f} ex/s, "
                    f"memmap {got['memmap'][0]:.0f} ex/s")
            result["models"][name] = {"memory_examples_per_second": median_range(speeds["memory"]),
                                      "memmap_examples_per_second": median_range(speeds["memmap"]),
                                      "memmap_over_memory": median_range(ratios)}
        del mapped
    return result


def format_table(result: dict) -> str:
    def cell(s, fmt):
        return f"{s['median']:{fmt}} [{s['min']:{fmt}}–{s['max']:{fmt}}]"

    lines = [f"DP-SGD fit from a NumPy memmap vs the same records in memory ({result['n']:,} {result['records']}, "
             f"expected batch {result['expected_batch_size']}, {result['repeats']} interleaved repeats; median "
             "[min–max])", "", "| model | in memory, examples/s | memmap, examples/s | memmap ÷ memory |",
             "|---|---|---|---|"]
    for name, m in result["models"].items():
        lines.append(f"| {name} | {cell(m['memory_examples_per_second'], '.0f')} "
                     f"| {cell(m['memmap_examples_per_second'], '.0f')} | {cell(m['memmap_over_memory'], '.2f')} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    """``python -m tfdpmech.experiments.source_bench [--repeats 5] [--out DIR]``: the table, and ``results.json`` +
    ``results.md`` in ``DIR`` when given."""
    parser = argparse.ArgumentParser(prog="python -m tfdpmech.experiments.source_bench", description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=None, help="a folder for results.json and results.md")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats={args.repeats}: give at least 1")
    result = run(repeats=args.repeats)
    table = format_table(result)
    print(table)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)
        command = "python -m tfdpmech.experiments.source_bench " + " ".join(argv if argv is not None else sys.argv[1:])
        with open(os.path.join(args.out, "results.md"), "w", encoding="utf-8") as fh:
            fh.write(f"# DP-SGD from a memmap\n\nCommand: `{command}`. {device_description()}. `results.json` beside "
                     f"this file holds every number.\n\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
