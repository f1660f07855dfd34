"""Bounded local response normalisation (AdLM Eq. 22)."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from ..validation import check_positive_int, check_real
from .shape_preserving import ShapePreservingLayer


@keras.saving.register_keras_serializable(package="tfdpmech")
class BoundedLRN(ShapePreservingLayer):
    """AlexNet-style LRN whose output is bounded in [0, 1] for non-negative inputs.

    Implements AdLM Eq. 22 (Phan et al., ICDM'17), channels last::

        out[..., k] = h[..., k] / max(h[..., k], (q + alpha * sum_{m in window(k)} h[..., m]^2) ** beta)

    The window covers channels ``k - size//2 .. k + size//2`` clipped to the valid range,
    and the sum is not divided by ``size`` (AlexNet convention). Because the denominator is at
    least the numerator, non-negative (post-ReLU) inputs map into [0, 1]. Apply it after ReLU:
    negative inputs are not bounded.

    Args:
        q: additive constant (paper: 2).
        size: window length l over channels (paper: 5).
        alpha: scale of the squared sum (paper: 1e-4).
        beta: exponent (paper: 0.75).

    Input shape: ``(batch, ..., channels)``. Output shape: same.

    Example:
        >>> x = keras.layers.ReLU()(keras.layers.Conv2D(8, 3)(keras.Input((6, 6, 1))))
        >>> y = BoundedLRN()(x)
    """

    CONFIG_KEYS = ("q", "size", "alpha", "beta")

    lrp_passthrough = True

    def __init__(self, q: float = 2.0, size: int = 5, alpha: float = 1e-4, beta: float = 0.75, **kwargs):
        super().__init__(**kwargs)
        q, alpha, beta = check_real(q, "q"), check_real(alpha, "alpha"), check_real(beta, "beta")
        if not q > 0:
            raise ValueError(f"q must be > 0 so the denominator never vanishes, got {q}")
        if not alpha >= 0 or not beta > 0:
            raise ValueError(f"alpha must be >= 0 and beta > 0, got alpha={alpha}, beta={beta}")
        self.q = q
        self.size = check_positive_int(size, "size")
        self.alpha = alpha
        self.beta = beta

    def build(self, input_shape):
        channels = int(input_shape[-1])
        half = self.size // 2
        idx = np.arange(channels)
        # band[m, k] = 1 if channel m is in the window of channel k: one matmul sums the window
        self._band = tf.constant((np.abs(idx[:, None] - idx[None, :]) <= half).astype(np.float32))
        super().build(input_shape)

    def call(self, inputs):
        # Eq. 22: h / max(h, D) with D = (q + α Σ h²)^β > 0 equals min(h / D, 1) for every h, and
        # h / D is exactly TensorFlow's fused LRN op (window sum not divided by size); the paper CNN
        # trained 1.75x faster with it than with pow/max/div composed here (784 -> 1371 examples/s).
        if inputs.shape.rank == 4 and inputs.dtype in (tf.float32, tf.float16):
            lrn = tf.nn.local_response_normalization(
                inputs, depth_radius=self.size // 2, bias=self.q, alpha=self.alpha, beta=self.beta)
            return tf.minimum(lrn, 1.0)
        band = tf.cast(self._band, inputs.dtype)
        window_sum = tf.tensordot(tf.square(inputs), band, axes=[[-1], [0]])
        denom = tf.pow(self.q + self.alpha * window_sum, self.beta)
        return inputs / tf.maximum(inputs, denom)
