"""InputNoise: per-step shared Laplace noise (reproduction only), fresh every training call."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.layers import InputNoise


def _np(t):
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


# ------------------------------------------------------------------------------------------------
# InputNoise
# ------------------------------------------------------------------------------------------------


def test_input_noise_is_identity_at_inference():
    layer = InputNoise(scales=np.full((2, 3), 5.0, np.float32), seed=0)
    x = np.random.default_rng(0).random((4, 2, 3)).astype(np.float32)
    np.testing.assert_array_equal(_np(layer(x, training=False)), x)
    np.testing.assert_array_equal(_np(layer(x)), x)
    model = keras.Sequential([keras.Input((2, 3)), layer])
    np.testing.assert_array_equal(model.predict(x, verbose=0), x)


def test_input_noise_shared_by_the_batch_and_fresh_each_training_call():
    layer = InputNoise(scales=np.ones(5, np.float32), seed=3)
    x = np.random.default_rng(1).random((4, 5)).astype(np.float32)
    n1 = _np(layer(x, training=True)) - x
    n2 = _np(layer(x, training=True)) - x
    # one draw per feature, shared by every example of the batch (the shared_per_step mode)
    np.testing.assert_allclose(n1, np.broadcast_to(n1[0], n1.shape), atol=1e-6)
    assert np.all(np.abs(n1[0] - n2[0]) > 1e-6)  # a new draw per call


def test_input_noise_fresh_each_call_inside_tf_function():
    layer = InputNoise(scales=np.ones(5, np.float32), seed=4)
    layer.build((None, 5))  # variables are created outside the traced function
    x = tf.zeros((2, 5))

    @tf.function
    def step(x):
        return layer(x, training=True)

    draws = [_np(step(x))[0] for _ in range(3)]
    assert step.experimental_get_tracing_count() == 1
    assert np.all(draws[0] != draws[1]) and np.all(draws[1] != draws[2]) and np.all(draws[0] != draws[2])


def test_input_noise_per_feature_scale():
    scales = np.repeat(np.array([[0.0], [0.5], [2.0]], np.float32), 4000, axis=1)  # 4000 draws per scale
    layer = InputNoise(scales=scales, seed=7)
    noise = _np(layer(np.zeros((1, 3, 4000), np.float32), training=True))[0]
    np.testing.assert_array_equal(noise[0], 0.0)
    mean_abs = np.abs(noise).mean(axis=1)
    # E|Lap(b)| = b, standard error b/sqrt(4000) = 1.6 %; tolerance 8 %
    np.testing.assert_allclose(mean_abs[1:], [0.5, 2.0], rtol=0.08)
    assert abs(noise[1].mean()) < 0.05 and abs(noise[2].mean()) < 0.2


def test_input_noise_seeds():
    x = np.zeros((1, 6), np.float32)
    a = _np(InputNoise(scales=np.ones(6), seed=11)(x, training=True))
    b = _np(InputNoise(scales=np.ones(6), seed=11)(x, training=True))
    np.testing.assert_array_equal(a, b)
    c = _np(InputNoise(scales=np.ones(6))(x, training=True))
    d = _np(InputNoise(scales=np.ones(6))(x, training=True))
    assert not np.array_equal(c, d)  # OS entropy


def test_input_noise_scales_are_a_frozen_weight():
    layer = InputNoise(scales=np.full(3, 0.5, np.float32), seed=0)
    layer.build((None, 3))
    assert layer.trainable_weights == []
    assert len(layer.non_trainable_weights) == 1
    np.testing.assert_array_equal(_np(layer.scales), [0.5, 0.5, 0.5])


def test_input_noise_errors():
    with pytest.raises(ValueError, match="scales must be finite and >= 0"):
        InputNoise(scales=[1.0, -0.5])
    with pytest.raises(ValueError, match="scales must be finite and >= 0"):
        InputNoise(scales=[1.0, np.inf])
    with pytest.raises(ValueError, match="pass scales"):
        InputNoise()
    with pytest.raises(ValueError, match=r"InputNoise scales have shape \(3,\), inputs \(4,\)"):
        InputNoise(scales=np.ones(3))(np.zeros((1, 4), np.float32), training=True)
