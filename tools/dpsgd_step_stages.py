"""Where a ghost-norm DP-SGD step spends its time: the gradient computation in stages, against Keras's own.

For each model of the speed benchmark (:data:`tfdpmech.experiments.dpsgd_speed.MODELS`), on one random batch of
its expected size, times traced functions that stop after each stage of
:func:`tfdpmech.mechanisms.dpsgd.clipping.ghost_norms.ghost_clipped_sum`:

* ``forward``: the forward pass with every rule's taps recorded, and the loss;
* ``+ taps``: and the one backward pass to the taps (the per-record output gradients);
* ``+ norms``: and every layer's per-record squared norms (the layer registry's rules);
* ``+ sums``: and the clipped sum (book-keeping: each layer's weight gradient with ``c_i g_i``): the whole step's
  gradient;

beside ``nonprivate``: the mean loss's gradient by one ``tf.GradientTape``. Optimizer, sampling, noise and
``fit`` are left out. Each function is timed ``--calls`` times per round, in rotation over ``--rounds``; the
table gives the median over rounds of each round's median (milliseconds), and writes
``docs/results/dpsgd_stages/stages.md``.

    python tools/dpsgd_step_stages.py [--models tanh_cnn,conv1d_text] [--rounds 5] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import keras
import tensorflow as tf

from tfdpmech.experiments.dpsgd_speed import MODELS, _batch
from tfdpmech.mechanisms.dpsgd.clipping import ghost_norms
from tfdpmech.mechanisms.dpsgd.clipping.layer_rules.registry import select_rows

STAGES = ("forward", "+ taps", "+ norms", "+ sums")
OUT = os.path.join("docs", "results", "dpsgd_stages")


def _stage(model, loss_fn, stage: str):
    units = ghost_norms._units(model, None)

    @tf.function
    def step(x, y, weights):
        keep = weights > 0
        with tf.GradientTape(persistent=True) as tape:
            with ghost_norms._recording(units, tape, keep) as records:
                y_pred = model(x, training=True)
            total = tf.reduce_sum(select_rows(keep, loss_fn(y, y_pred) * weights))
        if stage == "forward":
            return [total]
        taps = [tensor for r in records for tensor, _ in r.tapped.taps]
        grads = tape.gradient(total, taps, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        if stage == "+ taps":
            return grads
        position = 0
        for r in records:
            r.grads = [select_rows(keep, tf.cast(g, tf.float32)) for g in grads[position:position + len(r.tapped.taps)]]
            position += len(r.tapped.taps)
        sq_norms = tf.add_n([r.rule.sq_norms(r.layer, r.tapped.saved, r.grads) for r in records])
        if stage == "+ norms":
            return [sq_norms]
        factors, _ = ghost_norms.clip_factors(sq_norms, 1.0)
        summed = []
        for r in records:
            own = r.rule.clipped_sum(r.layer, r.tapped.saved, r.grads, factors)
            if own is not None:
                summed += own
                continue
            for (tap, variables), g in zip(r.tapped.taps, r.grads):
                if variables:
                    scaled = tf.cast(g * tf.reshape(factors, [-1] + [1] * (g.shape.rank - 1)), tap.dtype)
                    summed += ghost_norms.gradients(tape, tap, variables, output_gradients=scaled)
        return summed
    return step


def _functions(name: str) -> dict:
    spec = MODELS[name]
    keras.mixed_precision.set_global_policy(spec.policy)
    keras.utils.set_random_seed(0)
    model = spec.build()
    keras.mixed_precision.set_global_policy("float32")
    x, y, mask = _batch(spec, spec.expected)
    loss_fn = keras.losses.CategoricalCrossentropy(from_logits=True, reduction="none")

    @tf.function
    def nonprivate(x, y, weights):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(loss_fn(y, model(x, training=True)))
        return tape.gradient(loss, model.trainable_variables)

    functions = {"nonprivate": nonprivate, **{stage: _stage(model, loss_fn, stage) for stage in STAGES}}
    args = (tf.constant(x), tf.constant(y), tf.constant(mask))
    return {label: (lambda f=f: [_value(t) for t in tf.nest.flatten(f(*args))]) for label, f in functions.items()}


def _value(t):
    """The computed value (an embedding's gradient is ``tf.IndexedSlices``: its values, not made dense)."""
    return (t.values if isinstance(t, tf.IndexedSlices) else t).numpy()


def measure(name: str, rounds: int, calls: int) -> dict:
    functions = _functions(name)
    for f in functions.values():
        f()  # trace
    times = {label: [] for label in functions}
    for _ in range(rounds):
        for label, f in functions.items():
            samples = []
            for _ in range(calls):
                start = time.perf_counter()
                f()
                samples.append(time.perf_counter() - start)
            times[label].append(1000 * statistics.median(samples))
    return {label: statistics.median(values) for label, values in times.items()}


def write(results: dict, out: str, rounds: int, calls: int) -> str:
    head = "| model (batch) | nonprivate | " + " | ".join(STAGES) + " | norms' share of the step |"
    lines = ["# Where a ghost-norm DP-SGD step spends its time", "",
             f"`python tools/dpsgd_step_stages.py --rounds {rounds} --calls {calls}`: the gradient computation of one "
             "step on one random batch of the model's expected size, stopped after each stage of the ghost-norm path "
             "(forward with taps; + the backward to the taps; + every layer's per-record norms; + the book-keeping "
             "clipped sum: the whole gradient), beside Keras's non-private gradient. Median milliseconds over rounds "
             f"of {calls} calls each; {len(os.sched_getaffinity(0))} CPU cores, TensorFlow {tf.__version__}, "
             f"Keras {keras.__version__}. Optimizer, sampling, noise and `fit` are not in these times; "
             "a stage that costs less than the timing noise can come out negative.", "",
             head, "|---" * (head.count("|") - 1) + "|"]
    for name, t in results.items():
        norms = t["+ norms"] - t["+ taps"]
        lines.append(f"| {name} ({MODELS[name].expected}) | {t['nonprivate']:.1f} | "
                     + " | ".join(f"{t[s]:.1f}" for s in STAGES) + f" | {100 * norms / t['+ sums']:.0f} % |")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "stages.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tanh_cnn,mlp,conv1d_text,conv1d_rows,groupnorm_cnn,depthwise_cnn,"
                                            "transpose_cnn,conv3d_net,vit,transformer")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    for name in ("rounds", "calls"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}={getattr(args, name)}: give at least 1")
    unknown = sorted(set(args.models.split(",")) - set(MODELS))
    if unknown:
        parser.error(f"--models: {unknown} are not benchmark models; use any of {sorted(MODELS)}")
    results = {}
    for name in args.models.split(","):
        results[name] = measure(name, args.rounds, args.calls)
        print(name, {k: round(v, 2) for k, v in results[name].items()}, flush=True)
    print("wrote", write(results, args.out, args.rounds, args.calls))


if __name__ == "__main__":
    main()
