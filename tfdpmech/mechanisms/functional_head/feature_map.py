"""The map from extracted features to the head's input ``p``: flatten, append the bias, clip the norm."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

__all__ = ["FeatureMap", "feature_map"]


def feature_map(features, *, clip_norm: bool) -> np.ndarray:
    """Host (float64) twin of :class:`FeatureMap`: ``q = [f, 1]``, then ``q / max(1, ‖q‖₂)`` if ``clip_norm``."""
    f = np.asarray(features, dtype=np.float64).reshape(len(features), -1)
    q = np.concatenate([f, np.ones((len(f), 1))], axis=1)
    if clip_norm:
        q /= np.maximum(1.0, np.linalg.norm(q, axis=1, keepdims=True))
    return q


@keras.saving.register_keras_serializable(package="tfdpmech")
class FeatureMap(keras.layers.Layer):
    """Flatten, append a constant bias feature 1, and optionally clip the vector to L2 norm <= 1.

    The functional head's sensitivities are computed for the vector this layer outputs: with
    ``clip_norm=False`` (Laplace calibration) every coordinate must already lie in [0, 1]; with
    ``clip_norm=True`` (Gaussian calibration) each vector, bias included, is scaled to norm at most 1.
    Since the bias makes ``‖q‖ >= 1``, the clip is a normalisation ``q/‖q‖``, which leaves the
    head's ``argmax`` unchanged and is applied identically when the statistics are computed and
    at prediction time.

    Input shape: ``(batch, ...)``. Output shape: ``(batch, features + 1)``.
    """

    def __init__(self, clip_norm: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.clip_norm = bool(clip_norm)

    def call(self, inputs):
        static = tuple(inputs.shape[1:])
        width = int(np.prod(static)) if all(s is not None for s in static) else -1
        x = tf.reshape(inputs, (-1, width))
        q = tf.concat([x, tf.ones_like(x[:, :1])], axis=1)
        if self.clip_norm:
            q = q / tf.maximum(tf.constant(1.0, q.dtype), tf.norm(q, axis=1, keepdims=True))
        return q

    def compute_output_shape(self, input_shape):
        return (input_shape[0], int(np.prod(input_shape[1:])) + 1)

    def get_config(self):
        config = super().get_config()
        config.update(clip_norm=self.clip_norm)
        return config
