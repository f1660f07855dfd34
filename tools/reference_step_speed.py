"""The reference modes' steps against the same network's non-private step, in one process.

AdLM, ILM and AFRRS as their authors' code trains them (``tfdpmech.mechanisms.adlm.AdLMReference``, ``ILMReference``,
``tfdpmech.mechanisms.afrrs.AFRRSReference``) train the authors' MNIST network (two 5×5 convolutions of 32 and 64
channels at full resolution, a 25-unit layer, batch-statistics normalisation). Each round times ``--steps`` steps of
each reference mode's loop as ``fit`` runs it (a batch gathered from the private array, the step, its loss read
back) and the same number of steps of a plain Keras training step of the same network (its own fresh copy, Adam
3e-4, softmax cross-entropy, the same gathered batches), the variants interleaved round by round after one untimed
warm-up each. Records: random images in [0, 1] (a step's cost does not depend on the pixels); the relevance of
AdLM and AFRRS from an untrained LeNet-5 (a cost, not an accuracy, is measured).

    python tools/reference_step_speed.py [--batch 1800] [--steps 5] [--repeats 5] [--out docs/results/reference_speed]

Writes ``<out>/results.md`` and ``results.json``: examples per second, median [min–max] over the rounds, and each
reference ÷ non-private.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("adlm_reference", "ilm_reference", "afrrs_reference")


def _references(batch: int, x, relevance_model):
    from tfdpmech.mechanisms.adlm import AdLMReference, ILMReference  # noqa: PLC0415
    from tfdpmech.mechanisms.afrrs import AFRRSReference  # noqa: PLC0415

    out = {}
    for name, cls, epsilon in (("adlm_reference", AdLMReference, 0.25), ("ilm_reference", ILMReference, 0.25),
                               ("afrrs_reference", AFRRSReference, 0.6)):
        ref = cls.from_total(epsilon, batch, seed=0)
        if ref.allocation == "relevance":
            ref.fit_relevance(relevance_model, x)
        ref.build(10, x.shape[1:])
        out[name] = ref
    return out


def measure(batch: int, steps: int, repeats: int) -> dict:
    import keras  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    import tensorflow as tf  # noqa: PLC0415

    from tfdpmech.mechanisms.adlm.networks import authors_mnist_network  # noqa: PLC0415
    from tfdpmech.mechanisms.adlm.reference_steps import (  # noqa: PLC0415
        reference_optimizer, to_code_range, train_relevance_model)

    n = 3 * batch
    rng = np.random.default_rng(0)
    x = rng.random((n, 28, 28, 1), dtype=np.float32)
    y = keras.utils.to_categorical(rng.integers(0, 10, n), 10).astype(np.float32)
    relevance = train_relevance_model(x[:200], y[:200], seed=0, epochs=1)
    refs = _references(batch, x, relevance)
    xc = to_code_range(x)
    plain_model = authors_mnist_network(10, refs["ilm_reference"].hidden_units, seed=0, input_shape=(28, 28, 1))
    optimizer = reference_optimizer()

    @tf.function
    def plain_step(xb, yb):
        with tf.GradientTape() as tape:
            logits = plain_model(xb, training=True)
            loss = tf.reduce_mean(keras.losses.categorical_crossentropy(yb, logits, from_logits=True))
        grads = tape.gradient(loss, plain_model.trainable_variables)
        optimizer.apply_gradients(zip(grads, plain_model.trainable_variables))
        return loss

    steppers = {"nonprivate": plain_step, **{name: ref._step for name, ref in refs.items()}}

    def timed(step) -> float:
        start = time.perf_counter()
        for _ in range(steps):
            idx = rng.permutation(n)[:batch]
            float(step(tf.constant(xc[idx]), tf.constant(y[idx])))  # as fit reads each step's loss
        return steps * batch / (time.perf_counter() - start)

    for step in steppers.values():  # the trace and a warm step, untimed
        timed(step)
    rows = {name: [] for name in steppers}
    for repeat in range(repeats):
        for name, step in steppers.items():
            rows[name].append(timed(step))
        print(f"round {repeat + 1}/{repeats}: " + ", ".join(f"{k} {v[-1]:.0f} ex/s" for k, v in rows.items()),
              flush=True)
    ratios = {name: [r / p for r, p in zip(rows[name], rows["nonprivate"])] for name in MODES}
    return {"batch": batch, "steps": steps, "repeats": repeats, "examples_per_second": rows, "ratio": ratios}


def report(result: dict, command: str) -> str:
    from tfdpmech.experiments.measuring import device_description  # noqa: PLC0415

    def cell(values, fmt):
        return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}–{fmt.format(max(values))}]"

    lines = ["# The reference modes' steps against the same network's non-private step", "",
             f"Command: `{command}`. {device_description()}. The authors' MNIST network at batch {result['batch']}; "
             f"{result['repeats']} interleaved rounds of {result['steps']} steps each; median [min–max] over the "
             "rounds. `results.json` beside this file holds every number.", "",
             "| variant | examples/s | ÷ non-private (same round) |", "|---|---|---|"]
    rows = result["examples_per_second"]
    lines.append(f"| non-private (Adam 3e-4, cross-entropy) | {cell(rows['nonprivate'], '{:.0f}')} | 1 |")
    for name in MODES:
        lines.append(f"| {name} | {cell(rows[name], '{:.0f}')} | {cell(result['ratio'][name], '{:.2f}')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1800, help="records a step (the authors' code: 1,800)")
    parser.add_argument("--steps", type=int, default=5, help="steps a round times per variant")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "results", "reference_speed"))
    args = parser.parse_args(argv)
    for name in ("batch", "steps", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}={getattr(args, name)}: give at least 1")
    sys.path.insert(0, ROOT)
    result = measure(args.batch, args.steps, args.repeats)
    command = "python tools/reference_step_speed.py " + " ".join(argv if argv is not None else sys.argv[1:])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
    text = report(result, command.strip())
    with open(os.path.join(args.out, "results.md"), "w", encoding="utf-8") as fh:
        fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
