"""How long ``fit`` waits after its last step for tf.data's autotuning thread.

A small CNN (two 3×3 convolutions of 64 channels on 32×32×3 inputs) trains one epoch of 20 steps of 32 records, in
three ways, each ``--repeats`` times in one process: Keras's own non-private ``fit`` on arrays (Keras's tf.data
pipeline, autotuning on), a DP-SGD ``fit`` on tfdpmech's Poisson stream as it runs (autotuning off,
:func:`tfdpmech.input_pipeline.without_autotune`) and the same DP ``fit`` with autotuning left on. For each: the
seconds from the call to its return and those of its training loop (``on_train_begin`` to ``on_train_end``).

    python tools/fit_teardown_wait.py [--repeats 5] [--out docs/results/fit_teardown]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from tfdpmech import DPSGD, make_private
from tfdpmech.experiments.measuring import TrainingLoopClock, device_description, format_median_range, median_range
from tfdpmech.mechanisms.dpsgd.sampling import poisson_sampling

N, BATCH = 640, 32
VARIANTS = ("non-private (Keras's pipeline)", "DP-SGD (autotuning off)", "DP-SGD with autotuning on")


def _model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
                             keras.layers.Conv2D(64, 3, padding="same"), keras.layers.GlobalAveragePooling2D(),
                             keras.layers.Dense(10)])


def _compiled(private: bool):
    model = _model()
    if private:
        model = make_private(model, DPSGD(3.0, 1e-5, expected_batch_size=BATCH, epochs=1000, n=N, seed=0))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    return model


def _batching(name: str) -> dict:
    """Keras's batches of 32 for the non-private fit; DP-SGD draws its own (expected size 32)."""
    return {"batch_size": BATCH} if name == VARIANTS[0] else {}


def _timed(name: str, model, x, y) -> tuple[float, float]:
    real = poisson_sampling.without_autotune
    if name == VARIANTS[2]:
        poisson_sampling.without_autotune = lambda ds: ds
    try:
        clock, start = TrainingLoopClock(), time.perf_counter()
        model.fit(x, y, epochs=1, verbose=0, callbacks=[clock], **_batching(name))
        return time.perf_counter() - start, clock.seconds
    finally:
        poisson_sampling.without_autotune = real


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="docs/results/fit_teardown")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.random((N, 32, 32, 3), dtype=np.float32)
    y = keras.utils.to_categorical(rng.integers(0, 10, N), 10).astype(np.float32)
    models = {VARIANTS[0]: _compiled(False), VARIANTS[1]: _compiled(True)}
    models[VARIANTS[2]] = models[VARIANTS[1]]
    for name in VARIANTS[:2]:
        models[name].fit(x, y, epochs=1, verbose=0, **_batching(name))  # trace
    seconds = {name: [] for name in VARIANTS}
    for r in range(args.repeats):
        for name in VARIANTS:
            seconds[name].append(_timed(name, models[name], x, y))
        print(f"repeat {r + 1}/{args.repeats}: " + ", ".join(
            f"{k}: fit {v[-1][0]:.2f} s, loop {v[-1][1]:.2f} s" for k, v in seconds.items()), file=sys.stderr)
    rows = {name: {"fit_seconds": median_range([f for f, _ in v]), "loop_seconds": median_range([l for _, l in v]),
                   "wait_seconds": median_range([f - l for f, l in v]), "every_repeat": v}
            for name, v in seconds.items()}
    result = {"tensorflow": tf.__version__, "keras": keras.__version__,
              "steps": N // BATCH, "repeats": args.repeats, "variants": rows}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1)
    lines = ["# The wait at the end of fit", "",
             f"Command: `python tools/fit_teardown_wait.py --repeats {args.repeats} --out {args.out}`. "
             f"{device_description()}; TensorFlow {result['tensorflow']}, Keras {result['keras']}. One epoch of "
             f"{result['steps']} steps of {BATCH} records (DP-SGD: expected batch {BATCH}); median [min–max] of "
             f"{args.repeats} repeats in one process.", "",
             "| variant | fit, call to return (s) | training loop (s) | wait after the last step (s) |",
             "|---|---|---|---|"]
    cell = format_median_range
    lines += [f"| {name} | {cell(r['fit_seconds'])} | {cell(r['loop_seconds'])} | {cell(r['wait_seconds'])} |"
              for name, r in rows.items()]
    lines += ["", "Each repeat's (fit, training loop) seconds:", ""]
    lines += [f"- {name}: " + ", ".join(f"({f:.3f}, {l:.3f})" for f, l in r["every_repeat"]) for name, r in rows.items()]
    with open(os.path.join(args.out, "results.md"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
