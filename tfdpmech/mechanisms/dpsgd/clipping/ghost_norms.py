"""Ghost norms: per-example clipped gradient sums from one backward pass (``path="fast_clipping"``).

The method of :mod:`.clipped_sums`. The model is cut into *units*
(:func:`layer_units`): every layer with a rule in the layer registry (:mod:`.layer_rules`), every layer
that calls a sub-layer several times per record (recurrent layers, ``TimeDistributed``), and every other
layer that holds weights and no sub-layer; containers (nested models, ``MultiHeadAttention``) are opened.
Each trainable unit has a rule: its registered one, or the alone rule (:mod:`.layer_rules.alone`). Then

1. one forward pass in which every unit runs its rule's forward, exposing its taps;
2. one backward pass of ``Σ_i w_i ℓ_i`` to every tap: each record's output gradients (layers that do not
   mix records: tap row i depends on record i only);
3. each unit's per-record squared weight-gradient norm from its taps' gradients (the rule's ``sq_norms``),
   summed over the units, gives ``‖∇θ ℓ_i‖`` and the clip factors ``c_i = min(1, C/‖∇θ ℓ_i‖)``; a unit
   called more than once (a layer applied twice, weights shared across depth, tied input and output
   embeddings) has the norm of the sum of its calls' gradients, cross terms included
   (:mod:`.layer_rules.shared_uses`);
4. each unit's clipped sum ``Σ_i c_i ∇W ℓ_i``: its rule's own, or the local weight gradient of each tap
   with the output gradients ``c_i g_i`` (Bu et al. 2023's book-keeping), no second backward pass through
   the network; summed over a unit's calls.

Rows whose weight ``w_i`` is 0 (the padding rows of a Poisson batch) are **selected out**, never
multiplied by 0: every unit sees a zero input for them, their loss is replaced by 0 and their output
gradients are set to 0, so a row whose forward pass gives NaN or inf contributes exactly 0 and no NaN.
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref

import keras
import tensorflow as tf

from .layer_rules import ALONE, registered_classes, registered_rule
from .layer_rules.groups import row_groups
from .layer_rules.registry import compute_dtype, full_precision_weights, is_per_record, select_rows, watching
from .layer_rules.shared_uses import shared_sq_norms

__all__ = ["GHOST_LAYERS", "layer_units", "unit_rules", "assign_rules", "ghost_unsupported_layers", "own_weights",
           "gradients", "gradients_per_record", "clip_factors", "select_rows", "ghost_clipped_sum",
           "backward_loss_scale", "layer_paths", "HandledAlone"]

GHOST_LAYERS = registered_classes()  # the layer classes with a rule of their own
_TINY = 1e-12
# layers that call a sub-layer several times per record: one unit, never opened
_REPEATED_CALLS = tuple(c for c in (getattr(keras.layers, "RNN", None), getattr(keras.layers, "TimeDistributed", None))
                        if c is not None)
_ASSIGNED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # model -> {id(unit): rule}, set at compile


# --------------------------------------------------------------------------------------------
# Units and their rules
# --------------------------------------------------------------------------------------------
def layer_units(model) -> list:
    """The units of ``model`` (see the module docstring), each once, in the order Keras lists its layers."""
    units, seen = [], set()

    def visit(layer):
        if id(layer) in seen:
            return
        seen.add(id(layer))
        children = list(layer._flatten_layers(include_self=False, recursive=False))  # Keras 2.15 and 3
        if registered_rule(layer) is not None or isinstance(layer, _REPEATED_CALLS) or not children:
            units.append(layer)
            return
        for child in children:
            visit(child)

    for layer in model._flatten_layers(include_self=False, recursive=False):
        visit(layer)
    return units


def unit_rules(model) -> dict:
    """``{id(unit): rule}`` for the trainable units: the rules :func:`assign_rules` stored at compile, else
    each unit's registered rule, else the alone rule where it applies, else None (no ghost norm)."""
    assigned = _ASSIGNED.get(model)
    rules = {}
    for unit in layer_units(model):
        if unit.trainable_variables:
            rule = assigned.get(id(unit)) if assigned else None
            rules[id(unit)] = rule or registered_rule(unit) or (ALONE if ALONE.applies(unit) else None)
    return rules


def assign_rules(model, rules: dict) -> None:
    """Keep the rules the compile-time probe chose for ``model``'s units (:func:`unit_rules` reads them)."""
    _ASSIGNED[model] = dict(rules)


def layer_paths(model) -> dict:
    """``{layer name: rule family}`` of the trainable units ("alone" for those handled alone; None: no rule)."""
    rules = unit_rules(model)
    return {unit.name: (rules[id(unit)].family if rules.get(id(unit)) else None)
            for unit in layer_units(model) if id(unit) in rules}


def ghost_unsupported_layers(model) -> list[str]:
    """The trainable units no rule handles: empty when ``"fast_clipping"`` applies. (Weights outside every unit,
    a model's own ``add_weight``, are a unit of their own: :func:`own_weights`.)"""
    rules = unit_rules(model)
    return [f"{u.name} ({type(u).__name__})" for u in layer_units(model) if id(u) in rules and rules[id(u)] is None]


def own_weights(model) -> list:
    """The trainable weights outside every unit (a subclassed model's own ``add_weight`` read in its ``call``):
    one unit of their own, each record's gradient of them taken by its own backward pass through the
    recorded forward (:func:`gradients_per_record`), while the layers stay on the ghost-norm path."""
    covered = {id(v) for u in layer_units(model) for v in u.trainable_variables}
    return [v for v in model.trainable_variables if id(v) not in covered]


def gradients(tape, target, variables, output_gradients=None):
    """``tape.gradient`` as dense tensors, zeros for variables ``target`` does not reach.

    (``unconnected_gradients=ZERO`` fails on Keras 3 variables, whose ``dtype`` is a string.)
    """
    grads = tape.gradient(target, variables, output_gradients=output_gradients)
    return [tf.zeros(v.shape, tf.as_dtype(v.dtype)) if g is None else tf.convert_to_tensor(g)
            for v, g in zip(variables, grads)]


def backward_loss_scale(layers) -> float:
    """The fixed loss scale of the DP step's backward pass: ``2**8`` when a layer computes in float16 (its
    small output gradients would underflow), else 1. Fixed, not dynamic: a scale that moved with whether a
    batch overflowed would carry information about the records into later steps."""
    return 2.0 ** 8 if any(compute_dtype(layer) == tf.float16 for layer in layers) else 1.0


# --------------------------------------------------------------------------------------------
# The forward pass with every unit's taps
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Record:
    layer: object
    rule: object
    tapped: object
    local: object  # a tape of this unit's own forward only: its book-keeping gradients stop at its inputs
    grads: list = dataclasses.field(default_factory=list)


@contextlib.contextmanager
def _recording(units, tape, keep):
    """Run each ``(unit, rule)`` through its rule's forward and keep what it taps; restore on exit.

    Each unit's forward is also recorded on a tape of its own (:attr:`_Record.local`): a weight gradient
    taken there walks that unit's operations only. Taken on ``tape``, it would walk every operation
    upstream of the unit too (the tape differentiates everything its target depends on), which makes
    tracing the step quadratic in the depth of the network."""
    records: list[_Record] = []
    saved = []

    def make_call(layer, rule):
        def call(inputs, *args, **kwargs):  # every call of a layer is a record of its own (a use of its weights)
            first = (tf.nest.flatten(inputs) or [None])[0]
            use = rule
            if not rule.shared_inputs and isinstance(first, tf.Tensor) and first.shape.rank \
                    and not is_per_record(first, keep):  # e.g. a relative-position table (DeBERTa): this call alone
                if not ALONE.applies(layer):
                    raise ValueError(f"layer {layer.name!r} is called on an input without one row per record and draws "
                                     "random numbers (a dropout rate): use path='vectorized'")
                use = ALONE
            with tf.GradientTape(persistent=True) as local, watching((tape, local)):
                with full_precision_weights() if use.full_precision_weights else contextlib.nullcontext():
                    tapped = use.forward(layer, inputs, keep, args, kwargs)
            for tensor, _ in tapped.taps:
                tape.watch(tensor)
            records.append(_Record(layer, use, tapped, local))
            return tapped.output
        return call

    try:
        for layer, rule in units:
            saved.append((layer, layer.__dict__.get("call")))
            object.__setattr__(layer, "call", make_call(layer, rule))
        yield records
    finally:
        for layer, original in saved:
            if original is None:
                object.__delattr__(layer, "call")
            else:
                object.__setattr__(layer, "call", original)


# --------------------------------------------------------------------------------------------
# The clipped sum
# --------------------------------------------------------------------------------------------
def clip_factors(sq_norms, l2_norm_clip: float):
    """``(min(1, C/‖g_i‖), ‖g_i‖)`` from the squared norms (Abadi et al. 2016, Algorithm 1, "clip gradient")."""
    norms = tf.sqrt(tf.maximum(sq_norms, 0.0))
    return tf.minimum(1.0, l2_norm_clip / tf.maximum(norms, _TINY)), norms


def _units(model, rules, group_size: int = 1):
    rules = unit_rules(model) if rules is None else rules
    units = [(u, rules.get(id(u))) for u in layer_units(model) if u.trainable_variables]
    missing = [u.name for u, rule in units if rule is None]
    if missing:
        raise ValueError(f"no ghost-norm rule handles the layers {missing}; use path='vectorized'")
    if group_size > 1:  # a rule without per-unit reductions is handled alone (its per-row vectors, summed by group)
        units = [(u, rule if rule.groups or not ALONE.applies(u) else ALONE) for u, rule in units]
        ungrouped = [u.name for u, rule in units if not rule.groups]
        if ungrouped:
            raise ValueError(f"the rules of layers {ungrouped} compute no norm of a group of rows and the layers "
                             "cannot be handled alone (a dropout rate); use path='vectorized'")
    return units


def _per_unit(t, k: int):
    """``(B,)`` per-row values summed per group of k rows: ``(B/k,)``."""
    return t if k == 1 else tf.reduce_sum(tf.reshape(t, (-1, k)), axis=1)


def ghost_clipped_sum(model, loss_fn, x, y, weights, l2_norm_clip, training, *, rules=None, per_unit=False,
                      group_size: int = 1):
    """``(Σ_i w_i clip_C(∇θ ℓ_i), y_pred, ‖∇θ ℓ_i‖)`` by ghost norms (see the module docstring).

    Args:
        rules: ``{id(unit): rule}`` (default :func:`unit_rules`).
        per_unit: also return ``{id(unit): (B,) squared norms}`` and, as a reference, each record's gradient
            of every trainable variable, ``(B, *shape)`` per variable, by automatic differentiation of the same
            forward pass (the compile-time probe compares the two).
        group_size: k: every k consecutive rows are one clipping unit (a record's views, a user's records),
            their weighted gradients summed, then clipped once: ``Σ_g clip_C(Σ_{i∈g} w_i ∇θ ℓ_i)``. The norms
            returned are then each row's group's; ``per_unit``'s values are per group. The batch holds whole
            groups (rows a multiple of k).

    Raises:
        HandledAlone: a unit called more than once in one forward pass whose rule gives no per-call parts.
        ValueError: a trainable unit has no rule.
    """
    k = int(group_size)
    units = _units(model, rules, k)
    scale = backward_loss_scale([u for u, _ in units])
    weights = tf.cast(weights, tf.float32)
    keep = weights > 0
    with tf.GradientTape(persistent=True) as tape:
        with _recording(units, tape, keep) as records:
            y_pred = model(x, training=training)
        losses = loss_fn(y, y_pred)
        losses = select_rows(keep, losses * tf.cast(weights, losses.dtype))
        total = tf.reduce_sum(losses) * scale
        if k > 1:
            tf.debugging.assert_equal(tf.shape(weights)[0] % k, 0,
                                      message=f"a grouped batch holds whole groups: its rows must be a multiple of {k}")
        unit_losses = _per_unit(losses, k)  # on the tape: each unit's gradient is taken of it
    # the one backward pass through the network: every tap's per-record gradients
    taps = [tensor for r in records for tensor, _ in r.tapped.taps]
    grads = tape.gradient(total, taps, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    position = 0
    for r in records:
        count = len(r.tapped.taps)
        r.grads = [select_rows(keep, tf.cast(g, tf.float32)) / scale for g in grads[position:position + count]]
        position += count
    uses = _uses(records)
    with row_groups(k):
        materialised: dict = {}  # {id(weight): (B, *shape)} of the weights of shared layers, materialised per record
        by_unit = {key: (calls[0].rule.sq_norms(calls[0].layer, calls[0].tapped.saved, calls[0].grads)
                         if len(calls) == 1 else _shared_sq_norms(calls, tf.shape(unit_losses)[0], materialised))
                   for key, calls in uses.items()}
    own = own_weights(model)
    own_per_unit = gradients_per_record(tape, unit_losses, own) if own else []
    parts = list(by_unit.values()) + [tf.reduce_sum(tf.reshape(tf.square(g), (tf.shape(g)[0], -1)), axis=1)
                                      for g in own_per_unit]
    sq_norms = tf.add_n(parts) if parts else tf.zeros(tf.shape(unit_losses), tf.float32)
    unit_factors, norms = clip_factors(sq_norms, l2_norm_clip)
    factors = unit_factors if k == 1 else tf.repeat(unit_factors, k)  # every row of a group: its group's factor
    norms = norms if k == 1 else tf.repeat(norms, k)
    by_variable = {id(v): tf.cast(tf.tensordot(unit_factors, g, axes=1), tf.as_dtype(v.dtype))
                   for v, g in zip(own, own_per_unit)}
    def add(variable, grad):  # a weight several calls use: the sum of their clipped sums
        key = id(variable)
        if key in materialised:  # its clipped sum is Σ_i c_i G_i (below)
            return
        by_variable[key] = grad if key not in by_variable else by_variable[key] + grad

    for r in records:
        if all(id(v) in materialised for v in r.layer.trainable_variables):
            continue
        summed = r.rule.clipped_sum(r.layer, r.tapped.saved, r.grads, factors)
        if summed is not None:
            for v, g in zip(r.layer.trainable_variables, summed):
                add(v, g)
            continue
        for (tap, variables), g in zip(r.tapped.taps, r.grads):
            if variables and tap.dtype not in (tf.float32, tf.float64):
                raise ValueError(
                    f"the {r.rule.family or type(r.rule).__name__} rule of layer {r.layer.name!r} taps a "
                    f"{tap.dtype.name} tensor for the book-keeping sum: c_i g_i and the summed weight gradient would be "
                    "rounded to it, and the sum could move by more than C. Compute the tap in float32 "
                    "(registry.exact_dtype) or give the rule a clipped_sum")
            if variables:  # book-keeping: the local weight gradient with the output gradients c_i g_i
                scaled = tf.cast(g * tf.reshape(factors, [-1] + [1] * (g.shape.rank - 1)), tap.dtype)
                for v, grad in zip(variables, gradients(r.local, tap, variables, output_gradients=scaled)):
                    add(v, grad)
    for v in model.trainable_variables:
        if id(v) in materialised:
            by_variable[id(v)] = tf.cast(tf.tensordot(factors, materialised[id(v)], axes=1), tf.as_dtype(v.dtype))
    reference = None
    if per_unit:  # every use of every weight, record by record: one backward pass per record, traced once
        reference = gradients_per_record(tape, unit_losses, model.trainable_variables)
    del tape
    for r in records:
        r.local = None
    # a trainable unit the forward pass did not reach has a zero gradient
    summed = [by_variable.get(id(v), tf.zeros(v.shape, tf.as_dtype(v.dtype))) for v in model.trainable_variables]
    return (summed, y_pred, norms, by_unit, reference) if per_unit else (summed, y_pred, norms)


class HandledAlone(ValueError):
    """A unit called more than once per forward pass whose rule gives no per-call parts (:meth:`LayerRule.parts`):
    the probe handles it alone instead (:mod:`.ghost_probe`)."""

    def __init__(self, layer, rule):
        self.layer = layer
        super().__init__(f"layer {layer.name!r} is called more than once per forward pass and its "
                         f"{rule.family or type(rule).__name__} rule computes no cross terms between its calls; "
                         "handle it alone (the probe does so) or use path='vectorized'")


def _uses(records) -> dict:
    """``{id(layer): [its records]}`` in call order: a layer called several times has one record per call."""
    uses: dict = {}
    for r in records:
        uses.setdefault(id(r.layer), []).append(r)
    return uses


def _shared_sq_norms(calls, units, materialised: dict):
    """Each clipping unit's squared norm of the gradient of a layer called several times: per weight, the sum
    over its calls (:mod:`.layer_rules.shared_uses`: with the cross terms between calls). The weights whose
    per-record gradients were materialised for it go into ``materialised`` (their clipped sum is taken from them)."""
    layer = calls[0].layer
    by_weight: dict = {}
    for r in calls:
        parts = r.rule.parts(r.layer, r.tapped.saved, r.grads)
        if parts is None:
            raise HandledAlone(layer, r.rule)
        for key, part in parts.items():
            by_weight.setdefault(key, []).append(part)
    terms = []
    for v in layer.trainable_variables:
        if id(v) in by_weight:
            sq, per_record = shared_sq_norms(by_weight[id(v)], v.shape)
            terms.append(sq)
            if per_record is not None:
                materialised[id(v)] = per_record
    return tf.add_n(terms) if terms else tf.zeros([units], tf.float32)


def gradients_per_record(tape, losses, variables) -> list:
    """``[(B, *v.shape)]``: each record's gradient of ``losses[i]`` with respect to each variable, from the
    forward pass ``tape`` recorded (a graph loop over the records: one backward pass each, traced once)."""
    variables = list(variables)
    rows = tf.shape(losses)[0]

    def one(i):
        grads = gradients(tape, losses, variables, output_gradients=tf.one_hot(i, rows, dtype=losses.dtype))
        return [tf.cast(g, tf.float32) for g in grads]

    return tf.map_fn(one, tf.range(rows), fn_output_signature=[tf.TensorSpec(v.shape, tf.float32) for v in variables])
