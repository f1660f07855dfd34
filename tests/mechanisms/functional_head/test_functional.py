"""The functional head: calibrated noise drawn once, closed form = model.fit, Keras round trip, bad input."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from tfdpmech.accounting.gaussian import gaussian_epsilon
from tfdpmech.features import FeatureExtractor
from tfdpmech.mechanisms.functional_head import (
    FeatureMap, FunctionalHead, StatisticsReleasedError, feature_map, functional_statistics,
    gaussian_sensitivity, laplace_sensitivity,
)
from tfdpmech.accounting.gaussian import gaussian_sigma
from tfdpmech.losses import TaylorCrossEntropy


def blobs(n=300, d=4, c=3, seed=0):
    """Separable synthetic features in [0, 1] and integer labels."""
    centres = np.random.default_rng(seed).uniform(0.1, 0.9, (c, d))  # the same for every n
    rng = np.random.default_rng(seed + 1000)
    labels = rng.integers(c, size=n)
    x = np.clip(centres[labels] + rng.normal(0, 0.05, (n, d)), 0, 1)
    return x, labels


def tiny_extractor(d_in=6, units=4, seed=0, *, trained_on=None, bounds=(0.0, 1.0)):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((d_in,)), keras.layers.Dense(units, activation="sigmoid")], name="tiny")
    return FeatureExtractor(model, name="tiny", provenance="test: weights drawn at random, no data", bounds=bounds,
                            trained_on=trained_on)


# -- the release ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_released_noise_has_the_calibrated_scale(mechanism):
    """Fixed-seed KS test on the ~800 released numbers: the noise is Lap(Δ₁/ε) or N(0, σ²), not twice that."""
    rng = np.random.default_rng(3)
    n, d, c = 100, 30, 10
    x = rng.uniform(0, 1, (n, d))
    y = rng.integers(c, size=n)
    lam = 0.5
    kwargs = dict(delta=1e-5) if mechanism == "gaussian" else {}
    head = FunctionalHead(None, c, mechanism=mechanism, epsilon=1.0, quadratic_weight=lam, seed=11, **kwargs)
    head.fit(x, y)
    s1, s2 = functional_statistics(feature_map(x, clip_norm=mechanism == "gaussian"), np.eye(c)[y])
    released = head.statistics()
    iu = np.triu_indices(d + 1)
    noise = np.concatenate([(released["s1_bar"] - s1).ravel(), lam * (released["s2_bar"] - s2)[iu]])
    assert len(noise) == (d + 1) * c + (d + 1) * (d + 2) // 2
    scale = head.release.noise_scale
    if mechanism == "laplace":
        assert scale == pytest.approx(laplace_sensitivity(d, c, quadratic_weight=lam) / 1.0)
        dist = stats.laplace
    else:
        assert scale == pytest.approx(gaussian_sigma(gaussian_sensitivity(c, nonnegative=False, quadratic_weight=lam),
                                                     1.0, 1e-5))
        dist = stats.norm
    assert stats.kstest(noise, dist(scale=scale).cdf).pvalue > 0.01
    assert stats.kstest(noise, dist(scale=2 * scale).cdf).pvalue < 1e-6
    assert stats.kstest(noise, dist(scale=scale / 2).cdf).pvalue < 1e-6


def test_gaussian_sigma_comes_from_dp_accounting_and_meets_the_target():
    sens = gaussian_sensitivity(10)
    sigma = gaussian_sigma(sens, 0.5, 1e-5)
    # independent check with dp_accounting's PLD accountant (pessimistic discretisation: a hair above 0.5)
    assert gaussian_epsilon(sigma / sens, 1e-5, accountant="pld") == pytest.approx(0.5, rel=0.02)
    assert gaussian_epsilon(0.9 * sigma / sens, 1e-5, accountant="pld") > 0.52  # the calibration is not loose
    assert sigma < math.sqrt(2 * math.log(1.25 / 1e-5)) * sens / 0.5  # tighter than the classic formula


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_ledger_is_proven_and_noise_is_drawn_once(mechanism):
    x, labels = blobs()
    kwargs = dict(delta=1e-5) if mechanism == "gaussian" else {}
    head = FunctionalHead(tiny_extractor(), 3, mechanism=mechanism, epsilon=2.0, seed=0, **kwargs)
    head.fit(np.pad(x, ((0, 0), (0, 2))), labels)
    ledger = head.ledger
    assert [r.component for r in ledger.releases] == ["features:tiny", "functional_head"]
    assert ledger.epsilon_provable() == ledger.epsilon_claimed() == 2.0
    assert ledger.delta() == (1e-5 if mechanism == "gaussian" else 0.0)
    assert all(r.guarantee == "proven" for r in ledger.releases)
    assert set(head.seconds) == {"features", "statistics_release_solve"} and min(head.seconds.values()) > 0
    before = (ledger.to_dict(), head.statistics()["s1_bar"].copy(), head.model.get_weights())
    # train "longer": the returned model is frozen, the pseudo-records are post-processing
    head.model.fit(np.pad(x, ((0, 0), (0, 2))).astype(np.float32), np.eye(3)[labels], epochs=2, verbose=0)
    small = head.trainable_head()
    small.compile(keras.optimizers.Adam(0.05), loss=TaylorCrossEntropy(any_batch_size=True))
    small.fit(*head.pseudo_records(), epochs=3, verbose=0)
    head.to_keras(small.get_weights()[0])
    head.predict(np.pad(x, ((0, 0), (0, 2))))
    assert ledger.to_dict() == before[0] and len(ledger) == 2
    np.testing.assert_array_equal(head.statistics()["s1_bar"], before[1])
    for a, b in zip(head.model.get_weights(), before[2]):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(StatisticsReleasedError, match="already released once"):
        head.fit(np.pad(x, ((0, 0), (0, 2))), labels)
    with pytest.raises(ValueError, match="already released once"):  # it is a ValueError too
        head.fit(np.pad(x, ((0, 0), (0, 2))), labels)
    assert len(ledger) == 2


def test_same_seed_same_release_other_seed_other_noise():
    x, labels = blobs()
    a = FunctionalHead(None, 3, mechanism="laplace", epsilon=1.0, seed=5)
    a.fit(x, labels)
    b = FunctionalHead(None, 3, mechanism="laplace", epsilon=1.0, seed=5)
    b.fit(x, labels)
    c = FunctionalHead(None, 3, mechanism="laplace", epsilon=1.0, seed=6)
    c.fit(x, labels)
    np.testing.assert_array_equal(a.statistics()["s2_bar"], b.statistics()["s2_bar"])
    assert not np.allclose(a.statistics()["s2_bar"], c.statistics()["s2_bar"])
    assert np.allclose(a.statistics()["s2_bar"], a.statistics()["s2_bar"].T)  # one triangle, mirrored


# -- what is solved --------------------------------------------------------------------------------
def test_closed_form_minimises_the_released_objective_and_model_fit_agrees():
    x, labels = blobs(n=400)
    head = FunctionalHead(None, 3, mechanism="gaussian", epsilon=4.0, delta=1e-5, seed=1)
    head.fit(x, labels)
    w = head.kernel
    base = head.objective(w)
    rng = np.random.default_rng(0)
    for _ in range(5):
        assert head.objective(w + rng.normal(0, 0.1, w.shape)) > base
    xs, ys = head.pseudo_records()
    # the pseudo-records' Keras loss is the released objective (mean over the d records)
    w_rand = rng.normal(size=w.shape)
    loss = TaylorCrossEntropy(any_batch_size=True)(tf.constant(ys), tf.constant(xs @ w_rand.astype(np.float32))).numpy()
    assert loss * len(xs) == pytest.approx(head.objective(w_rand), rel=1e-4)
    # model.compile(loss=...) / model.fit reaches the closed form
    keras.utils.set_random_seed(0)
    small = head.trainable_head()
    small.compile(keras.optimizers.Adam(0.05), loss=TaylorCrossEntropy(any_batch_size=True))
    small.fit(tf.data.Dataset.from_tensors((xs, ys)).repeat(1500), epochs=1, verbose=0)  # 1500 full-batch steps
    fitted = small.get_layer("functional_head").get_weights()[0]
    assert head.objective(fitted) == pytest.approx(base, rel=1e-3)
    np.testing.assert_allclose(fitted, w, atol=0.02 * np.abs(w).max())
    same = np.argmax(head.to_keras(fitted).predict(x.astype(np.float32), verbose=0), 1)
    assert np.mean(same == np.argmax(head.model.predict(x.astype(np.float32), verbose=0), 1)) > 0.99


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_head_learns_with_modest_noise(mechanism):
    x, labels = blobs(n=3000, seed=2)
    kwargs = dict(delta=1e-5) if mechanism == "gaussian" else {}
    head = FunctionalHead(None, 3, mechanism=mechanism, epsilon=4.0, seed=0, **kwargs)
    head.fit(x, labels)
    x_test, y_test = blobs(n=500, seed=2)
    assert np.mean(head.predict(x_test).argmax(1) == y_test) > 0.9


def test_keras_round_trip_identical_predictions(tmp_path):
    x, labels = blobs()
    x6 = np.pad(x, ((0, 0), (0, 2))).astype(np.float32)
    head = FunctionalHead(tiny_extractor(), 3, mechanism="gaussian", epsilon=1.0, delta=1e-5, seed=0)
    head.fit(x6, labels)
    path = str(tmp_path / "head.keras")
    head.model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_array_equal(loaded.predict(x6, verbose=0), head.model.predict(x6, verbose=0))
    assert any(isinstance(layer, FeatureMap) for layer in loaded.layers)


def test_feature_map_layer_matches_host_map():
    f = np.random.default_rng(0).uniform(-2, 2, (7, 3, 2)).astype(np.float32)
    for clip in (False, True):
        np.testing.assert_allclose(FeatureMap(clip_norm=clip)(f).numpy(), feature_map(f, clip_norm=clip), rtol=1e-6)
    assert np.allclose(np.linalg.norm(feature_map(f, clip_norm=True), axis=1), 1.0)


# -- bad input: refused before anything is released -----------------------------------------------
@pytest.mark.parametrize("kwargs, error, match", [
    (dict(epsilon=0.0), ValueError, "epsilon"),
    (dict(epsilon=-1.0), ValueError, "epsilon"),
    (dict(epsilon=float("inf")), ValueError, "epsilon"),
    (dict(epsilon="1"), TypeError, "epsilon"),
    (dict(epsilon=1.0, mechanism="gaussian"), ValueError, "needs delta"),
    (dict(epsilon=1.0, mechanism="gaussian", delta=0.0), ValueError, "delta"),
    (dict(epsilon=1.0, mechanism="gaussian", delta=1.0), ValueError, "delta"),
    (dict(epsilon=1.0, mechanism="laplace", delta=1e-5), ValueError, "pure ε-DP"),
    (dict(epsilon=1.0, mechanism="exponential"), ValueError, "mechanism"),
    (dict(epsilon=1.0, ridge=-1.0), ValueError, "ridge"),
    (dict(epsilon=1.0, quadratic_weight=0.0), ValueError, "quadratic_weight"),
    (dict(epsilon=1.0, nonnegative=True), ValueError, "nonnegative applies"),
])
def test_bad_arguments(kwargs, error, match):
    kwargs.setdefault("mechanism", "laplace")
    with pytest.raises(error, match=match):
        FunctionalHead(None, 3, **kwargs)


def test_bad_classes_and_features_argument():
    with pytest.raises(ValueError, match="num_classes"):
        FunctionalHead(None, 1, mechanism="laplace", epsilon=1.0)
    with pytest.raises(TypeError, match="public_features"):
        FunctionalHead(keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)]), 3, mechanism="laplace",
                       epsilon=1.0)
    with pytest.raises(ValueError, match="bounds"):  # Laplace needs features bounded in [0, 1] by construction
        FunctionalHead(tiny_extractor(bounds=(-math.inf, math.inf)), 3, mechanism="laplace", epsilon=1.0)


def _unreleased(head):
    assert not head.released and head.ledger.epsilon_provable() in (0.0, 0)


@pytest.mark.parametrize("x, y, match", [
    (np.full((4, 2), 1.5), [0, 1, 2, 0], r"\[0, 1\].*never clipped"),
    (np.full((4, 2), -0.5), [0, 1, 2, 0], r"\[0, 1\].*never clipped"),
    (np.full((4, 2), np.nan), [0, 1, 2, 0], "NaN"),
    (np.full((4, 2), 0.5), [0, 1, 2, 3], "outside"),
    (np.full((4, 2), 0.5), [0, 1, 2], "records"),
    (np.full((4, 2), 0.5), np.eye(3)[[0, 1, 2, 0]] * 2, "one-hot"),
])
def test_bad_data_refused_before_release(x, y, match):
    head = FunctionalHead(None, 3, mechanism="laplace", epsilon=1.0)
    with pytest.raises(ValueError, match=match):
        head.fit(x, y)
    _unreleased(head)


def test_nonnegative_promise_checked():
    head = FunctionalHead(None, 3, mechanism="gaussian", epsilon=1.0, delta=1e-5, nonnegative=True)
    with pytest.raises(ValueError, match="nonnegative=True"):
        head.fit(np.array([[0.5, -0.1], [0.2, 0.3]]), [0, 1])
    _unreleased(head)
    # the Gaussian mode clips by design: large features are fine there
    FunctionalHead(None, 3, mechanism="gaussian", epsilon=1.0, delta=1e-5).fit(np.full((4, 2), 7.0), [0, 1, 2, 0])


def test_extractor_changed_before_or_after_the_release():
    x, labels = blobs()
    x6 = np.pad(x, ((0, 0), (0, 2))).astype(np.float32)
    feats = tiny_extractor()
    feats.model.layers[-1].kernel.assign_add(tf.ones_like(feats.model.layers[-1].kernel))  # after provenance
    head = FunctionalHead(feats, 3, mechanism="laplace", epsilon=1.0)
    with pytest.raises(ValueError, match="weights changed after its provenance"):
        head.fit(x6, labels)
    assert not head.released
    feats = tiny_extractor()
    head = FunctionalHead(feats, 3, mechanism="laplace", epsilon=1.0)
    head.fit(x6, labels)
    feats.model.layers[-1].bias.assign_add(tf.ones_like(feats.model.layers[-1].bias))  # after the release
    with pytest.raises(ValueError, match="weights changed"):
        head.predict(x6)
    with pytest.raises(ValueError, match="weights changed"):
        head.to_keras()
    # the model built at release time holds its own copy: unaffected
    assert head.model.get_layer(index=1).get_weights()[1].sum() == pytest.approx(0.0)


def test_private_records_shared_with_the_public_ones_refused():
    x, labels = blobs()
    x6 = np.pad(x, ((0, 0), (0, 2))).astype(np.float32)
    head = FunctionalHead(tiny_extractor(trained_on=x6[:50]), 3, mechanism="laplace", epsilon=1.0)
    with pytest.raises(ValueError, match="shares 50 record"):
        head.fit(x6, labels)
    assert not head.released
    FunctionalHead(tiny_extractor(trained_on=x6[:50]), 3, mechanism="laplace", epsilon=1.0).fit(x6[50:], labels[50:])


class BatchCentre(keras.layers.Layer):
    def call(self, x):
        return tf.sigmoid(x - tf.reduce_mean(x, axis=0))


def test_batch_dependent_features_refused():
    model = keras.Sequential([keras.Input((3,)), BatchCentre()])
    feats = FeatureExtractor(model, name="batchy", provenance="test", bounds=(0, 1))
    head = FunctionalHead(feats, 2, mechanism="laplace", epsilon=1.0)
    with pytest.raises(ValueError, match="other records of its batch"):
        head.fit(np.random.default_rng(0).uniform(0, 1, (10, 3)), np.arange(10) % 2)
    assert not head.released
