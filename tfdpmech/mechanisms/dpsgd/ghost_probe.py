"""The compile-time probe of the ghost-norm path: every unit's norms against one gradient tape per record.

Before a model trains on the ghost-norm path (:mod:`.ghost_norms`), a probe batch and a random linear
probe loss are run both ways: the ghost-norm computation (traced as the train step traces it, the batch
dimension unknown) and a record-by-record loop of gradient tapes in inference mode (random layers then
compute the same function both ways). For every unit the per-record squared norm of its own weights'
gradient is compared with the loop's, and the plain gradient sum with the loop's sum. The probe sees what
no table of layers shows: a weight read outside its own layer (tied weights), a layer called twice inside
a container, a rule that does not fit a layer's configuration.

:func:`choose_rules` demotes a unit whose registered rule does not match to the alone rule
(:mod:`.layer_rules.alone`) and probes again; the model takes the ghost-norm path when every unit then
matches and no weight is used where no unit sees it.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from ...distribute import strategy_of
from .ghost_norms import assign_rules, ghost_clipped_sum, gradients, layer_units, unit_rules
from .layer_rules import ALONE
from .model_probe import probe_inputs

__all__ = ["ghost_norms_mismatch", "choose_rules", "probe_rtol"]

# float32 ghost norms agree with the loop to ~1e-6; an unseen use of a weight is off by far more. Under a
# mixed-precision policy the loop's own gradients are float16 / bfloat16 (about 3 and 2 significant digits)
_PROBE_RTOL = {"float16": 1e-2, "bfloat16": 5e-2}
_PROBE_RTOL_DEFAULT = 1e-3


def probe_rtol(model) -> float:
    """The probe's relative tolerance for the model's compute dtypes."""
    dtypes = {str(getattr(layer, "compute_dtype", "float32")) for layer in layer_units(model)}
    return max([_PROBE_RTOL.get(d, _PROBE_RTOL_DEFAULT) for d in dtypes] or [_PROBE_RTOL_DEFAULT])


def _probe_loss(y, y_pred):
    """A per-record probe loss: ``Σ r ⊙ output`` over every output, ``y`` = the random weights ``r``."""
    parts = [tf.reshape(tf.cast(r, tf.float32) * tf.cast(o, tf.float32), (tf.shape(o)[0], -1))
             for r, o in zip(tf.nest.flatten(y), tf.nest.flatten(y_pred))]
    return tf.add_n([tf.reduce_sum(p, axis=1) for p in parts])


def _rows(x, i: int):
    return tf.nest.map_structure(lambda t: t[i:i + 1], x)


def _unknown_batch(t):
    t = tf.convert_to_tensor(t)
    return tf.TensorSpec((None,) + tuple(t.shape[1:]), t.dtype)


def _own_message(exc) -> str:
    """The raised message of an error a traced function wraps in its call context."""
    lines = [line.strip() for line in str(exc).splitlines()]
    own = [line for line in lines if line and not line.endswith(":") and not line.startswith(
        ("•", "File ", "Arguments received", "Call arguments received", "in user code", "Exception encountered", "#"))]
    return (own[-1] if own else str(exc))[:400]


def _probe(model, rules, x):
    """``(why, units to demote)``: why the ghost norms are not exact on ``x`` (None when they are)."""
    try:
        outputs = model(x, training=False)
    except Exception as exc:  # pylint: disable=broad-except  (the exact path is taken; its own errors are the model's)
        return f"model {model.name!r} did not run on a probe batch ({type(exc).__name__})", []
    rng = np.random.default_rng(0)
    r = tf.nest.map_structure(lambda o: tf.constant(rng.normal(size=o.shape).astype(np.float32)), outputs)
    rows = int(tf.shape(tf.nest.flatten(outputs)[0])[0])
    traced = tf.function(lambda x, r, w: ghost_clipped_sum(model, _probe_loss, x, r, w, 1e30, False, rules=rules,
                                                           per_unit=True),
                         input_signature=[tf.nest.map_structure(_unknown_batch, x),
                                          tf.nest.map_structure(_unknown_batch, r), tf.TensorSpec((None,), tf.float32)])
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")  # one new function per probe: TensorFlow's retracing notice is not the user's concern
    try:
        summed, _, norms, by_unit = traced(x, r, tf.ones((rows,)))
    except (ValueError, TypeError, tf.errors.InvalidArgumentError) as exc:  # a unit called twice, shapes a rule rejects
        return f"the ghost-norm pass failed on a probe batch ({type(exc).__name__}: {_own_message(exc)})", []
    finally:
        logger.setLevel(level)
    variables = model.trainable_variables
    units = [u for u in layer_units(model) if id(u) in by_unit]
    owner = {id(v): u for u in units for v in u.trainable_variables}
    reference = [np.zeros(v.shape, np.float64) for v in variables]
    rtol, bad = probe_rtol(model), {}
    for i in range(rows):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(_probe_loss(_rows(r, i), model(_rows(x, i), training=False)))
        grads = [g.numpy().astype(np.float64) for g in gradients(tape, loss, variables)]
        total = np.sqrt(sum(float(np.sum(g * g)) for g in grads))
        for unit in units:
            want = np.sqrt(sum(float(np.sum(g * g)) for g, v in zip(grads, variables) if owner.get(id(v)) is unit))
            got = float(np.sqrt(max(float(by_unit[id(unit)][i]), 0.0)))
            if abs(got - want) > rtol * max(total, 1e-6):
                bad[id(unit)] = unit
        if abs(float(norms[i]) - total) > rtol * max(total, 1e-6) and not bad:
            return (f"the ghost norm of a probe record is {float(norms[i]):.6g}, its gradient's norm is {total:.6g}: "
                    "some use of a trainable weight happens outside the layer that owns it"), []
        reference = [a + g for a, g in zip(reference, grads)]
    # a gradient that is 0 in exact arithmetic (a key projection's bias under softmax) is float noise: the
    # floor is relative to the whole gradient's norm
    floor = 1e-3 * np.sqrt(sum(float(np.sum(w * w)) for w in reference))
    for v, got, want in zip(variables, summed, reference):
        if np.linalg.norm(got.numpy() - want) > rtol * max(np.linalg.norm(want), floor, 1e-6):
            if id(v) not in owner:
                return (f"the gradient of {v.name} has uses ghost norms do not see (read outside the layer that owns "
                        "it, e.g. tied weights)"), []
            bad[id(owner[id(v)])] = owner[id(v)]
    if bad:
        names = ", ".join(f"{u.name} ({type(u).__name__})" for u in bad.values())
        return f"the ghost norms of {names} differ from one gradient tape per record", list(bad.values())
    return None, []


class _Outcome:
    """One replica's probe result, a single object (``tf.distribute`` regroups it as a leaf)."""

    def __init__(self, why, demote):
        self.why, self.demote = why, demote


def _in_replicas(model, fn):
    strategy = strategy_of(model)
    if strategy is None or not tf.distribute.in_cross_replica_context():
        return fn()
    with strategy.scope():
        results = strategy.experimental_local_results(strategy.run(lambda: _Outcome(*fn())))
    outcome = next((res for res in results if res.why is not None), results[0])
    return outcome.why, outcome.demote


def choose_rules(model, x=None) -> tuple[dict | None, str | None]:
    """``(rules, None)`` when the ghost norms of ``model`` (with units demoted to the alone rule where their
    registered rule does not match) are exact on a probe batch, else ``(None, why)``. Under a
    ``tf.distribute`` strategy the probe runs in its replicas (where the gradients of its variables exist)."""
    x = probe_inputs(model) if x is None else x
    if x is None:
        return None, f"model {model.name!r} has no known input shape to probe"
    rules = unit_rules(model)
    if any(rule is None for rule in rules.values()):
        return None, "a trainable layer has no ghost-norm rule"
    for _ in range(2):
        why, demote = _in_replicas(model, lambda: _probe(model, rules, x))
        if why is None:
            return rules, None
        demotable = [u for u in demote if rules[id(u)] is not ALONE and ALONE.applies(u)]
        if not demotable:
            alone = [u for u in demote if rules[id(u)] is ALONE]
            if alone:  # a unit's own per-record gradients are exact unless its weights are read elsewhere too
                names = ", ".join(v.name for u in alone for v in u.trainable_variables)
                why += (f" even handled alone: some use of their weights ({names}) happens outside the layer that "
                        "owns it (tied weights)")
            return None, why
        rules.update({id(u): ALONE for u in demotable})
    return None, why


def ghost_norms_mismatch(model, x=None) -> str | None:
    """Why ghost norms are not exact for ``model`` on a probe batch, or None when they are; the rules that
    were found exact are kept for the model's train step (:func:`.ghost_norms.assign_rules`)."""
    rules, why = choose_rules(model, x)
    if rules is not None:
        assign_rules(model, rules)
    return why
