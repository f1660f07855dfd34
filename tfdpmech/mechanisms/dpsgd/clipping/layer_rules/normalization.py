"""Per-record normalisation layers: LayerNormalization, GroupNormalization, RMSNormalization.

Each computes, from one record alone, a normalised input ``x̂`` and returns ``x̂ ⊙ γ + β`` (γ and β
broadcast over the positions). With ``g`` the gradient of the layer's output, record i's gradients are
``∂γ = Σ_positions g_i ⊙ x̂_i`` and ``∂β = Σ_positions g_i``: small (one number per feature), so they are
materialised per record, and the clipped sum is ``Σ_i c_i ∂γ_i`` (float32 under every policy). The
layer's output is its own ``call``'s (the tap); ``x̂`` is recomputed with the layer's settings (Keras's
own normalisation op with γ = 1 and β = 0 where it takes them).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from .linear_algebra import trains
from .registry import KERAS_3, Tapped, exact_dtype, register_layer_rule, select_rows
from .shared_uses import MaterialisedRule

__all__ = ["AffineNormalizationRule"]


def _axes(axis, rank: int) -> list[int]:
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    return sorted(a % rank for a in axes)


def _layer_norm(layer, x):
    axes = _axes(layer.axis, x.shape.rank)
    if KERAS_3:
        return keras.ops.layer_normalization(x, None, None, axis=axes, epsilon=layer.epsilon,
                                             rms_scaling=getattr(layer, "rms_scaling", False))
    mean, variance = tf.nn.moments(x, axes, keepdims=True)
    return (x - mean) * tf.math.rsqrt(variance + layer.epsilon)


def _group_norm(layer, x):
    shape = tf.shape(x)
    channels = int(x.shape[-1])
    grouped = tf.reshape(x, tf.concat([shape[:-1], [layer.groups, channels // layer.groups]], axis=0))
    axes = [d for d in range(1, grouped.shape.rank) if d != grouped.shape.rank - 2]
    mean, variance = tf.nn.moments(grouped, axes, keepdims=True)
    return tf.reshape((grouped - mean) * tf.math.rsqrt(variance + layer.epsilon), shape)


def _rms_norm(layer, x):
    return keras.ops.rms_normalization(x, scale=None, axis=layer.axis, epsilon=layer.epsilon)


class AffineNormalizationRule(MaterialisedRule):
    """A per-record normalisation ``x̂ ⊙ γ + β``; ``normalise(layer, x)`` computes ``x̂``; ``scale`` and ``offset``
    name the layer's γ and β attributes; ``channels_axis_only``: γ spans the last axis only."""

    groups = True  # its norms reduce per clipping unit (.groups)

    def __init__(self, family: str, normalise, *, scale: str = "gamma", offset: str | None = "beta",
                 channels_axis_only: bool = False):
        self.family, self._normalise = family, normalise
        self._scale, self._offset, self._channels_only = scale, offset, channels_axis_only

    def applies(self, layer) -> bool:
        return not self._channels_only or layer.axis in (-1, [-1], (-1,))

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        a = select_rows(keep, tf.cast(inputs, exact_dtype(layer)))  # float32 under mixed precision, as γ and β
        out = type(layer).call(layer, a)
        return Tapped(out, [(out, [])], {"a": a})  # the clipped sum is this rule's own (float32 in every policy)

    def _per_record(self, layer, saved, tap_grads) -> dict:
        """``{id(weight): (B, features)}``: each record's γ and β gradients (the trainable ones)."""
        if "per_record" in saved:
            return saved["per_record"]
        g = tf.cast(tap_grads[0], tf.float32)
        scale, offset = getattr(layer, self._scale, None), getattr(layer, self._offset, None) if self._offset else None
        rank = g.shape.rank
        kept = _axes(layer.axis, rank) if not self._channels_only else [rank - 1]
        summed = [d for d in range(1, rank) if d not in kept]

        def over_positions(t):
            return tf.reduce_sum(t, axis=summed) if summed else t

        per_record = {}
        if trains(layer, scale):
            x_hat = tf.cast(self._normalise(layer, tf.cast(saved["a"], tf.float32)), tf.float32)
            per_record[id(scale)] = over_positions(g * x_hat)
        if trains(layer, offset):
            per_record[id(offset)] = over_positions(g)
        saved["per_record"] = per_record
        return per_record



register_layer_rule(keras.layers.LayerNormalization, AffineNormalizationRule("layer_normalization", _layer_norm))
if hasattr(keras.layers, "GroupNormalization"):
    register_layer_rule(keras.layers.GroupNormalization,
                        AffineNormalizationRule("group_normalization", _group_norm, channels_axis_only=True))
if KERAS_3 and hasattr(keras.layers, "RMSNormalization"):
    register_layer_rule(keras.layers.RMSNormalization,
                        AffineNormalizationRule("rms_normalization", _rms_norm, scale="scale", offset=None))
