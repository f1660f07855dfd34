"""Dense and EinsumDense with LoRA on the ghost-norm path: the factors' per-record gradients, exact."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tfdpmech.mechanisms.dpsgd.clipping.ghost_norms import layer_paths

from .test_shared_weights import CATEGORICAL, _check_exact


@pytest.mark.skipif(not hasattr(keras.layers.Dense, "enable_lora"), reason="LoRA layers are Keras 3's")
def test_lora_factors_and_bias_clip_exactly_without_a_per_record_pass():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((5, 6))
    projection = keras.layers.EinsumDense("abc,cde->abde", output_shape=(None, 2, 3), bias_axes="de")
    hidden = keras.layers.Dense(4, activation="tanh")
    h = keras.layers.Reshape((5, 6))(projection(inputs))
    h = keras.layers.GlobalAveragePooling1D()(hidden(h))
    model = keras.Model(inputs, keras.layers.Dense(3)(h))
    model(np.zeros((1, 5, 6), np.float32))
    for layer in (projection, hidden):
        layer.enable_lora(2, b_initializer="glorot_uniform")  # B ≠ 0: A's gradient is not zero
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 5, 6)).astype(np.float32)
    _check_exact(model, CATEGORICAL, x, keras.utils.to_categorical(np.arange(6) % 3, 3))
    paths = layer_paths(model)
    assert (paths[projection.name], paths[hidden.name]) == ("lora", "lora")
    assert len(projection.trainable_variables) == 3  # A, B and the bias; the kernel frozen
