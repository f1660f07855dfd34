"""Fixed random features: drawn once from a seeded numpy Generator, independent of any data."""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from ..noise import make_rng
from ..validation import check_positive_int, check_positive_real
from .extractor import FeatureExtractor
from .seeded_layer import SeededFeatureLayer

__all__ = ["RandomFourierFeatures", "random_features"]


@keras.saving.register_keras_serializable(package="tfdpmech")
class RandomFourierFeatures(SeededFeatureLayer):
    """``½ + ½·cos(x·W + b)``, W ~ N(0, 2γ), b ~ U[0, 2π): random Fourier features in [0, 1].

    Random features of the Gaussian kernel ``exp(−γ‖x − x'‖²)`` (Rahimi & Recht, NIPS 2007),
    shifted into [0, 1] so that both calibrations of the functional head apply. W and b come from
    ``numpy.random.default_rng(seed)`` (the same on every TensorFlow/Keras version) and are frozen.

    Args:
        units: number of features.
        gamma: kernel width γ > 0 (a public choice).
        seed: integer seed of the draw.

    Input shape: ``(batch, ...)`` (flattened). Output shape: ``(batch, units)``.
    """

    CONFIG_KEYS = ("units", "gamma", "seed")

    def __init__(self, units: int, gamma: float, seed: int, **kwargs):
        super().__init__(units, seed, **kwargs)
        self.gamma = check_positive_real(gamma, "gamma")

    def build(self, input_shape):
        dim = int(np.prod(input_shape[1:]))
        rng = make_rng(self.seed)
        self.kernel = self.add_frozen("kernel", rng.normal(0.0, math.sqrt(2.0 * self.gamma), (dim, self.units)))
        self.phase = self.add_frozen("phase", rng.uniform(0.0, 2.0 * math.pi, self.units))
        super().build(input_shape)

    def call(self, inputs):
        x = tf.reshape(inputs, (tf.shape(inputs)[0], -1))
        return 0.5 + 0.5 * tf.cos(tf.matmul(tf.cast(x, self.kernel.dtype), self.kernel) + self.phase)


def random_features(input_shape, units: int = 1024, *, gamma: float = 0.02, seed: int = 0) -> FeatureExtractor:
    """A data-independent :class:`FeatureExtractor`: random Fourier features in [0, 1].

    Needs no public data at all. ``gamma = 0.02`` is a choice made in advance for 28×28 images with
    pixels in [0, 1] (squared distances between such digits are of order 50); choose it on public
    data for other inputs, never on the private or test records.

    Args:
        input_shape: shape of one record, e.g. ``(28, 28, 1)``.
        units: number of features.
        gamma: kernel width.
        seed: integer seed (recorded in the ledger).
    """
    if isinstance(input_shape, (str, bytes)) or not hasattr(input_shape, "__iter__"):
        raise TypeError(f"input_shape must be the shape of one record, e.g. (28, 28, 1), got {input_shape!r}")
    inp = keras.Input(tuple(check_positive_int(s, f"input_shape[{i}]") for i, s in enumerate(input_shape)))
    layer = RandomFourierFeatures(units, gamma, seed, name="random_fourier")
    model = keras.Model(inp, layer(inp), name=f"random_fourier_{units}")
    provenance = (f"random Fourier features (Rahimi & Recht 2007), {units} units, γ={gamma:g}, drawn from "
                  f"numpy.random.default_rng({seed}) independently of any data: ε = 0")
    return FeatureExtractor(model, name=f"random_fourier:{units}", provenance=provenance, bounds=(0.0, 1.0))
