"""The Keras models of a released functional head: the frozen predictor and the trainable head.

Both are post-processing of the one release of :class:`~tfdpmech.mechanisms.functional_head.FunctionalHead`.
"""

from __future__ import annotations

import keras
import numpy as np

from ..adlm.taylor_cross_entropy import TaylorCrossEntropy
from .feature_map import FeatureMap

__all__ = ["functional_head_model", "trainable_head"]


def functional_head_model(features, kernel, *, clip_norm: bool, name: str) -> keras.Model:
    """Extractor (frozen; None: feature arrays) → :class:`FeatureMap` → ``Dense(C)`` logits with ``kernel`` (d × C)."""
    num_features, num_classes = kernel.shape
    if features is not None:  # the frozen copy's own graph (calling it on a new Input would retrace it)
        inp, h = features.frozen.inputs[0], features.frozen.outputs[0]
    else:
        inp = keras.Input((num_features - 1,))
        h = inp
    h = FeatureMap(clip_norm=clip_norm, name="feature_map")(h)
    dense = keras.layers.Dense(num_classes, use_bias=False, name="functional_head")
    out = dense(h)
    dense.set_weights([kernel.astype(np.float32)])
    model = keras.Model(inp, out, name=name)
    model.trainable = False
    model.compile(loss=TaylorCrossEntropy(), metrics=["categorical_accuracy"])
    return model


def trainable_head(num_features: int, num_classes: int, *, name: str) -> keras.Model:
    """``Input(d) → Dense(C, use_bias=False)``, zero-initialised, for the pseudo-records of the release."""
    return keras.Sequential([keras.Input((num_features,)),
                             keras.layers.Dense(num_classes, use_bias=False, kernel_initializer="zeros",
                                                name="functional_head")], name=name)
