"""random_features: seeded, data-independent, in [0, 1], saved and loaded with the model."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tfdpmech.features import RandomFourierFeatures, random_features


def test_seeded_bounded_and_data_independent(tmp_path):
    a, b, c = (random_features((4, 4, 1), 32, seed=s) for s in (3, 3, 4))
    assert a.fingerprint == b.fingerprint != c.fingerprint  # depends on the seed only
    x = np.random.default_rng(0).uniform(0, 1, (50, 4, 4, 1)).astype(np.float32)
    f = a(x)
    assert f.shape == (50, 32) and f.min() >= 0 and f.max() <= 1 and a.unit_bounded
    assert a.release.epsilon_provable == 0.0 and "independently of any data" in a.release.basis
    path = str(tmp_path / "rff.keras")
    a.model.save(path)
    np.testing.assert_array_equal(keras.models.load_model(path).predict(x, verbose=0), a.model.predict(x, verbose=0))


def test_kernel_approximation():
    """½ + ½cos features approximate the Gaussian kernel: 2·mean((f−½)(f'−½))·4 ≈ exp(−γ‖x − x'‖²)."""
    feats = random_features((3,), 20000, gamma=0.5, seed=0)
    x = np.array([[0.0, 0.0, 0.0], [0.5, 0.2, 0.1], [1.0, 1.0, 0.0]], np.float32)
    f = feats(x) - 0.5
    approx = 8 * (f @ f.T) / f.shape[1]
    exact = np.exp(-0.5 * np.sum((x[:, None] - x[None]) ** 2, axis=-1))
    np.testing.assert_allclose(approx, exact, atol=0.03)


def test_bad_arguments():
    with pytest.raises(ValueError, match="units"):
        RandomFourierFeatures(0, 1.0, 0)
    with pytest.raises(ValueError, match="gamma"):
        RandomFourierFeatures(4, -1.0, 0)
    with pytest.raises(TypeError, match="seed"):
        RandomFourierFeatures(4, 1.0, None)
