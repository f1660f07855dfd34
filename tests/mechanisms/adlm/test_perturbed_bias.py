"""PerturbedBias: the first layer's bias times the frozen noisy constant b̄."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tfdpmech.layers import PerturbedBias


def _np(t):
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


# ------------------------------------------------------------------------------------------------
# PerturbedBias
# ------------------------------------------------------------------------------------------------


def test_perturbed_bias_adds_bias_times_b_bar():
    layer = PerturbedBias(b_bar=[2.0, 0.5, -1.0])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(_np(layer(x)), x)  # bias starts at zero
    layer.bias.assign([1.0, 2.0, 3.0])
    np.testing.assert_allclose(_np(layer(x)), x + [2.0, 1.0, -3.0])
    # conv-shaped inputs: per filter (last axis)
    x4 = np.zeros((1, 2, 2, 3), dtype=np.float32)
    np.testing.assert_allclose(_np(layer(x4)), np.broadcast_to([2.0, 1.0, -3.0], (1, 2, 2, 3)))
    # same at training and inference: b̄ is part of the learned function
    np.testing.assert_array_equal(_np(layer(x, training=True)), _np(layer(x, training=False)))


def test_perturbed_bias_b_bar_is_frozen():
    layer = PerturbedBias(b_bar=[1.5, 0.75])
    layer.build((None, 2))
    assert [w.name.split(":")[0].split("/")[-1] for w in layer.trainable_weights] == ["bias"]
    assert [w.name.split(":")[0].split("/")[-1] for w in layer.non_trainable_weights] == ["b_bar"]
    model = keras.Sequential([keras.Input((2,)), layer])
    model.compile(keras.optimizers.SGD(0.5), "mse")
    model.fit(np.zeros((4, 2), np.float32), np.ones((4, 2), np.float32), batch_size=4, epochs=2, verbose=0)
    np.testing.assert_array_equal(_np(layer.b_bar), [1.5, 0.75])
    assert np.all(_np(layer.bias) != 0.0)  # the bias itself trains


def test_perturbed_bias_default_and_errors():
    layer = PerturbedBias(units=3)
    out = _np(layer(np.zeros((1, 3), np.float32)))
    np.testing.assert_array_equal(_np(layer.b_bar), [1.0, 1.0, 1.0])  # no noise
    np.testing.assert_array_equal(out, 0.0)
    with pytest.raises(ValueError, match="b_bar must be finite"):
        PerturbedBias(b_bar=[1.0, np.nan])
    with pytest.raises(ValueError, match="units=3 does not match b_bar of size 2"):
        PerturbedBias(b_bar=[1.0, 2.0], units=3)
    with pytest.raises(ValueError, match="PerturbedBias has 2 units but its input has 3 channels"):
        PerturbedBias(b_bar=[1.0, 2.0])(np.zeros((1, 3), np.float32))
