"""The common base of the element-wise layers: output shape = input shape, config = named attributes."""

from __future__ import annotations

import keras


class ShapePreservingLayer(keras.layers.Layer):
    """A Keras layer whose output has its input's shape.

    ``get_config`` adds the attributes named in ``CONFIG_KEYS`` (the constructor arguments of the
    same names), so ``from_config`` rebuilds the layer and ``.keras`` files round-trip.
    """

    CONFIG_KEYS: tuple[str, ...] = ()

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({key: getattr(self, key) for key in self.CONFIG_KEYS})
        return config
