"""Sensitivities of the functional head: brute-force worst cases on small dimensions vs the formulas."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tfdpmech.mechanisms.functional_head.sensitivity import gaussian_sensitivity, laplace_sensitivity, num_released


def released(p, label, num_classes, lam=1.0):
    """The released vector (vec S1, λ·triu S2) of one record."""
    u = 0.5 - np.eye(num_classes)[label]
    return np.concatenate([np.outer(p, u).ravel(), lam * np.outer(p, p)[np.triu_indices(len(p))]])


def brute_force_l1(num_features, num_classes, lam, grid):
    """max ‖v(p, y) − v(p', y')‖₁ over features on ``grid`` (bias 1 appended), y = 0, y' ∈ {0, 1}."""
    best = 0.0
    points = [np.array(a + (1.0,)) for a in itertools.product(grid, repeat=num_features)]
    for pa in points:
        va = released(pa, 0, num_classes, lam)
        for pb in points:
            for label in (0, 1):
                best = max(best, np.abs(va - released(pb, label, num_classes, lam)).sum())
    return best


@pytest.mark.parametrize("num_classes", [2, 3, 5])
@pytest.mark.parametrize("num_features", [1, 3])
@pytest.mark.parametrize("lam", [1.0, 0.3])
def test_laplace_formula_bounds_and_attains_the_worst_case(num_features, num_classes, lam):
    worst = brute_force_l1(num_features, num_classes, lam, np.linspace(0.0, 1.0, 3))
    formula = laplace_sensitivity(num_features, num_classes, quadratic_weight=lam)
    assert worst <= formula + 1e-9
    if num_classes >= 4:  # exact: attained by p = 1, p' = 0 on the real features, different labels
        assert worst == pytest.approx(formula)
    else:  # an upper bound, but not a loose one
        assert formula <= 1.5 * worst


def test_laplace_formula_values():
    # d' = 25 sigmoid units, C = 10: 2 + 25·13/2 + 625/2 = 477 (λ = 1)
    assert laplace_sensitivity(25, 10) == pytest.approx(477.0)
    assert laplace_sensitivity(25, 10, quadratic_weight=0.3) == pytest.approx(2 + 125 + 0.3 * 350)
    assert num_released(25, 10) == 26 * 10 + 26 * 27 // 2


def test_laplace_worst_case_not_beaten_by_random_interior_points():
    rng = np.random.default_rng(0)
    d, c = 4, 5
    formula = laplace_sensitivity(d, c)
    p = np.concatenate([rng.uniform(0, 1, (4000, d)), np.ones((4000, 1))], axis=1)
    q = np.concatenate([rng.uniform(0, 1, (4000, d)), np.ones((4000, 1))], axis=1)
    worst = max(np.abs(released(a, 0, c) - released(b, 1, c)).sum() for a, b in zip(p, q))
    assert worst <= formula


def _unit(z, nonnegative):
    z = np.abs(z) if nonnegative else z
    return z / np.maximum(1.0, np.linalg.norm(z, axis=-1, keepdims=True))


def released_batch(p, labels, num_classes, lam=1.0):
    """``released`` for a batch of records: (N, d·C + d(d+1)/2)."""
    u = 0.5 - np.eye(num_classes)[labels]
    iu = np.triu_indices(p.shape[1])
    s1 = (p[:, :, None] * u[:, None, :]).reshape(len(p), -1)
    s2 = (p[:, :, None] * p[:, None, :])[:, iu[0], iu[1]]
    return np.concatenate([s1, lam * s2], axis=1)


@pytest.mark.parametrize("nonnegative", [False, True])
@pytest.mark.parametrize("num_classes", [2, 3, 10])
@pytest.mark.parametrize("lam", [1.0, 0.5])
def test_gaussian_formula_bounds_random_pairs_and_is_attained(num_classes, nonnegative, lam):
    formula = gaussian_sensitivity(num_classes, nonnegative=nonnegative, quadratic_weight=lam)
    rng = np.random.default_rng(1)
    # random pairs inside the unit ball (several dimensions): never above the formula
    worst = 0.0
    for dim in (2, 3, 5):
        n = 8000
        a = _unit(rng.normal(size=(n, dim)) * rng.uniform(0.2, 3, (n, 1)), nonnegative)
        b = _unit(rng.normal(size=(n, dim)) * rng.uniform(0.2, 3, (n, 1)), nonnegative)
        for label in (0, 1):
            diff = released_batch(a, np.zeros(n, int), num_classes, lam) - released_batch(
                b, np.full(n, label), num_classes, lam)
            worst = max(worst, np.linalg.norm(diff, axis=1).max())
    assert worst <= formula + 1e-9
    # the supremum is attained: p = (α, β), p' = (β, α) (or p' = −p) over a fine grid of angles
    t = np.linspace(0, 2 * np.pi, 40001) if not nonnegative else np.linspace(0, np.pi / 2, 20001)
    p = np.stack([np.cos(t), np.sin(t)], axis=1)
    partners = [p[:, ::-1]] + ([] if nonnegative else [-p])
    attained = 0.0
    for q in partners:
        for label in (0, 1):
            diff = released_batch(p, np.zeros(len(p), int), num_classes, lam) - released_batch(
                q, np.full(len(p), label), num_classes, lam)
            attained = max(attained, np.linalg.norm(diff, axis=1).max())
    assert attained == pytest.approx(formula, rel=1e-6)
    assert formula <= 2 * worst  # random search gets close too: the formula is not loose


def test_gaussian_values_for_ten_classes():
    assert gaussian_sensitivity(10) == pytest.approx(np.sqrt(10))
    assert gaussian_sensitivity(10, nonnegative=True) == pytest.approx(np.sqrt(7))


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_features=0, num_classes=10), "num_features"),
    (dict(num_features=3, num_classes=1), "num_classes"),
    (dict(num_features=3, num_classes=10, quadratic_weight=0.0), "quadratic_weight"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        laplace_sensitivity(**kwargs)
    with pytest.raises(TypeError, match="num_features"):
        laplace_sensitivity(2.5, 3)
