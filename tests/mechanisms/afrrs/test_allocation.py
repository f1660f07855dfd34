"""AFRRS Algorithm 1 (scipy average linkage vs the literal loop) and region budgets (Eqs. 14–15)."""

import numpy as np
import pytest

from tfdpmech.mechanisms.adlm.allocation import RelevanceAllocation, UniformAllocation
from tfdpmech.mechanisms.afrrs import RegionAllocation, global_minmax, region_budgets, segment_regions


def naive_algorithm_1(r, gamma):
    """Algorithm 1 literally: merge the closest clusters (average linkage) while min distance < γ."""
    clusters = [[j] for j in range(len(r))]

    def dist(a, b):
        return np.mean([abs(r[i] - r[j]) for i in a for j in b])

    while len(clusters) > 1:
        best, pair = np.inf, None
        for i in range(len(clusters)):
            for j in range(i + 1, len(clusters)):
                dd = dist(clusters[i], clusters[j])
                if dd < best:
                    best, pair = dd, (i, j)
        if not best < gamma:
            break
        i, j = pair
        clusters[i] = clusters[i] + clusters[j]
        del clusters[j]
    return sorted(sorted(c) for c in clusters)


def as_partition(labels):
    return sorted(sorted(np.flatnonzero(labels == k).tolist()) for k in np.unique(labels))


@pytest.mark.parametrize("gamma", [0.02, 0.08, 0.2, 0.5])
def test_scipy_average_linkage_equals_the_papers_loop(gamma):
    r = np.random.default_rng(int(gamma * 100)).random(30)
    assert as_partition(segment_regions(r, gamma)) == naive_algorithm_1(r, gamma)


def test_strict_threshold():
    r = np.array([0.0, 0.1, 1.0])
    assert len(np.unique(segment_regions(r, 0.1))) == 3  # distance 0.1 is not < 0.1
    assert len(np.unique(segment_regions(r, 0.1 + 1e-9))) == 2


def test_labels_ordered_by_region_relevance():
    r = np.array([0.9, 0.1, 0.92, 0.12, 0.5])
    labels = segment_regions(r, 0.05)
    assert labels.tolist() == [2, 0, 2, 0, 1]


@pytest.mark.parametrize("gamma", [0.0, 0.05, 0.15, 0.3, np.inf])
def test_region_budgets_keep_sum_c_k_alpha_k_equal_d(gamma):
    r = np.random.default_rng(1).random(784)
    alloc = RegionAllocation(r, gamma)
    assert np.sum(alloc.sizes_ * alloc.alpha_) == pytest.approx(784)
    beta = alloc.ratios((28, 28, 1))
    assert beta.sum() == pytest.approx(784) and beta.shape == (28, 28, 1)
    assert alloc.sizes_.sum() == 784


def test_alpha_follows_eq_14():
    r = np.array([0.2, 0.2, 0.8, 0.8, 0.8, 0.5])
    means, sizes, alpha = region_budgets(r, np.array([0, 0, 2, 2, 2, 1]))
    np.testing.assert_allclose(means, [0.2, 0.5, 0.8])
    mu = sizes / 6
    np.testing.assert_allclose(alpha, np.abs(means) / np.sum(mu * np.abs(means)))


def test_zero_region_floored_before_normalising():
    r = np.array([0.0, 0.0, 1.0, 1.0])
    means, sizes, alpha = region_budgets(r, np.array([0, 0, 1, 1]), floor=1e-5)
    assert alpha[0] > 0
    assert np.sum(sizes * alpha) == pytest.approx(4)
    _, _, alpha = region_budgets(np.zeros(4), np.array([0, 0, 1, 1]))
    np.testing.assert_allclose(alpha, 1.0)  # all at the floor: uniform


def test_gamma_zero_is_adlm_and_gamma_inf_is_ilm():
    r = np.random.default_rng(2).normal(0.5, 0.3, (28, 28, 1))
    np.testing.assert_allclose(RegionAllocation(r, 0.0).ratios(r.shape),
                               RelevanceAllocation(r, mode="abs").ratios(r.shape))
    np.testing.assert_allclose(RegionAllocation(r, np.inf).ratios(r.shape), UniformAllocation().ratios(r.shape))


def test_bad_arguments():
    with pytest.raises(TypeError, match="gamma"):
        RegionAllocation(np.ones(4), gamma="big")
    with pytest.raises(ValueError, match="gamma"):
        RegionAllocation(np.ones(4), gamma=float("nan"))
    assert RegionAllocation(np.arange(4.0), gamma=10**400).n_regions_ == 1  # huge: everything merges
    with pytest.raises(ValueError, match="relevance has shape"):
        RegionAllocation(np.random.default_rng(0).random(6).reshape(3, 2), 0.1).ratios((2, 3))
    with pytest.raises(ValueError, match="constant"):
        global_minmax(np.ones(5))


def test_global_minmax():
    np.testing.assert_allclose(global_minmax([2.0, 4.0, 3.0]), [0.0, 1.0, 0.5])


