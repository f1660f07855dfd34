"""A learnt per-channel scale, ``z = x ⊙ γ``: keras.applications ConvNeXt's ``LayerScale`` (Touvron et al. 2021).

Record i's gradient of γ is ``Σ_p x_ip ⊙ g_ip`` over its positions p: C numbers, materialised per record from the
saved input and the tap's gradient.
"""

from __future__ import annotations

import tensorflow as tf

from .groups import unit_sq_norms, unit_zeros
from .linear_algebra import flatten_positions, trains
from .registry import LayerRule, Tapped, compute_dtype, exact_dtype, register_layer_rule_by_name, select_rows

__all__ = ["LayerScaleRule"]


class LayerScaleRule(LayerRule):
    """A layer whose call is ``x * self.gamma`` with ``gamma`` of shape ``(channels,)``."""

    groups = True  # its norms reduce per clipping unit (.groups)

    family = "layer_scale"

    def applies(self, layer) -> bool:
        gamma = getattr(layer, "gamma", None)
        return gamma is not None and len(gamma.shape) == 1

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        dtype = exact_dtype(layer)
        a = select_rows(keep, tf.cast(inputs, dtype))
        z = a * tf.cast(tf.convert_to_tensor(layer.gamma), dtype)
        return Tapped(tf.cast(z, compute_dtype(layer)), [(z, list(layer.trainable_variables))], {"a": a})

    def sq_norms(self, layer, saved, tap_grads):
        g = tf.cast(tap_grads[0], tf.float32)
        total = unit_zeros(g)
        if trains(layer, layer.gamma):
            a = tf.cast(saved["a"], tf.float32)
            total += unit_sq_norms(tf.reduce_sum(flatten_positions(a * g), axis=1))
        return total


register_layer_rule_by_name("keras.src.applications.convnext.LayerScale", LayerScaleRule())
