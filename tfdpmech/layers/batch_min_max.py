"""Per-unit batch min-max normalisation for fully connected hidden layers."""

from __future__ import annotations

import keras
import tensorflow as tf

from ..validation import check_real
from .shape_preserving import ShapePreservingLayer


@keras.saving.register_keras_serializable(package="tfdpmech")
class BatchMinMax(ShapePreservingLayer):
    """Min-max normalise each unit over the batch into [0, 1] (AdLM §III-B, dense layers).

    Training: ``(h - min_batch) / max(max_batch - min_batch, epsilon)`` per unit, and moving
    estimates of min and max are updated. Inference: the moving estimates are used, so the
    output of one example does not depend on the rest of its batch (§III-B normalises over the
    training batch only); it may then leave [0, 1] slightly, which is why :class:`UnitClip` must
    follow before the output.

    Args:
        momentum: decay of the moving min/max. The first updates use a running average
            (rate ``max(1 - momentum, 1/(step + 1))``) so the estimates start from real data.
        epsilon: the smallest denominator: a unit constant over the batch maps to 0.

    Input shape: ``(batch, units)``. Output shape: same.
    """

    CONFIG_KEYS = ("momentum", "epsilon")

    lrp_passthrough = True

    def __init__(self, momentum: float = 0.99, epsilon: float = 1e-7, **kwargs):
        super().__init__(**kwargs)
        momentum = check_real(momentum, "momentum")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        self.momentum = momentum
        epsilon = check_real(epsilon, "epsilon")
        if not epsilon > 0:
            raise ValueError(f"epsilon must be > 0, got {epsilon}")
        self.epsilon = epsilon

    def build(self, input_shape):
        units = int(input_shape[-1])
        self.moving_min = self.add_weight(name="moving_min", shape=(units,), initializer="zeros", trainable=False)
        self.moving_max = self.add_weight(name="moving_max", shape=(units,), initializer="ones", trainable=False)
        self.steps = self.add_weight(name="steps", shape=(), initializer="zeros", trainable=False)
        super().build(input_shape)

    def call(self, inputs, training=None):
        if training:
            lo = tf.reduce_min(inputs, axis=0)
            hi = tf.reduce_max(inputs, axis=0)
            rate = tf.maximum(1.0 - self.momentum, 1.0 / (self.steps + 1.0))
            self.moving_min.assign(self.moving_min + rate * (tf.stop_gradient(lo) - self.moving_min))
            self.moving_max.assign(self.moving_max + rate * (tf.stop_gradient(hi) - self.moving_max))
            self.steps.assign_add(1.0)
        else:
            lo, hi = self.moving_min, self.moving_max
        # max(hi - lo, ε), not hi - lo + ε: traced, the constant ε is folded into hi first, and
        # (hi + ε) - lo is 0 for a constant unit above ~1 (ε below the float32 spacing): 0/0 = NaN
        return (inputs - lo) / tf.maximum(hi - lo, self.epsilon)
