"""Lu et al.'s model builders: the logits of a softmax model, sharing its weights."""

from __future__ import annotations

import keras
import numpy as np

from tfdpmech.mechanisms.output_perturbation.convexified_mlp import logits_model_from


# ---------------------------------------------------------------------------------- Keras models
def _mlp(hidden_act="tanh", out_act=None, l2=0.001, extra=None, l2_out=None):
    layers = [keras.Input(shape=(6,)), keras.layers.Dense(8, activation=hidden_act,
                                                          kernel_regularizer=None if l2 is None else keras.regularizers.L2(l2))]
    if extra is not None:
        layers.append(extra)
    reg_out = l2 if l2_out is None else l2_out
    layers.append(keras.layers.Dense(3, activation=out_act,
                                     kernel_regularizer=None if reg_out is None else keras.regularizers.L2(reg_out)))
    return keras.Sequential(layers)


def test_logits_model_from_strips_softmax():
    x = np.random.default_rng(0).uniform(-1, 1, (5, 6)).astype("float32")
    model = _mlp(out_act="softmax")
    logits = logits_model_from(model)
    z = np.asarray(logits(x))
    np.testing.assert_allclose(np.asarray(model(x)), np.exp(z) / np.exp(z).sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    seq = keras.Sequential([keras.Input(shape=(6,)), keras.layers.Dense(3), keras.layers.Activation("softmax")])
    z2 = np.asarray(logits_model_from(seq)(x))
    np.testing.assert_allclose(z2, np.asarray(seq.layers[0](x)), rtol=1e-6)
    linear = _mlp()
    assert logits_model_from(linear) is linear
