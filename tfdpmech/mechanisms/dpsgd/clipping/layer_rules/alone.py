"""A layer the registry does not know, handled alone: its own weights' per-record gradients.

The layer runs in the batched forward pass as Keras runs it, and its output is the tap: the one backward
pass through the network gives each record's output gradient ``g_i``. Then, for that layer only, each
record's weight gradient is the vector-Jacobian product of the layer applied to record i's input alone
with ``g_i`` (``tf.map_fn`` over the records: a local forward and backward pass of one layer per record,
not of the whole model). Its norm and its share of the clipped sum come from those same vectors, so each
record's contribution is clipped exactly whatever the layer computes.

Each record's vector is a function of that record alone and is clipped by its own norm, so the bound
holds for any layer; for the vectors to be the layer's gradient the recomputation must compute the
function the batch computed, so the rule does not take a layer with a dropout rate (a recurrent layer's
``dropout`` among them). Arguments with one row per record are sliced with the record; others (a shared
constant, ``training``) are passed as they are.
"""

from __future__ import annotations

import tensorflow as tf

from .groups import unit_sq_norms
from .registry import LayerRule, Tapped, compute_dtype, is_per_record, select_rows, weights_read_as
from .shared_uses import Rows

__all__ = ["AloneRule", "ALONE"]


def _draws_random_numbers(layer) -> bool:
    """A dropout rate set on the layer or a sub-layer (a recurrent layer's ``dropout`` among them)."""
    for sub in layer._flatten_layers(include_self=True, recursive=True):  # both Keras 2.15 and 3
        if any(float(getattr(sub, name, 0) or 0) > 0 for name in ("dropout", "recurrent_dropout", "rate")):
            return True
    return False


class AloneRule(LayerRule):
    """The per-record vector-Jacobian products of one layer's own weights (see the module docstring)."""

    groups = True  # its norms reduce per clipping unit (.groups)

    family = "alone"
    shared_inputs = True  # arguments without a row per record are passed as they are
    # the layer's own call as Keras runs it: each record's vector is clipped by its own norm, whatever its precision
    full_precision_weights = False

    def applies(self, layer) -> bool:
        return not _draws_random_numbers(layer)

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        def rows(t):
            return select_rows(keep, t) if is_per_record(t, keep) else t
        inputs, args, kwargs = tf.nest.map_structure(rows, (inputs, args, kwargs))
        out = type(layer).call(layer, inputs, *args, **kwargs)
        taps = [o for o in tf.nest.flatten(out) if o.dtype.is_floating]
        return Tapped(out, [(t, []) for t in taps], {"call": (inputs, args, kwargs), "keep": keep})

    def _per_record_gradients(self, layer, saved, tap_grads):
        variables = list(layer.trainable_variables)
        keep = saved["keep"]

        def one(i):
            def record(t):
                return t[i:i + 1] if is_per_record(t, keep) else t
            inputs, args, kwargs = tf.nest.map_structure(record, saved["call"])
            with tf.GradientTape() as tape, weights_read_as(compute_dtype(layer)):  # as in the batched call
                out = type(layer).call(layer, inputs, *args, **kwargs)
            taps = [o for o in tf.nest.flatten(out) if o.dtype.is_floating]
            grads = tape.gradient(taps, variables, output_gradients=[tf.cast(g[i:i + 1], t.dtype)
                                                                     for g, t in zip(tap_grads, taps)])
            return [tf.zeros(v.shape, tf.float32) if g is None else tf.cast(tf.convert_to_tensor(g), tf.float32)
                    for v, g in zip(variables, grads)]

        signature = [tf.TensorSpec(v.shape, tf.float32) for v in variables]
        return tf.map_fn(one, tf.range(tf.shape(keep)[0]), fn_output_signature=signature)

    def sq_norms(self, layer, saved, tap_grads):
        per_record = self._per_record_gradients(layer, saved, tap_grads)
        saved["per_record"] = per_record
        return tf.add_n([unit_sq_norms(g) for g in per_record])

    def parts(self, layer, saved, tap_grads):
        saved["per_record"] = self._per_record_gradients(layer, saved, tap_grads)
        return {id(v): Rows(g) for v, g in zip(layer.trainable_variables, saved["per_record"])}

    def clipped_sum(self, layer, saved, tap_grads, factors):
        return [tf.tensordot(factors, g, axes=1) for g in saved["per_record"]]


ALONE = AloneRule()
