"""The proven output perturbation: Chaudhuri et al.'s sensitivity by brute force, the Gamma noise, the ledger."""

import math

import numpy as np
import pytest
from scipy import stats

from tfdpmech.accounting.gaussian import gaussian_sigma
from tfdpmech.mechanisms.output_perturbation import OutputPerturbationHead, erm_sensitivity
from tfdpmech.mechanisms.functional_head.feature_map import feature_map
from tfdpmech.mechanisms.output_perturbation.head import gamma_noise, logistic_objective, solve_logistic

TIGHT = 1e-12  # gradient norm for the brute-force checks: ‖ŵ − w*‖ <= 1e-12/λ


def _ball(rng, n, d):
    """Records in the unit ball (some on the sphere, some inside)."""
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True) * rng.uniform(0.3, 1.0, size=(n, 1))


def _signs(labels, k):
    return np.where(labels[:, None] == np.arange(k)[None, :], 1.0, -1.0)


def test_replacing_one_record_moves_every_class_by_at_most_2_over_n_lambda():
    rng = np.random.default_rng(0)
    n, d, k, l2 = 25, 3, 3, 0.1
    bound = 2.0 / (n * l2)
    worst = 0.0
    for _ in range(60):
        x, labels = _ball(rng, n, d), rng.integers(0, k, n)
        w, _ = solve_logistic(x, _signs(labels, k), l2, TIGHT)
        for _ in range(5):
            i = rng.integers(n)
            x2, labels2 = x.copy(), labels.copy()
            x2[i], labels2[i] = _ball(rng, 1, d)[0], rng.integers(k)
            w2, _ = solve_logistic(x2, _signs(labels2, k), l2, TIGHT)
            moved = np.linalg.norm(w - w2, axis=0)
            assert moved.max() <= bound * (1 + 1e-9) + 2 * TIGHT / l2
            worst = max(worst, moved.max() / bound)
    assert 0.2 < worst <= 1.0  # random neighbours stay well inside the bound


def test_a_constructed_worst_case_comes_close_to_the_bound():
    # n − 1 records push w far along e1; the replaced record is misclassified before (u) and after (u'),
    # with u − u' = 2 sinθ e2: its loss gradient changes by almost 2 sinθ/n, all of it in the flat e2 direction
    n, l2, theta = 2000, 5e-4, math.radians(60)
    x = np.tile([1.0, 0.0], (n, 1))
    x[0] = [-math.cos(theta), math.sin(theta)]
    x2 = x.copy()
    x2[0] = [-math.cos(theta), -math.sin(theta)]
    y = np.ones((n, 1))
    w, _ = solve_logistic(x, y, l2, TIGHT)
    w2, _ = solve_logistic(x2, y, l2, TIGHT)
    ratio = np.linalg.norm(w - w2) / (2.0 / (n * l2))
    assert 0.7 < ratio <= 1.0


def test_the_solver_reaches_its_tolerance_at_the_minimiser():
    rng = np.random.default_rng(1)
    x, labels = _ball(rng, 400, 6), rng.integers(0, 4, 400)
    signs = _signs(labels, 4)
    w, norms = solve_logistic(x, signs, 1e-3, 1e-11)
    assert norms.shape == (4,) and norms.max() <= 1e-11
    value = logistic_objective(w, x, signs, 1e-3)[0]
    for _ in range(20):  # no nearby point is lower (strong convexity: w is the minimiser)
        assert logistic_objective(w + 1e-4 * rng.normal(size=w.shape), x, signs, 1e-3)[0] > value
    with pytest.raises(RuntimeError, match="gradient norms up to .* > tolerance .* nothing was released"):
        solve_logistic(x, signs, 1e-3, 1e-30, max_newton=0)


def test_gamma_noise_norm_is_gamma_and_direction_uniform():
    rng = np.random.default_rng(2023)
    draws = np.stack([gamma_noise(5, 0.3, rng) for _ in range(4000)])
    norms = np.linalg.norm(draws, axis=1)
    assert stats.kstest(norms, stats.gamma(a=5, scale=0.3).cdf).pvalue > 0.01
    assert stats.kstest(norms, stats.gamma(a=4, scale=0.3).cdf).pvalue < 1e-6  # the test can tell them apart
    directions = draws / norms[:, None]
    # a uniform direction in 5 dimensions: each coordinate is Beta(2, 2) on [−1, 1]
    assert stats.kstest((directions[:, 0] + 1) / 2, stats.beta(2, 2).cdf).pvalue > 0.01
    assert np.abs(directions.mean(axis=0)).max() < 0.03


def _data(n=600, d=8, k=3, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d))
    labels = rng.integers(0, k, n)
    x = centres[labels] + 0.3 * rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True), labels


def test_gaussian_release_is_one_k_fold_composed_event_at_the_target():
    dp_accounting = pytest.importorskip("dp_accounting")
    x, labels = _data()
    head = OutputPerturbationHead(None, 3, epsilon=1.0, delta=1e-5, l2=0.05, seed=0)
    head.fit(x, labels)
    (release,) = head.ledger.releases
    sens = erm_sensitivity(600, 0.05, 1e-6 / 600)
    assert release.sensitivity == pytest.approx(sens) and sens == pytest.approx(2 / (600 * 0.05) * (1 + 1e-6))
    assert release.noise_scale == pytest.approx(gaussian_sigma(math.sqrt(3) * sens, 1.0, 1e-5))
    assert release.event == dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(release.noise_scale / sens), 3)
    assert (release.neighbours, release.protects) == ("replace_one", "record")
    assert head.ledger.epsilon_provable() == pytest.approx(1.0, rel=1e-4) and head.ledger.delta() == 1e-5
    assert head.ledger.epsilon_provable() <= 1.0 + 1e-9
    assert release.details["max_gradient_norm"] <= 1e-6 / 600
    # at this ε and n the noise is small next to the weights: the head still classifies
    logits = np.asarray(head.model(x.astype(np.float32)))
    assert np.mean(np.argmax(logits, 1) == labels) > 0.8


def test_gamma_release_is_k_pure_releases_adding_up_to_epsilon():
    x, labels = _data()
    head = OutputPerturbationHead(None, 3, epsilon=2.0, mechanism="gamma", l2=0.05, seed=1)
    head.fit(x, labels)
    assert len(head.ledger) == 3 and all(r.delta == 0 and r.epsilon_provable == pytest.approx(2 / 3)
                                         for r in head.ledger.releases)
    assert head.ledger.epsilon_provable() == pytest.approx(2.0) and head.ledger.delta() == 0.0
    assert head.noise_scale == pytest.approx(erm_sensitivity(600, 0.05, 1e-6 / 600) / (2 / 3))


def test_noise_is_drawn_once_seeded_and_the_weights_are_released_once():
    x, labels = _data()
    a = OutputPerturbationHead(None, 3, epsilon=1.0, delta=1e-5, seed=7)
    a.fit(x, labels)
    b = OutputPerturbationHead(None, 3, epsilon=1.0, delta=1e-5, seed=7)
    b.fit(x, labels)
    c = OutputPerturbationHead(None, 3, epsilon=1.0, delta=1e-5, seed=8)
    c.fit(x, labels)
    np.testing.assert_array_equal(a.kernel, b.kernel)
    assert not np.allclose(a.kernel, c.kernel)
    with pytest.raises(ValueError, match="already released once"):
        a.fit(x, labels)


def test_with_an_extractor_the_inputs_are_mapped_to_the_unit_sphere():
    from tfdpmech.features import random_features

    feats = random_features((4,), units=16, gamma=0.5, seed=0)
    rng = np.random.default_rng(3)
    x, labels = rng.uniform(size=(300, 4)).astype(np.float32), rng.integers(0, 2, 300)
    head = OutputPerturbationHead(feats, 2, epsilon=1.0, delta=1e-5, seed=0)
    head.fit(x, labels)
    assert head.ledger.releases[0].epsilon_provable == 0.0 and head.ledger.releases[0].component.startswith("features")
    q = feature_map(feats(x), clip_norm=True)
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0)
    np.testing.assert_allclose(np.asarray(head.model(x)), q @ head.kernel, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kwargs, fit, error, message", [
    ({}, {"x": np.full((5, 3), 0.7)}, ValueError, r"x: record 0 has L2 norm 1.21244 > 1.*unit ball.*nothing was"),
    ({"l2": 0.0}, {}, ValueError, r"l2 must be finite and > 0, got 0.0; the regulariser"),
    ({"l2": -1.0}, {}, ValueError, r"l2 must be finite and > 0"),
    ({"l2": float("inf")}, {}, ValueError, r"l2 must be finite and > 0, got inf"),
    ({"epsilon": 0.0}, {}, ValueError, "epsilon"),
    ({"delta": None}, {}, ValueError, r"mechanism='gaussian' needs delta"),
    ({"mechanism": "gamma"}, {}, ValueError, r"delta=1e-05 applies to mechanism='gaussian' only"),
    ({"mechanism": "laplace"}, {}, ValueError, "mechanism"),
    ({"tolerance": 0.0}, {}, ValueError, "tolerance must be finite and > 0"),
    ({"features": "resnet"}, {}, TypeError, "features must be a tfdpmech.features.FeatureExtractor or None"),
    ({}, {"y": np.array([0, 1, 2, 5, 1])}, ValueError, r"y has labels in \[0, 5\], outside \[0, 2\]"),
    ({}, {"y": np.array([0, 1])}, ValueError, "x has 5 records but y has 2"),
    ({}, {"x": np.array([[np.nan, 0, 0]] * 5)}, ValueError, "NaN"),
])
def test_bad_input_is_refused_naming_the_argument_before_any_noise(kwargs, fit, error, message):
    args = {"features": None, "epsilon": 1.0, "delta": 1e-5, **kwargs}
    features = args.pop("features")
    data = {"x": np.full((5, 3), 0.5), "y": np.array([0, 1, 2, 0, 1]), **fit}
    with pytest.raises(error, match=message):
        head = OutputPerturbationHead(features, 3, **args)
        state = head._rng.bit_generator.state
        try:
            head.fit(**data)
        finally:
            assert head._rng.bit_generator.state == state and not head.released  # nothing drawn, nothing released
