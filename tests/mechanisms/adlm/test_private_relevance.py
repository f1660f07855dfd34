"""Tests for tfdpmech.mechanisms.adlm.private_relevance: normalisation, Δ_R, noise, ledger, bad input."""

from __future__ import annotations

import gc
import json
import math
import weakref

import keras
import numpy as np
import pytest

from tfdpmech.accounting.ledger import PrivacyLedger
from tfdpmech.noise import laplace, make_rng
from tfdpmech.mechanisms.adlm import lrp_relevance, normalize_per_example, private_relevance, relevance_sensitivity


L = keras.layers


def _set_random_weights(model, seed, bias_scale=0.3):
    """Deterministic weights from numpy, independent of the Keras initialiser state."""
    rng = np.random.default_rng(seed)
    weights = []
    for w in model.get_weights():
        scale = bias_scale if w.ndim == 1 else 1.0
        weights.append((rng.normal(size=w.shape) * scale).astype(np.float32))
    model.set_weights(weights)
    return model


def _unit_data(shape, n, seed=0):
    return np.random.default_rng(seed).random((n, *shape)).astype(np.float32)


# ------------------------------------------------------------------------------------------------
# (d) per-example normalisation
# ------------------------------------------------------------------------------------------------


def test_normalize_per_example_known_values_and_constant_rows():
    out = normalize_per_example(np.array([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0], [-4.0, 0.0, 4.0]]))
    np.testing.assert_allclose(out, [[0, 0.5, 1], [0, 0, 0], [0, 0.5, 1]])
    assert out.dtype == np.float64


def test_normalize_per_example_range_and_shape():
    r = np.random.default_rng(0).normal(scale=1e3, size=(20, 4, 4, 2))
    out = normalize_per_example(r)
    assert out.shape == r.shape
    flat = out.reshape(20, -1)
    np.testing.assert_allclose(flat.min(axis=1), 0.0)
    np.testing.assert_allclose(flat.max(axis=1), 1.0)
    # each example is scaled with its own min and max only
    np.testing.assert_allclose(normalize_per_example(r[3:4]), out[3:4])


@pytest.mark.parametrize("bad", [np.ones(3), np.array([[1.0, np.nan]]), np.zeros((0, 3))])
def test_normalize_per_example_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        normalize_per_example(bad)


# ------------------------------------------------------------------------------------------------
# (e) sensitivity and noise
# ------------------------------------------------------------------------------------------------


def test_relevance_sensitivity_matches_lemma_1():
    assert relevance_sensitivity(784, 60000) == pytest.approx(0.026133, abs=1e-6)
    assert relevance_sensitivity(784, 60000) / 0.075 == pytest.approx(0.3484, abs=1e-4)
    assert relevance_sensitivity(400, 50000) == pytest.approx(0.016)
    assert relevance_sensitivity(3, 4) == 1.5
    for bad in (0, -1):
        with pytest.raises(ValueError):
            relevance_sensitivity(bad, 10)
    with pytest.raises(TypeError):
        relevance_sensitivity(10, 2.5)


@pytest.fixture(scope="module")
def wide_model():
    """d = 2000 features, so noise statistics over features are tight."""
    model = keras.Sequential([keras.Input((40, 50)), L.Flatten(), L.Dense(3, activation="softmax")])
    return _set_random_weights(model, seed=7)


@pytest.fixture(scope="module")
def wide_data():
    return _unit_data((40, 50), 4, seed=8), np.array([0, 1, 2, 0])


def _clean_mean(model, x, y):
    return normalize_per_example(lrp_relevance(model, x, y)).mean(axis=0)


def test_private_relevance_scale_shape_and_seeded_noise(wide_model, wide_data):
    x, y = wide_data
    eps = 2.0
    r1, rel = private_relevance(wide_model, x, y, eps, rng_or_seed=123)
    assert r1.shape == (40, 50) and r1.dtype == np.float64
    assert rel.sensitivity == pytest.approx(2 * 2000 / 4)  # Δ_R = 2d/n
    assert rel.noise_scale == pytest.approx(2 * 2000 / 4 / eps)
    assert rel.component == "relevance" and rel.mechanism == "laplace"
    noise = r1 - _clean_mean(wide_model, x, y)
    # the noise is one Laplace draw from the seeded numpy Generator
    np.testing.assert_allclose(noise.reshape(-1), laplace(rel.noise_scale, 2000, make_rng(123)), atol=1e-6)
    # E|Lap(b)| = b, std of the mean over 2000 draws = b/√2000 ≈ 0.022b; the seed is fixed
    assert np.mean(np.abs(noise)) == pytest.approx(rel.noise_scale, rel=0.1)
    r2, rel2 = private_relevance(wide_model, x, y, eps, rng_or_seed=123)
    np.testing.assert_array_equal(r1, r2)
    assert rel2.details["noise_fingerprint"] == rel.details["noise_fingerprint"]
    r3, _ = private_relevance(wide_model, x, y, eps, rng_or_seed=np.random.default_rng(124))
    assert not np.allclose(r1, r3)


def test_private_relevance_is_the_mean_of_normalised_relevance(wide_model, wide_data):
    # Eq. 10: with a huge ε the noise vanishes and the mean of normalised rows remains.
    x, y = wide_data
    r_bar, _ = private_relevance(wide_model, x, y, 1e12, rng_or_seed=0, batch_size=3)
    np.testing.assert_allclose(r_bar, _clean_mean(wide_model, x, y), atol=1e-6)
    assert r_bar.min() >= -1e-6 and r_bar.max() <= 1 + 1e-6


def test_private_relevance_keeps_no_reference_to_x(wide_model, wide_data):
    x = wide_data[0].copy()
    ref = weakref.ref(x)
    r_bar, release = private_relevance(wide_model, x, wide_data[1], 1.0, rng_or_seed=0)
    del x
    gc.collect()
    assert ref() is None


# ------------------------------------------------------------------------------------------------
# (f) ledger: proven vs claimed
# ------------------------------------------------------------------------------------------------


def test_ledger_proven_when_model_is_independent_of_the_data(wide_model, wide_data, tmp_path):
    ledger = PrivacyLedger()
    _, release = private_relevance(wide_model, *wide_data, 0.5, rng_or_seed=0, ledger=ledger)
    assert ledger.releases == (release,)
    assert release.guarantee == "proven"
    assert release.epsilon_claimed == release.epsilon_provable == 0.5
    assert "Lemma 1" in release.basis
    assert ledger.epsilon_provable() == 0.5
    ledger.save(tmp_path / "ledger.json")  # details must be JSON-serialisable
    assert json.loads((tmp_path / "ledger.json").read_text())["releases"][0]["component"] == "relevance"


def test_ledger_only_claimed_when_model_was_trained_on_the_data(wide_model, wide_data):
    ledger = PrivacyLedger()
    _, release = private_relevance(
        wide_model, *wide_data, 0.5, rng_or_seed=0, ledger=ledger, model_trained_on_private_data=True
    )
    assert release.guarantee == "claimed"
    assert release.epsilon_claimed == 0.5 and release.epsilon_provable is None
    assert "trained on the private data" in release.basis and "Lemma 1" in release.basis
    assert release.details["relevance_model_public"] is False
    assert ledger.epsilon_claimed() == 0.5 and ledger.epsilon_provable() is None


def test_without_ledger_the_release_is_still_returned(wide_model, wide_data):
    _, release = private_relevance(wide_model, *wide_data, 1.0, rng_or_seed=0)
    assert release.epsilon_provable == 1.0


@pytest.mark.parametrize(
    "eps,exc", [(0.0, ValueError), (-1.0, ValueError), (math.nan, ValueError), (math.inf, ValueError), ("1", TypeError)]
)
def test_bad_epsilon(wide_model, wide_data, eps, exc):
    with pytest.raises(exc, match="epsilon"):
        private_relevance(wide_model, *wide_data, eps)


def test_bad_ledger_flag_and_seed(wide_model, wide_data):
    with pytest.raises(TypeError, match="ledger"):
        private_relevance(wide_model, *wide_data, 1.0, ledger=[])
    with pytest.raises(TypeError, match="model_trained_on_private_data"):
        private_relevance(wide_model, *wide_data, 1.0, model_trained_on_private_data="no")
    with pytest.raises(TypeError, match="seed"):
        private_relevance(wide_model, *wide_data, 1.0, rng_or_seed=1.5)
