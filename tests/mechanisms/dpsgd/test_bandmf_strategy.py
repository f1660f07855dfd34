"""Tests for tfdpmech.mechanisms.dpsgd.noise.banded_strategy: BandMF's banded Toeplitz strategy and its optimiser.

The O(n·b) loss and gradient against dense matrices and finite differences; b = 1 is DP-SGD's n (n + 1) / 2; the
optimised losses against jax-privacy 2.0.0's ``toeplitz.optimize_banded_toeplitz`` (measured once in a separate
environment: ``||A C⁻¹||_F² sens(C)² / (n (n + 1) / 2)`` of its coefficients, normalised to c_0 = 1).
"""

from __future__ import annotations

import numpy as np
import pytest

from tfdpmech.mechanisms.dpsgd.noise import banded_strategy as bs

pytestmark = pytest.mark.dpsgd

# (steps, bands): the loss ratio of jax-privacy 2.0.0's optimised strategy (jax x64, its default 250 L-BFGS steps)
JAX_PRIVACY_RATIOS = {(16, 4): 0.441650, (100, 4): 0.303687, (1000, 8): 0.139360, (1000, 32): 0.048182,
                      (2000, 16): 0.072803, (10000, 16): 0.066086, (10000, 64): 0.019413}


def _dense_loss(c, n):
    C, A = bs.dense_strategy(c, n), np.tril(np.ones((n, n)))
    sens2 = max(np.sum(C[:, t] ** 2) for t in range(n))
    return np.sum((A @ np.linalg.inv(C)) ** 2) * sens2


@pytest.mark.parametrize("c,n", [([1.0, 0.4, 0.2, -0.05], 12), ([1.0, 0.7], 9), ([1.0, 0.5, 0.3], 2)])
def test_loss_equals_dense_matrices(c, n):
    dense = _dense_loss(c, n)
    assert bs.prefix_sum_error(c, n) * bs.sensitivity(c, n) ** 2 == pytest.approx(dense, rel=1e-12)
    assert bs.loss_and_gradient(np.array(c[1:]), n)[0] == pytest.approx(dense / bs.dpsgd_loss(n), rel=1e-12)
    r = bs.inverse_column(c, n)
    np.testing.assert_allclose(r, np.linalg.inv(bs.dense_strategy(c, n))[:, 0], atol=1e-13)


def test_gradient_equals_finite_differences():
    free, n, h = np.array([0.45, 0.25, 0.1, -0.02]), 40, 1e-6
    _, grad = bs.loss_and_gradient(free, n)
    numeric = [(bs.loss_and_gradient(free + h * e, n)[0] - bs.loss_and_gradient(free - h * e, n)[0]) / (2 * h)
               for e in np.eye(len(free))]
    np.testing.assert_allclose(grad, numeric, rtol=1e-6)


@pytest.mark.parametrize("n", [1, 7, 500])
def test_one_band_is_dpsgd(n):
    strategy = bs.banded_strategy(n, 1)
    assert tuple(strategy.coefficients) == (1.0,) and strategy.sensitivity == 1.0
    assert strategy.loss == n * (n + 1) / 2 and strategy.ratio == 1.0


@pytest.mark.parametrize("steps,bands", sorted(JAX_PRIVACY_RATIOS))
def test_optimised_loss_matches_jax_privacy(steps, bands):
    strategy = bs.banded_strategy(steps, bands)
    assert strategy.coefficients[0] == 1.0 and len(strategy.coefficients) == bands
    assert strategy.ratio <= JAX_PRIVACY_RATIOS[steps, bands] * (1 + 1e-5)
    assert strategy.ratio == pytest.approx(JAX_PRIVACY_RATIOS[steps, bands], rel=1e-4)
    # never worse than the truncated square-root factorization it starts from, nor than DP-SGD
    start = bs.sqrt_coefficients(bands)
    assert strategy.loss <= bs.prefix_sum_error(start, steps) * bs.sensitivity(start, steps) ** 2
    assert strategy.ratio < 1.0


def test_more_bands_lower_loss_and_cached():
    ratios = [bs.banded_strategy(600, b).ratio for b in (1, 2, 4, 8, 16)]
    assert all(a > b for a, b in zip(ratios, ratios[1:]))
    hits = bs._optimised.cache_info().hits
    bs.banded_strategy(600, 8)
    assert bs._optimised.cache_info().hits == hits + 1


def test_unstable_strategy_is_infinite_not_nan():
    loss, grad = bs.loss_and_gradient(np.array([3.0]), 5000)  # C⁻¹'s column grows as (−3)^k
    assert loss == float("inf") and np.all(grad == 0)


@pytest.mark.parametrize("steps,bands", [(5, 6), (0, 1), (5, 0)])
def test_bad_sizes(steps, bands):
    with pytest.raises(ValueError, match="1 <= bands <= steps"):
        bs.banded_strategy(steps, bands)
