"""Hard bound on the last hidden layer, which the loss sensitivity needs."""

from __future__ import annotations

import keras
import tensorflow as tf

from ..validation import check_real
from .shape_preserving import ShapePreservingLayer


@keras.saving.register_keras_serializable(package="tfdpmech")
class UnitClip(ShapePreservingLayer):
    """Clip activations to ``[low, high]`` (default [0, 1]).

    The sensitivity ``Δ_F = M(|h| + |h|²/4)`` of the Taylor loss (AdLM Lemma 5) holds only if
    every unit of the last hidden layer lies in [0, 1] (|h| <= 1 suffices). Putting this layer
    right before the output layer makes that bound hold by construction and lets
    :func:`tfdpmech.mechanisms.adlm.sensitivity.check_bounded_last_hidden` verify it.

    Args:
        low, high: the bounds; must satisfy ``-1 <= low < high <= 1``.

    Input shape: any. Output shape: same.
    """

    CONFIG_KEYS = ("low", "high")

    lrp_passthrough = True

    def __init__(self, low: float = 0.0, high: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        low, high = check_real(low, "low"), check_real(high, "high")
        if not (-1.0 <= low < high <= 1.0):
            raise ValueError(
                f"UnitClip needs -1 <= low < high <= 1 for the loss sensitivity to hold, got low={low}, high={high}"
            )
        self.low = float(low)
        self.high = float(high)

    def call(self, inputs):
        return tf.clip_by_value(inputs, self.low, self.high)
