"""Noise samplers.

Noise drawn once (and then frozen in data or non-trainable weights) comes from a
numpy ``Generator``: seeded for reproducibility, OS entropy when ``seed=None``.
Noise drawn on every call inside a model comes from a ``tf.random.Generator``,
whose state advances between calls; stateless ops with a fixed seed inside a
``tf.function`` would repeat the same draw and must not be used for that.

Scales follow numpy: ``Lap(b)`` has density ``exp(-|x|/b) / (2b)``.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from .validation import check_array

__all__ = [
    "make_rng",
    "laplace",
    "gaussian",
    "tf_laplace",
]


def make_rng(seed=None) -> np.random.Generator:
    """Return a numpy Generator: from ``seed`` if given, else from OS entropy.

    Args:
        seed: None, an int, or an existing Generator (returned as is).
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise TypeError(f"seed must be None, an int or a numpy Generator, got {seed!r}")
    return np.random.default_rng(seed)


def laplace(scale, shape, rng: np.random.Generator) -> np.ndarray:
    """Draw zero-mean Laplace noise with (broadcastable) ``scale`` in float64.

    Raises:
        ValueError: a scale that is negative, NaN or inf.
    """
    scale = check_array(scale, "scale", ndim_min=0)
    if np.any(scale < 0):
        raise ValueError("scale must be >= 0; it is sensitivity / epsilon")
    return rng.laplace(0.0, 1.0, size=shape) * scale


def gaussian(sigma, shape, rng: np.random.Generator) -> np.ndarray:
    """Draw zero-mean Gaussian noise with standard deviation ``sigma`` in float64."""
    sigma = check_array(sigma, "sigma", ndim_min=0)
    if np.any(sigma < 0):
        raise ValueError("sigma must be >= 0")
    return rng.normal(0.0, 1.0, size=shape) * sigma


def tf_laplace(shape, scale, generator: tf.random.Generator, dtype=tf.float32) -> tf.Tensor:
    """Fresh Laplace noise on every call, for noise drawn inside a model step.

    Uses ``-b·sign(u)·log(1 - 2|u|)`` with ``u ~ U(-1/2, 1/2)``; TensorFlow has no Laplace op.
    """
    u = generator.uniform(shape, minval=-0.5, maxval=0.5, dtype=dtype)
    # keep 1 - 2|u| away from 0 so log stays finite
    tiny = tf.constant(np.finfo(dtype.as_numpy_dtype).tiny, dtype)
    return -tf.cast(scale, dtype) * tf.sign(u) * tf.math.log(tf.maximum(1.0 - 2.0 * tf.abs(u), tiny))

