"""Tests for ConvexifiedCrossEntropy (Lu et al. Theorem 5, Eq. 22–23; the authors' element-wise variant)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.mechanisms.output_perturbation.convexified_cross_entropy import ConvexifiedCrossEntropy


def _batch(seed=0, b=16, c=5, scale=3.0):
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(b, c)) * scale).astype(np.float32)
    y = np.eye(c, dtype=np.float32)[rng.integers(0, c, b)]
    return y, z


def _reference(y_true, logits, alpha: float, mode: str = "per_sample") -> float:
    """Float64 numpy value of the convexified loss on one batch: Eq. 22 (``per_sample``) or the authors' code."""
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(y_true)
    if y.ndim == 1:
        y = np.eye(z.shape[1])[y.astype(int)]
    m = z.max(axis=1, keepdims=True)
    logp = z - m - np.log(np.exp(z - m).sum(axis=1, keepdims=True))
    ce = -(y * logp).sum(axis=1)
    if mode == "per_sample":
        a = alpha * ce
        top = a.max()
        return float((top + np.log(np.mean(np.exp(a - top)))) / alpha)  # Eq. 22
    e = -alpha * y * logp  # the code's exp(-α·y⊙log p) averaged over B·C entries
    top = e.max()
    return float((top + np.log(np.mean(np.exp(e - top)))) / alpha)


def _eq22_naive(y, z, alpha):
    z = z.astype(np.float64)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    ce = -np.log((y * p).sum(1))
    return np.log(np.mean(np.exp(alpha * ce))) / alpha


@pytest.mark.parametrize("alpha", [0.5, 1.0, 5.0])
def test_matches_float64_reference_of_eq22(alpha):
    y, z = _batch()
    loss = float(ConvexifiedCrossEntropy(alpha)(y, z))
    assert loss == pytest.approx(_eq22_naive(y, z, alpha), rel=1e-5)
    assert loss == pytest.approx(_reference(y, z, alpha), rel=1e-5)


def test_sparse_and_one_hot_labels_agree():
    y, z = _batch(1)
    dense = float(ConvexifiedCrossEntropy(2.0)(y, z))
    assert float(ConvexifiedCrossEntropy(2.0)(np.argmax(y, 1), z)) == pytest.approx(dense, rel=1e-6)
    assert float(ConvexifiedCrossEntropy(2.0, sparse=True)(np.argmax(y, 1)[:, None], z)) == pytest.approx(dense, rel=1e-6)


def test_probabilities_input():
    y, z = _batch(2, scale=1.0)
    p = tf.nn.softmax(z).numpy()
    assert float(ConvexifiedCrossEntropy(1.0, from_logits=False)(y, p)) == pytest.approx(
        float(ConvexifiedCrossEntropy(1.0)(y, z)), rel=1e-4)


def test_finite_for_huge_alpha_times_ce():
    # α·CE up to 1,000 and beyond: the naive exp overflows in float32 once α·l > 88
    y = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    z = np.array([[-200.0, 200.0], [0.0, 0.0]], dtype=np.float32)  # CE ≈ 400 and ln 2
    for alpha in (2.5, 5.0, 10.0):
        value = float(ConvexifiedCrossEntropy(alpha)(y, z))
        assert np.isfinite(value)
        assert value == pytest.approx(_reference(y, z, alpha), rel=1e-5)
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.log(np.mean(np.exp(np.float32(5.0) * np.float32([400.0, 0.69])))))


def test_alpha_to_zero_is_mean_ce_and_large_alpha_approaches_max():
    y, z = _batch(3)
    ce = tf.keras.losses.categorical_crossentropy(y, z, from_logits=True).numpy().astype(np.float64)
    assert float(ConvexifiedCrossEntropy(1e-4)(y, z)) == pytest.approx(ce.mean(), rel=1e-3)
    big = float(ConvexifiedCrossEntropy(200.0)(y, z))
    assert ce.max() - np.log(len(ce)) / 200.0 - 1e-3 <= big <= ce.max() + 1e-4


def test_reference_elementwise_closed_form():
    y, z = _batch(4, c=4)
    alpha = 1.5
    p = tf.nn.softmax(tf.constant(z, tf.float64)).numpy()
    p_y = (y * p).sum(1)
    closed = np.log(((4 - 1) + np.mean(p_y ** (-alpha))) / 4) / alpha
    loss = float(ConvexifiedCrossEntropy(alpha, mode="reference_elementwise")(y, z))
    assert loss == pytest.approx(closed, rel=1e-5)
    assert loss == pytest.approx(_reference(y, z, alpha, "reference_elementwise"), rel=1e-5)
    assert abs(loss - float(ConvexifiedCrossEntropy(alpha)(y, z))) > 0.1  # differs from Eq. 22


def test_gradient_is_that_of_the_batch_value():
    y, z = _batch(5, b=6, c=3)
    zt = tf.Variable(z)
    with tf.GradientTape() as tape:
        loss = ConvexifiedCrossEntropy(2.0)(y, zt)
    grad = tape.gradient(loss, zt).numpy()
    # d/dz of (1/α)·log mean exp(α l_i): softmax weights w_i = e^{α l_i}/Σ e^{α l_j} times ∂l_i/∂z_i
    p = tf.nn.softmax(z).numpy().astype(np.float64)
    ce = -np.log((y * p).sum(1))
    w = np.exp(2.0 * ce - (2.0 * ce).max())
    w /= w.sum()
    np.testing.assert_allclose(grad, w[:, None] * (p - y), rtol=1e-4, atol=1e-6)


def test_sample_weight_refused_and_bad_arguments():
    y, z = _batch()
    with pytest.raises(ValueError, match="sample_weight"):
        ConvexifiedCrossEntropy(1.0)(y, z, sample_weight=np.ones(len(y)))
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="alpha"):
            ConvexifiedCrossEntropy(bad)
    with pytest.raises(TypeError, match="alpha"):
        ConvexifiedCrossEntropy("1")
    with pytest.raises(ValueError, match="mode"):
        ConvexifiedCrossEntropy(1.0, mode="per_class")


def test_config_round_trip_and_keras_file(tmp_path):
    loss = ConvexifiedCrossEntropy(5.0, mode="reference_elementwise", sparse=False)
    clone = ConvexifiedCrossEntropy.from_config(loss.get_config())
    assert (clone.alpha, clone.mode, clone.from_logits, clone.sparse) == (5.0, "reference_elementwise", True, False)
    assert keras.losses.deserialize(keras.losses.serialize(loss)).alpha == 5.0
    model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss=loss)
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert isinstance(loaded.loss, ConvexifiedCrossEntropy) and loaded.loss.alpha == 5.0


def test_trains_in_model_fit():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (256, 4)).astype(np.float32)
    y = np.eye(2, dtype=np.float32)[(x[:, 0] + x[:, 1] > 0).astype(int)]
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss=ConvexifiedCrossEntropy(1.0))
    hist = model.fit(x, y, epochs=15, batch_size=64, verbose=0)
    assert hist.history["loss"][-1] < 0.5 * hist.history["loss"][0]
