"""Tests for tfdpmech.mechanisms.adlm.taylor_cross_entropy.

The Taylor polynomial of per-class sigmoid cross-entropy at z = 0 (AdLM Eq. 25) is
``log 2 + (1/2 - y) z + z²/8 = (z - (4y - 2))²/8 + log 2 - 1/2`` per class (coefficients ϕ^(0) = log 2,
ϕ^(1) = 1/2 − y, ϕ^(2) = 1/8 from f_1l, f_2l of Eq. 24 at 0; AdLM §III-C and App. D).
"""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfdpmech
from tfdpmech.losses import TaylorCrossEntropy, loss_sensitivity, taylor_coefficients
from tfdpmech.mechanisms.adlm.taylor_cross_entropy import LOG2, PHI2
from tfdpmech.metrics import taylor_accuracy


LN2 = math.log(2.0)


def _np(t):
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


def _identity(z, y):
    """AdLM Eq. 25 completed to a square: Σ_l (z − (4y − 2))²/8 + M(log 2 − 1/2), per example, in float64."""
    z, y = np.asarray(z, np.float64), np.asarray(y, np.float64)
    return np.sum((z - (4 * y - 2)) ** 2 / 8, axis=-1) + z.shape[-1] * (LN2 - 0.5)


def _data(n=5, m=4, seed=0):
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(n, m)) * 3).astype(np.float32)
    y = np.eye(m, dtype=np.float32)[rng.integers(0, m, n)]
    return z, y


# ------------------------------------------------------------------------------------------------
# coefficients and the Taylor identity
# ------------------------------------------------------------------------------------------------


def test_constants():
    assert LOG2 == pytest.approx(0.6931471805599453, abs=1e-15)
    assert PHI2 == 0.125


def test_taylor_coefficients_values():
    y = np.array([[0, 1, 0], [1, 0, 0]], dtype=np.float32)
    phi = taylor_coefficients(y)
    assert phi.shape == (2, 3, 3) and phi.dtype == np.float32
    np.testing.assert_allclose(phi[..., 0], LN2, rtol=1e-7)
    np.testing.assert_array_equal(phi[..., 1], [[0.5, -0.5, 0.5], [-0.5, 0.5, 0.5]])
    np.testing.assert_array_equal(phi[..., 2], 0.125)
    with pytest.raises(ValueError, match="y must be one-hot"):
        taylor_coefficients(np.array([[0.5, 0.5, 0.0]]))
    with pytest.raises(ValueError, match="y must have at least 2 dimension"):
        taylor_coefficients(np.array([0, 1]))


def test_hand_computed_loss():
    z = np.array([[0.0, 2.0, -2.0]], dtype=np.float32)
    y = np.array([[0.0, 1.0, 0.0]], dtype=np.float32)
    # (0+2)²/8 + (2-2)²/8 + (-2+2)²/8 + 3(log 2 - 1/2) = 0.5 + 0.579442 = 1.079442
    # = 3 log 2 + (0.5·0 - 0.5·2 + 0.5·(-2)) + (0 + 4 + 4)/8
    expected = 0.5 + 3 * (LN2 - 0.5)
    assert expected == pytest.approx(3 * LN2 - 2.0 + 1.0)
    assert expected == pytest.approx(1.0794415, abs=1e-7)
    loss = TaylorCrossEntropy()
    assert _np(loss.call(tf.constant(y), tf.constant(z)))[0] == pytest.approx(expected, rel=1e-6)
    assert float(loss(y, z)) == pytest.approx(expected, rel=1e-6)


def test_loss_sums_over_classes_not_mean():
    z = np.zeros((2, 10), np.float32)
    y = np.eye(10, dtype=np.float32)[[3, 7]]
    # at z = 0 every class contributes ϕ^(0) = log 2 and Eq. 24–25 sum over the M classes:
    # M log 2 = 6.931472 per example
    np.testing.assert_allclose(_np(TaylorCrossEntropy().call(tf.constant(y), tf.constant(z))), 10 * LN2, rtol=1e-6)


def test_taylor_identity_with_one_hot_labels():
    z, y = _data(n=6, m=4, seed=1)
    per_example = _np(TaylorCrossEntropy().call(tf.constant(y), tf.constant(z)))
    assert per_example.shape == (6,)
    np.testing.assert_allclose(per_example, _identity(z, y), rtol=1e-5)
    # default reduction: mean over the batch (the 1/|L| of line 29)
    assert float(TaylorCrossEntropy()(y, z)) == pytest.approx(_identity(z, y).mean(), rel=1e-5)


def test_taylor_identity_with_coefficient_tensor():
    z, y = _data(n=6, m=4, seed=2)
    phi = taylor_coefficients(y)
    loss = TaylorCrossEntropy(any_batch_size=True)  # noise-free coefficients
    per_example = _np(loss.call(tf.constant(phi), tf.constant(z)))
    np.testing.assert_allclose(per_example, _identity(z, y), rtol=1e-5)
    np.testing.assert_allclose(per_example, _np(loss.call(tf.constant(y), tf.constant(z))), rtol=1e-6)
    assert float(loss(phi, z)) == pytest.approx(_identity(z, y).mean(), rel=1e-5)


def test_perturbed_coefficients_are_used_as_given():
    z = np.array([[1.0, -2.0]], dtype=np.float32)
    phi = np.array([[[0.1, 0.3, 0.2], [-1.0, 2.0, 0.5]]], dtype=np.float32)
    # Σ_l ϕ0 + ϕ1 z + ϕ2 z²: (0.1 + 0.3 + 0.2) + (-1 - 4 + 2) = 0.6 - 3 = -2.4
    loss = TaylorCrossEntropy(any_batch_size=True)
    assert _np(loss.call(tf.constant(phi), tf.constant(z)))[0] == pytest.approx(-2.4, rel=1e-6)


def test_gradient_wrt_logits():
    z, y = _data(n=5, m=3, seed=3)
    zt = tf.Variable(z)
    loss = TaylorCrossEntropy(any_batch_size=True)
    for target in (tf.constant(y), tf.constant(taylor_coefficients(y))):
        with tf.GradientTape() as tape:
            total = tf.reduce_sum(loss.call(target, zt))
        grad = _np(tape.gradient(total, zt))
        np.testing.assert_allclose(grad, (0.5 - y) + z / 4, rtol=1e-5, atol=1e-6)
        with tf.GradientTape() as tape:
            mean = loss(target, zt)
        # the batch mean divides the gradient by |L|
        np.testing.assert_allclose(_np(tape.gradient(mean, zt)), ((0.5 - y) + z / 4) / 5, rtol=1e-5, atol=1e-6)


def test_gradient_at_zero_equals_exact_sigmoid_cross_entropy_gradient():
    y = np.eye(3, dtype=np.float32)[[0, 2]]
    zt = tf.Variable(tf.zeros((2, 3)))
    with tf.GradientTape() as tape:
        taylor = tf.reduce_sum(TaylorCrossEntropy().call(tf.constant(y), zt))
    with tf.GradientTape() as tape2:
        exact = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=zt))
    np.testing.assert_allclose(_np(tape.gradient(taylor, zt)), _np(tape2.gradient(exact, zt)), atol=1e-7)
    assert float(taylor) == pytest.approx(float(exact), rel=1e-6)  # both 6 log 2 at z = 0


def test_shape_errors():
    loss = TaylorCrossEntropy(any_batch_size=True)
    z = tf.zeros((2, 4))
    with pytest.raises(ValueError, match="y_true has 3 classes but the model outputs 4 logits"):
        loss.call(tf.constant(np.eye(3, dtype=np.float32)[[0, 1]]), z)
    with pytest.raises(ValueError, match="y_true has 3 classes but the model outputs 4 logits"):
        loss.call(tf.zeros((2, 3, 3)), z)
    with pytest.raises(ValueError, match=r"y_true must be one-hot labels \(batch, M\) or coefficients"):
        loss.call(tf.zeros((2, 4, 3, 1)), z)


# ------------------------------------------------------------------------------------------------
# sensitivity (Lemma 5)
# ------------------------------------------------------------------------------------------------


def test_loss_sensitivity_reference_values():
    assert loss_sensitivity(10, 25) == 1812.5  # 10·(25 + 625/4), MNIST (25-unit last hidden layer, AdLM §IV)
    assert loss_sensitivity(10, 30) == 2550.0  # 10·(30 + 900/4), CIFAR-10 (30 units, AdLM §IV)
    assert loss_sensitivity(2, 1) == 2.5  # 2·(1 + 1/4)
    # an output bias (the paper's output layer has none) counts as one more unit in Lemma 5
    assert loss_sensitivity(10, 26) == 10 * (26 + 26 * 26 / 4)
    assert isinstance(loss_sensitivity(10, 25), float)


def test_loss_sensitivity_errors():
    with pytest.raises(ValueError, match="num_classes must be >= 2"):
        loss_sensitivity(1, 25)
    with pytest.raises(ValueError, match="last_hidden_units must be >= 1"):
        loss_sensitivity(10, 0)
    with pytest.raises(TypeError, match="num_classes must be an integer"):
        loss_sensitivity(10.0, 25)


# ------------------------------------------------------------------------------------------------
# batch-size guard in model.fit
# ------------------------------------------------------------------------------------------------


def _tiny_model(batch_size, metrics=()):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, use_bias=False)])
    model.compile(keras.optimizers.SGD(0.1), loss=TaylorCrossEntropy(batch_size=batch_size), metrics=list(metrics))
    return model


def _coefficient_dataset(batch, drop_remainder, n=20):
    rng = np.random.default_rng(0)
    x = rng.random((n, 3)).astype(np.float32)
    y = np.eye(2, dtype=np.float32)[rng.integers(0, 2, n)]
    return tf.data.Dataset.from_tensor_slices((x, taylor_coefficients(y))).batch(batch, drop_remainder=drop_remainder)


def test_fit_refuses_a_possible_partial_last_batch():
    model = _tiny_model(8)
    with pytest.raises(ValueError, match="drop_remainder=True") as info:
        model.fit(_coefficient_dataset(8, drop_remainder=False), epochs=1, verbose=0, shuffle=False)
    assert "batch_size=8" in str(info.value)


def test_fit_refuses_another_batch_size():
    model = _tiny_model(8)
    with pytest.raises(ValueError, match=r"got a batch of 4 records, but the noise was calibrated for batch_size=8"):
        model.fit(_coefficient_dataset(4, drop_remainder=True), epochs=1, verbose=0, shuffle=False)


def test_fit_with_the_calibrated_batch_size_trains():
    model = _tiny_model(8, metrics=[taylor_accuracy])
    before = [w.copy() for w in model.get_weights()]
    history = model.fit(_coefficient_dataset(8, drop_remainder=True), epochs=2, verbose=0, shuffle=False)
    losses = history.history["loss"]
    assert len(losses) == 2 and all(np.isfinite(losses))
    assert losses[1] < losses[0]
    assert "taylor_accuracy" in history.history
    assert not np.allclose(before[0], model.get_weights()[0])


def test_guard_needs_batch_size_and_validates_it():
    # coefficient tensors without batch_size are refused by default: a perturbed batch trained at
    # another size than calibrated for spends more ε than recorded
    with pytest.raises(ValueError, match=r"no batch_size: pass TaylorCrossEntropy\(batch_size=B\)"):
        TaylorCrossEntropy().call(tf.zeros((3, 2, 3)), tf.zeros((3, 2)))
    # any batch only when asked for (coefficients released once, or noise-free); one-hot labels never ask
    out = TaylorCrossEntropy(any_batch_size=True).call(tf.zeros((3, 2, 3)), tf.zeros((3, 2)))
    assert out.shape == (3,)
    assert TaylorCrossEntropy().call(tf.zeros((3, 2)), tf.zeros((3, 2))).shape == (3,)
    with pytest.raises(ValueError, match="not both"):
        TaylorCrossEntropy(batch_size=8, any_batch_size=True)
    with pytest.raises(TypeError, match="any_batch_size must be True or False"):
        TaylorCrossEntropy(any_batch_size="yes")
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        TaylorCrossEntropy(batch_size=0)
    with pytest.raises(TypeError, match="batch_size must be an integer"):
        TaylorCrossEntropy(batch_size=8.0)
    # eager call with the wrong static batch
    with pytest.raises(ValueError, match="got a batch of 3 records"):
        TaylorCrossEntropy(batch_size=8).call(tf.zeros((3, 2, 3)), tf.zeros((3, 2)))


# ------------------------------------------------------------------------------------------------
# config
# ------------------------------------------------------------------------------------------------


def test_get_config_round_trip():
    loss = TaylorCrossEntropy(batch_size=8, name="my_taylor")
    config = loss.get_config()
    assert config["batch_size"] == 8 and config["name"] == "my_taylor"
    clone = TaylorCrossEntropy.from_config(config)
    assert clone.batch_size == 8 and clone.name == "my_taylor"
    assert clone.get_config() == config
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(loss))
    assert isinstance(again, TaylorCrossEntropy) and again.get_config() == config
    assert TaylorCrossEntropy.from_config(TaylorCrossEntropy().get_config()).batch_size is None
    assert TaylorCrossEntropy.from_config(TaylorCrossEntropy(any_batch_size=True).get_config()).any_batch_size
    z, y = _data(seed=4)
    assert float(clone(y, z)) == pytest.approx(float(loss(y, z)), rel=1e-7)


def test_registered_names():
    assert keras.saving.get_registered_name(TaylorCrossEntropy) == "tfdpmech>TaylorCrossEntropy"
    assert keras.saving.get_registered_object("tfdpmech>taylor_accuracy") is taylor_accuracy
    assert tfdpmech.TaylorCrossEntropy is TaylorCrossEntropy and tfdpmech.taylor_accuracy is taylor_accuracy
