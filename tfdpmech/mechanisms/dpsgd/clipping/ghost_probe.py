"""The compile-time probe of the ghost-norm path: every unit's norms against each record's own gradient.

Before a model trains on the ghost-norm path (:mod:`.ghost_norms`), the ghost-norm computation runs once
on a probe batch with a random linear probe loss, in inference mode, and the same forward pass is
differentiated record by record (:func:`.ghost_norms.gradients_per_record`: one backward pass per record
through the whole network, which sees every use of every weight). For every unit the per-record norm of its
own weights' gradient is compared with the reference's, then each record's whole norm, then the plain
gradient sum with the reference's sum. The probe sees what no table of layers shows: a weight read outside
its own layer, a rule that does not fit a layer's configuration. A layer called more than once (tied
embeddings, a layer applied twice, weights shared across depth) is exact on the ghost-norm path when its
rule gives the cross terms between calls (:mod:`.layer_rules.shared_uses`); otherwise it is handled alone,
its calls' per-record vectors summed.

**Tolerance from rounding.** Both sides come from one forward pass, so they differ by the rounding of
their backward computations only, a small multiple of float32's unit roundoff ``u = 2⁻²⁴`` (the
``keras.applications`` catalogue, ``tests/mechanisms/dpsgd/test_applications.py``, holds each record's norm
to 1e-5 of one gradient tape per record). A unit passes when ``|ghost − reference| ≤ 2¹⁰ u · reference +
2⁶ u · ‖g_i‖`` (the second term, relative to the record's whole gradient, is the noise floor of a unit
whose gradient is tiny, as a deep network's first layers' are). A wrong rule or an unseen use of a weight is
off by a fraction of the unit's norm, thousands of times that. Comparing against a separate forward pass per
record instead (a batch of one) would let ReLU kinks flip on rounding and move a deep network's norms
by 0.1 %: the path would then depend on the initialisation. Under a float16 / bfloat16 policy ``u`` is that
dtype's, with smaller factors (:data:`_TOLERANCE`).

The probe runs eagerly: nothing is traced, so it costs one forward pass, one backward pass per probe record
and the rules' own work (seconds on a 150-layer ``keras.applications`` network); its decision is kept per
model (:func:`ghost_norms_mismatch` returns it again while the model's units and rules are unchanged).

**Groups.** A run whose clipping unit is a group of k rows (a record's K views, a user's records:
``group_size`` k > 1) is probed on groups: the probe batch repeated k times, every k consecutive rows (k
different records) one unit, each unit's norms against the summed gradient of its rows; a rule exact for rows
but not for groups is demoted like any other.

:func:`choose_rules` demotes a unit whose registered rule does not match to the alone rule
(:mod:`.layer_rules.alone`) and probes again; the model takes the ghost-norm path when every unit then
matches and no weight is used where no unit sees it.
"""

from __future__ import annotations

import weakref

import numpy as np
import tensorflow as tf

from ....distribute import strategy_of
from .ghost_norms import HandledAlone, assign_rules, ghost_clipped_sum, layer_units, unit_rules
from .layer_rules import ALONE, registered_rule
from .model_probe import probe_inputs

__all__ = ["ghost_norms_mismatch", "choose_rules", "probe_tolerance"]

# (relative to a unit's reference norm, relative to the record's whole norm), by the lowest compute dtype
_TOLERANCE = {"float32": (2.0 ** 10 * 2.0 ** -24, 2.0 ** 6 * 2.0 ** -24),
              "float16": (2.0 ** 4 * 2.0 ** -11, 2.0 ** 0 * 2.0 ** -11),
              "bfloat16": (2.0 ** 3 * 2.0 ** -8, 2.0 ** -1 * 2.0 ** -8)}
_NO_CLIP = 1e30  # the probe compares unclipped norms and sums
_DECIDED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # model -> (units and rules, rules, why)


def probe_tolerance(model) -> tuple[float, float]:
    """``(relative, floor)``: a unit's ghost norm passes within ``relative · reference + floor · ‖g_i‖``."""
    dtypes = {str(getattr(layer, "compute_dtype", "float32")) for layer in layer_units(model)}
    tolerances = [_TOLERANCE.get(d, _TOLERANCE["float32"]) for d in dtypes] or [_TOLERANCE["float32"]]
    return max(t[0] for t in tolerances), max(t[1] for t in tolerances)


def _probe_loss(y, y_pred):
    """A per-record probe loss: ``Σ r ⊙ output`` over every output, ``y`` = the random weights ``r``."""
    parts = [tf.reshape(tf.cast(r, tf.float32) * tf.cast(o, tf.float32), (tf.shape(o)[0], -1))
             for r, o in zip(tf.nest.flatten(y), tf.nest.flatten(y_pred))]
    return tf.add_n([tf.reduce_sum(p, axis=1) for p in parts])


def _own_message(exc) -> str:
    """The raised message of an error, without the call context Keras and TensorFlow wrap around it."""
    lines = [line.strip() for line in str(exc).splitlines()]
    own = [line for line in lines if line and not line.endswith(":") and not line.startswith(
        ("•", "File ", "Arguments received", "Call arguments received", "in user code", "Exception encountered", "#"))]
    return (own[-1] if own else str(exc))[:400]


def _row_norms(g: np.ndarray) -> np.ndarray:
    return np.sqrt(np.sum(np.square(g.reshape(g.shape[0], -1)), axis=1))


def _eager_or_traced(fn):
    """``fn()`` eagerly, or traced where an eager kernel refuses what its graph form runs (TensorFlow's CPU
    ``DepthwiseConv2D`` with unequal strides, on some CPUs)."""
    try:
        return fn()
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError):
        return tf.function(fn, autograph=False)()


def _grouped(x, k: int):
    """The probe batch repeated k times: every k consecutive rows then hold k different records, one group."""
    return x if k == 1 else tf.nest.map_structure(lambda t: tf.concat([t] * k, axis=0), x)


def _probe(model, rules, x, group_size: int = 1):
    """``(why, units to demote)``: why the ghost norms are not exact on ``x`` (None when they are); with
    ``group_size`` k > 1, of every k consecutive rows of ``x`` repeated k times (one clipping unit each)."""
    k = int(group_size)
    x = _grouped(x, k)
    try:
        outputs = _eager_or_traced(lambda: model(x, training=False))
    except Exception as exc:  # pylint: disable=broad-except  (the exact path is taken; its own errors are the model's)
        return f"model {model.name!r} did not run on a probe batch ({type(exc).__name__})", []
    rng = np.random.default_rng(0)
    r = tf.nest.map_structure(lambda o: tf.constant(rng.normal(size=o.shape).astype(np.float32)), outputs)
    rows = int(tf.shape(tf.nest.flatten(outputs)[0])[0])
    try:
        summed, _, norms, by_unit, reference = _eager_or_traced(lambda: ghost_clipped_sum(
            model, _probe_loss, x, r, tf.ones((rows,)), _NO_CLIP, False, rules=rules, per_unit=True, group_size=k))
    except HandledAlone as exc:  # a unit called twice whose rule has no cross terms: handled alone
        return f"the ghost-norm pass failed on a probe batch ({_own_message(exc)})", [exc.layer]
    except (ValueError, TypeError, tf.errors.InvalidArgumentError) as exc:  # shapes a rule rejects
        return f"the ghost-norm pass failed on a probe batch ({type(exc).__name__}: {_own_message(exc)})", []
    variables = model.trainable_variables
    units = [u for u in layer_units(model) if id(u) in by_unit]
    owner = {id(v): u for u in units for v in u.trainable_variables}
    reference = [g.numpy().astype(np.float64) for g in reference]
    squares = [_row_norms(g) ** 2 for g in reference]  # (rows,) per variable
    total = np.sqrt(np.sum(squares, axis=0))
    relative, floor = probe_tolerance(model)
    bad = {}
    for unit in units:
        want = np.sqrt(sum(sq for sq, v in zip(squares, variables) if owner.get(id(v)) is unit))
        got = np.sqrt(np.maximum(by_unit[id(unit)].numpy().astype(np.float64), 0.0))
        if np.any(np.abs(got - want) > relative * want + floor * total):
            bad[id(unit)] = unit
    norms = norms.numpy().astype(np.float64)[::k]  # each row carries its unit's norm: one per unit
    off = np.flatnonzero(np.abs(norms - total) > relative * total)
    if off.size and not bad:
        i = int(off[0])
        unit = "record" if k == 1 else f"group of {k} rows"
        return (f"the ghost norm of a probe {unit} is {norms[i]:.6g}, its gradient's norm is {total[i]:.6g}: some "
                "use of a trainable weight happens outside the layer that owns it"), []
    for v, got, g in zip(variables, summed, reference):
        scale = float(np.sum(_row_norms(g)))  # the size of a sum whose records may cancel
        if np.linalg.norm(got.numpy() - g.sum(axis=0)) > relative * scale + floor * float(np.sum(total)):
            if id(v) not in owner:
                return (f"the gradient of {v.name} has uses ghost norms do not see (read outside the layer that owns "
                        "it, e.g. tied weights)"), []
            bad[id(owner[id(v)])] = owner[id(v)]
    if bad:
        names = ", ".join(f"{u.name} ({type(u).__name__})" for u in bad.values())
        return f"the ghost norms of {names} differ from each record's own gradient", list(bad.values())
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


def choose_rules(model, x=None, group_size: int = 1) -> tuple[dict | None, str | None]:
    """``(rules, None)`` when the ghost norms of ``model`` (with units demoted to the alone rule where their
    registered rule does not match) are exact on a probe batch, else ``(None, why)``; with ``group_size`` k > 1
    the norms of groups of k rows (a record's views, a user's records) against each group's summed gradient.
    Under a ``tf.distribute`` strategy the probe runs in its replicas (where the gradients of its variables
    exist)."""
    x = probe_inputs(model) if x is None else x
    if x is None:
        return None, f"model {model.name!r} has no known input shape to probe"
    rules = unit_rules(model)
    if any(rule is None for rule in rules.values()):
        return None, "a trainable layer has no ghost-norm rule"
    for _ in range(3):  # a unit called twice without cross terms, then a rule that does not match: each demoted
        why, demote = _in_replicas(model, lambda: _probe(model, rules, x, group_size))
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


def _units_and_rules(model) -> tuple:
    """What the probe's decision depends on: each unit, its trainability, weights and registered rule."""
    return tuple((id(u), bool(u.trainable), tuple(id(v) for v in u.trainable_variables), id(registered_rule(u)))
                 for u in layer_units(model))


def ghost_norms_mismatch(model, x=None, group_size: int = 1) -> str | None:
    """Why ghost norms are not exact for ``model`` on a probe batch (for clipping units of ``group_size``
    rows), or None when they are; the rules that were found exact are kept for the model's train step
    (:func:`.ghost_norms.assign_rules`). The decision is kept for the model and given again while its units,
    their weights and rules and the group size are unchanged."""
    key = (_units_and_rules(model), int(group_size))
    decided = _DECIDED.get(model) if x is None else None
    if decided is not None and decided[0] == key:
        rules, why = decided[1], decided[2]
    else:
        rules, why = choose_rules(model, x, group_size)
        if x is None:
            _DECIDED[model] = (key, rules, why)
    if rules is not None:
        assign_rules(model, rules)
    return why
