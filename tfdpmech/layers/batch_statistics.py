"""Batch normalisation that always uses the statistics of the batch it is given."""

from __future__ import annotations

import keras
import tensorflow as tf

from ..validation import check_positive_real
from .shape_preserving import ShapePreservingLayer


@keras.saving.register_keras_serializable(package="tfdpmech")
class BatchStatisticsNormalization(ShapePreservingLayer):
    """``γ·(x − mean_B)/sqrt(var_B + eps) + β`` with the batch's own mean and variance, always.

    The authors' public AdLM and pCDBN code normalises the FC-25 layer with
    ``tf.nn.moments(z, [0])`` and ``tf.nn.batch_normalization`` and keeps no moving averages,
    so the test images are normalised with the statistics of the test batch itself (AdLM
    ICDM'17 correction version, §IV; pCDBN Machine Learning 2017, §4.2). Keras's
    ``BatchNormalization`` switches to moving averages at inference; this layer does not, so a
    prediction depends on the other records of its batch. Use it only to reproduce that code.

    Args:
        epsilon: added to the variance (the code uses 1e-3).
        trainable_affine: whether γ and β are trained (AdLM's code trains them; pCDBN's code
            creates them but leaves them out of the optimiser's variable list).

    Input shape: ``(batch, features)``. Output shape: same.
    """

    CONFIG_KEYS = ("epsilon", "trainable_affine")

    def __init__(self, epsilon: float = 1e-3, trainable_affine: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = check_positive_real(epsilon, "epsilon")
        if not isinstance(trainable_affine, bool):
            raise TypeError(f"trainable_affine must be True or False, got {trainable_affine!r}")
        self.trainable_affine = trainable_affine

    def build(self, input_shape):
        units = int(input_shape[-1])
        self.gamma = self.add_weight(name="gamma", shape=(units,), initializer="ones",
                                     trainable=self.trainable_affine)
        self.beta = self.add_weight(name="beta", shape=(units,), initializer="zeros",
                                    trainable=self.trainable_affine)
        super().build(input_shape)

    def call(self, inputs, training=None):
        # the same at training and at test: no moving averages exist
        mean, var = tf.nn.moments(inputs, axes=[0])
        return tf.nn.batch_normalization(inputs, mean, var, self.beta, self.gamma, self.epsilon)
