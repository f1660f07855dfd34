"""The base of the data-independent feature layers: frozen weights drawn once from a seeded Generator."""

from __future__ import annotations

import keras
import numpy as np

from ..validation import check_positive_int
from .extractor import check_feature_seed


class SeededFeatureLayer(keras.layers.Layer):
    """A frozen layer with ``units`` outputs whose weights come from ``numpy.random.default_rng(seed)``.

    The draw uses numpy (the same on every TensorFlow/Keras version), never the data. ``get_config``
    holds the constructor arguments named in ``CONFIG_KEYS``, so ``.keras`` files rebuild the layer.
    """

    CONFIG_KEYS: tuple[str, ...] = ("units", "seed")

    def __init__(self, units: int, seed: int, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self.units = check_positive_int(units, "units")
        self.seed = check_feature_seed(seed)

    def add_frozen(self, name: str, value: np.ndarray):
        """A non-trainable weight initialised to ``value``."""
        return self.add_weight(name=name, shape=value.shape, trainable=False,
                               initializer=keras.initializers.Constant(value.astype(np.float32)))

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.units)

    def get_config(self):
        config = super().get_config()
        config.update({key: getattr(self, key) for key in self.CONFIG_KEYS})
        return config
