"""Every tfdpmech layer together: get_config/from_config, the registry, and a `.keras` round trip."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import tfdpmech
from tfdpmech.layers import BatchMinMax, BoundedLRN, InputNoise, PerturbedBias, UnitClip


def _np(t):
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


# ------------------------------------------------------------------------------------------------
# serialisation
# ------------------------------------------------------------------------------------------------


def _layers_for_config():
    return [
        (BoundedLRN(q=1.5, size=3, alpha=2e-4, beta=0.5, name="lrn"), (2, 3, 3, 4)),
        (BatchMinMax(momentum=0.9, epsilon=1e-5, name="bmm"), (5, 4)),
        (UnitClip(-0.5, 0.75, name="clip"), (2, 4)),
        (PerturbedBias(b_bar=[1.1, 0.9, 1.3, 0.7], name="pbias"), (2, 4)),
        (InputNoise(scales=np.full((4,), 0.3, np.float32), seed=5, name="noise"), (2, 4)),
    ]


@pytest.mark.parametrize("index", range(5))
def test_get_config_from_config_round_trip(index):
    layer, shape = _layers_for_config()[index]
    x = np.random.default_rng(index).random(shape).astype(np.float32) * 3.0
    if isinstance(layer, BatchMinMax):
        layer(x, training=True)  # move the statistics away from their initial values
    else:
        layer(x)
    if isinstance(layer, PerturbedBias):
        layer.bias.assign([0.5, -0.5, 1.0, 2.0])
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
    clone(x)  # build
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(_np(clone(x, training=False)), _np(layer(x, training=False)), rtol=1e-6)
    # through the registry as well
    name = keras.saving.get_registered_name(type(layer))
    assert name == f"tfdpmech>{type(layer).__name__}"
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(again) is type(layer) and again.get_config() == config


def test_config_contents():
    cfg = BoundedLRN(q=1.5, size=3, alpha=2e-4, beta=0.5).get_config()
    assert (cfg["q"], cfg["size"], cfg["alpha"], cfg["beta"]) == (1.5, 3, 2e-4, 0.5)
    cfg = BatchMinMax(momentum=0.9, epsilon=1e-5).get_config()
    assert (cfg["momentum"], cfg["epsilon"]) == (0.9, 1e-5)
    cfg = UnitClip(-0.5, 0.75).get_config()
    assert (cfg["low"], cfg["high"]) == (-0.5, 0.75)
    cfg = PerturbedBias(b_bar=[1.0, 2.0]).get_config()
    assert cfg["units"] == 2 and "b_bar" not in cfg  # b̄ travels with the weights
    cfg = InputNoise(scales=np.ones((2, 3)), seed=9).get_config()
    assert cfg["seed"] == 9 and tuple(cfg["feature_shape"]) == (2, 3) and "scales" not in cfg


def _all_layers_model():
    inp = keras.Input((5, 5, 2))
    h = InputNoise(scales=np.full((5, 5, 2), 0.05, np.float32), seed=3, name="input_noise")(inp)
    h = keras.layers.Conv2D(4, 2, use_bias=False, name="conv")(h)
    h = PerturbedBias(b_bar=[1.2, 0.8, 1.05, 0.95], name="pbias")(h)
    h = keras.layers.ReLU()(h)
    h = BoundedLRN(name="lrn")(h)
    h = keras.layers.Flatten()(h)
    h = keras.layers.Dense(6, name="dense")(h)
    h = BatchMinMax(name="minmax")(h)
    h = UnitClip(name="clip")(h)
    out = keras.layers.Dense(3, use_bias=False, name="logits")(h)
    return keras.Model(inp, out)


def test_model_with_all_layers_survives_keras_file_round_trip(tmp_path):
    keras.utils.set_random_seed(0)
    model = _all_layers_model()
    rng = np.random.default_rng(0)
    x = rng.random((8, 5, 5, 2)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]
    model.compile(keras.optimizers.SGD(0.05), loss=tfdpmech.TaylorCrossEntropy(), metrics=[tfdpmech.taylor_accuracy])
    model.get_layer("pbias").bias.assign([0.1, -0.2, 0.3, 0.05])
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)  # moves BatchMinMax statistics, trains weights
    pred = model.predict(x, verbose=0)
    path = tmp_path / "all_layers.keras"
    model.save(path)
    loaded = keras.models.load_model(path)  # custom objects resolved through the registration
    kinds = {type(layer) for layer in loaded.layers}
    assert {InputNoise, PerturbedBias, BoundedLRN, BatchMinMax, UnitClip} <= kinds
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), pred)
    for a, b in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(_np(loaded.get_layer("pbias").b_bar), np.float32([1.2, 0.8, 1.05, 0.95]))
    np.testing.assert_array_equal(_np(loaded.get_layer("input_noise").scales), np.full((5, 5, 2), 0.05, np.float32))
    assert float(_np(loaded.get_layer("minmax").steps)) == 2.0
