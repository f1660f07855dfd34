"""Tests for tfdpmech.mechanisms.adlm.allocation: per-feature budget ratios β (AdLM Eq. 16, with max(R̄_j, floor) for |R̄_j|)."""

from __future__ import annotations

import numpy as np
import pytest

from tfdpmech.mechanisms.adlm.allocation import (
    BudgetAllocation,
    RelevanceAllocation,
    UniformAllocation,
    get_allocation,
)


def _assert_valid(beta, feature_shape):
    d = int(np.prod(feature_shape))
    assert beta.shape == tuple(feature_shape)
    assert beta.dtype == np.float64
    assert np.all(beta > 0)  # no β = 0, i.e. no feature with infinite noise
    assert abs(beta.sum() - d) < 1e-9 * d  # Σβ = d, so Σ ε_j = d·ε2 (Lemma 4)


# ------------------------------------------------------------------------------------------------
# ILM: uniform
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(5,), (28, 28), (4, 4, 3)])
def test_uniform_is_all_ones(shape):
    beta = UniformAllocation().ratios(shape)
    _assert_valid(beta, shape)
    np.testing.assert_array_equal(beta, 1.0)
    assert UniformAllocation.name == "uniform" and not UniformAllocation.needs_relevance


# ------------------------------------------------------------------------------------------------
# AdLM: relevance
# ------------------------------------------------------------------------------------------------


def test_relevance_hand_computed():
    beta = RelevanceAllocation([1.0, 2.0, 3.0, 4.0]).ratios((4,))
    # β = d r / Σ r = 4 r / 10
    np.testing.assert_allclose(beta, [0.4, 0.8, 1.2, 1.6], rtol=1e-12)
    _assert_valid(beta, (4,))
    assert RelevanceAllocation.name == "relevance" and RelevanceAllocation.needs_relevance


@pytest.mark.parametrize("shape", [(7,), (6, 5), (3, 4, 2)])
def test_relevance_sums_to_d_and_is_proportional(shape):
    rng = np.random.default_rng(sum(shape))
    relevance = rng.random(shape) + 0.01
    beta = RelevanceAllocation(relevance).ratios(shape)
    _assert_valid(beta, shape)
    ratio = beta / relevance
    np.testing.assert_allclose(ratio, ratio.flat[0], rtol=1e-12)  # more relevance, more budget


def test_ilm_iff_all_ones():
    # a constant relevance (any value, any sign after flooring) gives ILM exactly
    for constant in (0.3, 5.0, -2.0, 0.0):
        beta = RelevanceAllocation(np.full((3, 3), constant)).ratios((3, 3))
        np.testing.assert_allclose(beta, 1.0, rtol=1e-12)
    # and a non-constant relevance does not
    beta = RelevanceAllocation([0.2, 0.2, 0.3]).ratios((3,))
    assert not np.allclose(beta, 1.0)
    _assert_valid(beta, (3,))
    # β ≡ 1 only for uniform allocation among the two resolvable strategies
    assert np.all(get_allocation("uniform").ratios((2, 2)) == 1.0)


def test_relevance_floor_default():
    relevance = np.array([-1.0, 0.0, 1.0, 3.0])
    beta = RelevanceAllocation(relevance).ratios((4,))
    # r = max(R̄, 1e-5) = [1e-5, 1e-5, 1, 3]; β = 4 r / 4.00002
    r = np.array([1e-5, 1e-5, 1.0, 3.0])
    np.testing.assert_allclose(beta, 4 * r / 4.00002, rtol=1e-12)
    np.testing.assert_allclose(beta, [9.99995e-6, 9.99995e-6, 0.99999500, 2.99998500], rtol=1e-6)
    _assert_valid(beta, (4,))
    # negative relevance gets the smallest budget, never more than zero relevance (Eq. 16's |R̄_j| would
    # give a strongly negative noisy relevance a large budget)
    assert beta[0] == beta[1] < beta[2]


def test_relevance_custom_floor():
    beta = RelevanceAllocation([-1.0, 0.0, 1.0, 3.0], floor=0.5).ratios((4,))
    np.testing.assert_allclose(beta, [0.4, 0.4, 0.8, 2.4], rtol=1e-12)  # 4·[0.5, 0.5, 1, 3] / 5
    _assert_valid(beta, (4,))


def test_relevance_abs_mode_follows_the_paper():
    beta = RelevanceAllocation([-1.0, 0.0, 1.0, 3.0], mode="abs").ratios((4,))
    # r = max(|R̄|, 1e-5) = [1, 1e-5, 1, 3]; β = 4 r / 5.00001
    np.testing.assert_allclose(beta, 4 * np.array([1.0, 1e-5, 1.0, 3.0]) / 5.00001, rtol=1e-12)
    _assert_valid(beta, (4,))
    assert beta[0] == beta[2]  # |−1| = |1|: the paper's form favours strongly negative relevance
    beta_floor = RelevanceAllocation([-1.0, 0.0, 1.0, 3.0], mode="floor").ratios((4,))
    assert beta[0] > 1000 * beta_floor[0]


def test_all_negative_relevance_falls_back_to_uniform():
    beta = RelevanceAllocation(-np.arange(1.0, 7.0).reshape(2, 3)).ratios((2, 3))
    np.testing.assert_allclose(beta, 1.0, rtol=1e-12)


def test_relevance_allocation_does_not_modify_its_input():
    relevance = np.array([-1.0, 0.0, 2.0])
    RelevanceAllocation(relevance, mode="abs").ratios((3,))
    np.testing.assert_array_equal(relevance, [-1.0, 0.0, 2.0])


def test_relevance_accepted_shapes():
    rng = np.random.default_rng(0)
    rel = rng.random((4, 3)) + 0.1
    expected = RelevanceAllocation(rel).ratios((4, 3))
    # a flat vector of d entries (row-major), or extra axes of length 1
    np.testing.assert_allclose(RelevanceAllocation(rel.ravel()).ratios((4, 3)), expected)
    np.testing.assert_allclose(RelevanceAllocation(rel).ratios((4, 3, 1)), expected[..., None])
    np.testing.assert_allclose(RelevanceAllocation(rel[..., None]).ratios((4, 3)), expected)


@pytest.mark.parametrize(
    "relevance_shape, feature_shape",
    [((3,), (2, 2)), ((5,), (4,)), ((2, 2), (4, 4)), ((3, 2), (2, 3)), ((4, 3), (12,)), ((2, 3, 2), (2, 2, 3))],
)
def test_relevance_of_the_wrong_shape_raises(relevance_shape, feature_shape):
    alloc = RelevanceAllocation(np.ones(relevance_shape))
    with pytest.raises(ValueError, match=r"relevance has shape .* but the inputs have feature shape"):
        alloc.ratios(feature_shape)


def test_relevance_allocation_constructor_errors():
    with pytest.raises(ValueError, match="relevance contains 1 NaN"):
        RelevanceAllocation([1.0, np.nan])
    with pytest.raises(ValueError, match="relevance contains 1 NaN or infinite"):
        RelevanceAllocation([1.0, np.inf])
    with pytest.raises(ValueError, match="relevance is empty"):
        RelevanceAllocation(np.zeros(0))
    with pytest.raises(TypeError, match="relevance must be a numeric array"):
        RelevanceAllocation(["a", "b"])
    for floor in (0.0, -1e-5):
        with pytest.raises(ValueError, match="floor must be > 0"):
            RelevanceAllocation([1.0, 2.0], floor=floor)
    with pytest.raises(ValueError, match=r"mode must be one of \['floor', 'abs'\], got 'square'"):
        RelevanceAllocation([1.0, 2.0], mode="square")


# ------------------------------------------------------------------------------------------------
# get_allocation
# ------------------------------------------------------------------------------------------------


def test_get_allocation_resolves_names_and_instances():
    assert isinstance(get_allocation("uniform"), UniformAllocation)
    alloc = get_allocation("relevance", [1.0, 3.0], floor=0.1, mode="abs")
    assert isinstance(alloc, RelevanceAllocation)
    assert alloc.floor == 0.1 and alloc.mode == "abs"
    np.testing.assert_allclose(alloc.ratios((2,)), [0.5, 1.5])
    custom = UniformAllocation()
    assert get_allocation(custom) is custom


def test_get_allocation_errors():
    with pytest.raises(ValueError, match=r"allocation must be one of \['uniform', 'relevance'\], got 'regions'"):
        get_allocation("regions")
    with pytest.raises(ValueError, match=r"allocation must be one of"):
        get_allocation(None)
    with pytest.raises(ValueError, match=r"allocation='relevance' needs the private relevance; call fit_relevance"):
        get_allocation("relevance")
    with pytest.raises(ValueError, match="floor must be > 0"):
        get_allocation("relevance", [1.0], floor=0.0)


def test_custom_strategy_subclass_is_checked():
    class Broken(BudgetAllocation):
        name = "broken"

        def ratios(self, feature_shape):
            return self._check_sum(np.zeros(feature_shape))

    class Halves(BudgetAllocation):
        name = "halves"

        def ratios(self, feature_shape):
            return self._check_sum(np.full(feature_shape, 0.5))

    with pytest.raises(AssertionError, match="budget ratios must be > 0 and sum to d=4"):
        Broken().ratios((4,))
    with pytest.raises(AssertionError, match="sum to d=4, got sum 2.0"):
        Halves().ratios((4,))
    with pytest.raises(TypeError):
        BudgetAllocation()  # abstract
