"""The steps of pCDBN's reference mode, one function each, named after the authors' source lines they mirror.

The degree-7 Chebyshev smooth step and its noisy coefficients, the encoder and decoder of the
pre-training, the per-batch Δ, and the output noise (``haiphanNJIT/PrivateDeepLearning@77fb357``,
``pCDBN/mlp.py``, ``pcdbn.py``); :class:`~tfdpmech.mechanisms.pcdbn.PCDBNReference` runs them.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from ...noise import laplace, make_rng, tf_laplace
from ...validation import check_epsilon, check_positive_int

__all__ = [
    "CHEBYSHEV7",
    "chebyshev7",
    "draw_coefficient_noise",
    "dp_chebyshev",
    "encoder_preactivation",
    "dp_propup",
    "decode",
    "batch_delta",
    "pretrain_cost",
    "output_noise_scale",
    "draw_feature_noise",
]

CHEBYSHEV7 = (-5.0, 21.0, -35.0, 35.0, 16.0)  # mlp.py:38, 44  numerators of x^7, x^5, x^3, x, 1; all over 2^5
POWERS = (7, 5, 3, 1, 0)


def chebyshev7(x, coefficients=CHEBYSHEV7) -> tf.Tensor:
    """``(c0·x⁷ + c1·x⁵ + c2·x³ + c3·x + c4)/32`` (``mlp.py:37-38, 52``); CHEBYSHEV7 gives the smooth step."""
    x = tf.cast(x, tf.float32)
    # x ** 0 is spelt out as ones: TF's gradient of pow(x, 0) at x = 0 is 0·x⁻¹ = NaN (TF >= 2.16), and
    # zero pre-activations are common (blank MNIST borders under a zero bias).
    terms = [x ** p if p else tf.ones_like(x) for p in POWERS]
    return sum(tf.cast(c, tf.float32) * t for c, t in zip(tf.unstack(tf.cast(coefficients, tf.float32)), terms)) / 32.0


def draw_coefficient_noise(epsilon: float, batch_size: int, rng) -> np.ndarray:
    """Five draws of ``Lap(1/(ε·B))``, made once at graph build (``mlp.py:48-49``); Δ multiplies them later."""
    return laplace(1.0 / (check_epsilon(epsilon) * check_positive_int(batch_size, "batch_size")), 5, make_rng(rng))


def dp_chebyshev(x, unit_noise, delta) -> tf.Tensor:
    """The polynomial with noisy coefficients ``c_i + noise_i·Δ`` (``mlp.py:43-53``)."""
    coeffs = tf.constant(CHEBYSHEV7, tf.float32) + tf.cast(unit_noise, tf.float32) * tf.cast(delta, tf.float32)
    return chebyshev7(x, coeffs)


def encoder_preactivation(v, kernel, bias) -> tf.Tensor:
    """``conv2d(v, W, strides 2, SAME) + b`` (``mlp.py:29, 70``)."""
    return tf.nn.conv2d(v, kernel, strides=[1, 2, 2, 1], padding="SAME") + bias


def dp_propup(v, kernel, bias, unit_noise, delta) -> tf.Tensor:
    """``clip(σ̂_noisy(a / max a), 0, 1)`` with the max over the whole batch tensor (``mlp.py:68-76``)."""
    a = encoder_preactivation(v, kernel, bias)
    a = a / tf.reduce_max(a)
    return tf.clip_by_value(dp_chebyshev(a, unit_noise, delta), 0.0, 1.0)


def decode(h, kernel, out_hw) -> tf.Tensor:
    """``sigmoid(conv2d(nearest_upsample(h), transpose(W, [1,0,3,2]), stride 1, SAME))`` (``mlp.py:86-92``)."""
    up = tf.image.resize(h, out_hw, method="nearest")
    return tf.sigmoid(tf.nn.conv2d(up, tf.transpose(kernel, [1, 0, 3, 2]), strides=1, padding="SAME"))


def batch_delta(v, kernel_shape) -> tf.Tensor:
    """The code's per-batch Δ (``getDelta``, ``pcdbn.py:110-131``).

    ``2·max|Σ_ij clip(σ̂(ã/max ã), 0, 1)| + 2·max|Σ_ij v|`` with ``ã = conv(v, all-ones filter) + 1``.
    """
    ones = tf.ones(kernel_shape, tf.float32)
    a = encoder_preactivation(v, ones, 1.0)
    a = a / tf.reduce_max(a)
    h = tf.clip_by_value(chebyshev7(a), 0.0, 1.0)
    return 2.0 * tf.reduce_max(tf.abs(tf.reduce_sum(h, axis=[1, 2]))) + \
        2.0 * tf.reduce_max(tf.abs(tf.reduce_sum(v, axis=[1, 2])))


def pretrain_cost(v, kernel, bias, noise_pos, noise_rec, delta) -> tf.Tensor:
    """``mean|h̄(v′) − h̄(v)| + mean|v′ − v|`` with two separate noise draws (``mlp.py:103-113``)."""
    h = dp_propup(v, kernel, bias, noise_pos, delta)
    v_rec = decode(h, kernel, tf.shape(v)[1:3])
    h_rec = dp_propup(v_rec, kernel, bias, noise_rec, delta)
    return tf.reduce_mean(tf.abs(h_rec - h)) + tf.reduce_mean(tf.abs(v_rec - v))


def output_noise_scale(epsilon: float, batch_size: int, hidden_units: int = 25, num_classes: int = 10) -> float:
    """``10·(|h| + |h|²/4)/(ε·B)`` (``pcdbn.py:133-140``): 1,812.5/(ε·B) for |h| = 25, M = 10."""
    delta = num_classes * (hidden_units + hidden_units ** 2 / 4.0)
    return delta / (check_epsilon(epsilon) * check_positive_int(batch_size, "batch_size"))


def draw_feature_noise(scale, hidden_units: int, generator: tf.random.Generator) -> tf.Tensor:
    """η ∈ R^|h|, one draw for the whole batch, fresh at every call (``pcdbn.py:198``)."""
    return tf_laplace([hidden_units], scale, generator)
