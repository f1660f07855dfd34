"""AFRRS region segmentation and region budgets (Wang et al., §4.2–4.3, Algorithm 1, Eqs. 12–15).

Wang, Xie, Tan, Li, Wang, "Preserving Differential Privacy in Deep Learning Based on Feature
Relevance Region Segmentation". The d input features are clustered on their private relevance
``R*_j`` by agglomerative hierarchical clustering: distance ``|R*_i − R*_j|`` (Eq. 12), average
linkage (the paper's ``dis_avg``), merging while the smallest distance is below γ (Algorithm 1,
line 12). Region k gets the per-feature budget ``ε_k = α_k·ε2`` with
``α_k = |R̄_k| / Σ_k' μ_k'·|R̄_k'|``, ``μ_k = |C_k|/d`` (Eqs. 14–15), so ``Σ_k |C_k|·α_k = d`` and
the features together spend ``d·ε2`` as in AdLM's Lemma 4.

Regions and α are computed from ``R*`` only, so they are post-processing of the ε1 release.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage

from ..adlm.allocation import BudgetAllocation, RelevanceAllocation
from ...validation import check_array, check_positive_int

__all__ = ["RegionAllocation", "global_minmax", "segment_regions", "region_budgets", "DEFAULT_GAMMA"]

DEFAULT_GAMMA = 0.1  # the paper does not report γ; 0.1 on relevance in [0, 1] gives a handful of regions


def global_minmax(r) -> np.ndarray:
    """``(R_j − ξ)/(τ − ξ)`` with τ, ξ the largest and smallest of the d values (§4.1, after Eq. 9).

    Raises:
        ValueError: a constant vector (τ = ξ) or non-finite values.
    """
    r = check_array(r, "relevance", ndim_min=1).astype(np.float64)
    lo, hi = float(r.min()), float(r.max())
    if not hi > lo:
        raise ValueError("relevance is constant, so the min-max normalisation (R - min)/(max - min) is undefined")
    return (r - lo) / (hi - lo)


def _check_gamma(gamma) -> float:
    hint = "gamma <= 0 keeps every feature apart (AdLM), gamma = inf merges all (ILM)"
    if isinstance(gamma, (bool, np.bool_)) or not isinstance(gamma, numbers.Real):
        raise TypeError(f"gamma (the merge threshold) must be a real number, got {gamma!r}; {hint}")
    try:
        value = float(gamma)
    except OverflowError:  # a huge integer: larger than any distance, so everything merges
        value = math.inf if gamma > 0 else -math.inf
    if math.isnan(value):
        raise ValueError(f"gamma (the merge threshold) must not be NaN; {hint}")
    return value


def segment_regions(relevance, gamma: float = DEFAULT_GAMMA, *, n_regions: int | None = None) -> np.ndarray:
    """Algorithm 1: average-linkage clustering of the 1-D relevance values, stopped at γ.

    Uses :func:`scipy.cluster.hierarchy.linkage` (``method="average"``, ``metric="cityblock"``,
    i.e. ``|R_i − R_j|``) and cuts the dendrogram just below γ, because the paper merges while
    ``min R < γ`` (strict) and ``fcluster`` keeps distances ``<= t``. Average linkage is monotone,
    so the cut equals the paper's while-loop. There is no spatial adjacency constraint: a region
    is a level set of relevance and may be spatially disconnected.

    Args:
        relevance: the private relevance, any shape (flattened to d features).
        gamma: the minimum distance threshold γ.
        n_regions: optional alternative stopping rule (``fcluster(criterion="maxclust")``), not in
            the paper.

    Returns:
        int array of d region labels ``0..s−1``, numbered by increasing region mean relevance.
    """
    r = check_array(relevance, "relevance", ndim_min=1).astype(np.float64).ravel()
    gamma = _check_gamma(gamma)
    if r.size == 1:
        return np.zeros(1, dtype=np.int64)
    z = linkage(r.reshape(-1, 1), method="average", metric="cityblock")
    if n_regions is not None:
        n_regions = check_positive_int(n_regions, "n_regions")
        raw = fcluster(z, t=min(n_regions, r.size), criterion="maxclust")
    else:
        raw = fcluster(z, t=np.nextafter(gamma, -np.inf), criterion="distance")
    ids, labels = np.unique(raw, return_inverse=True)
    means = np.bincount(labels, weights=r) / np.bincount(labels)
    order = np.argsort(means, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[labels].astype(np.int64)


def region_budgets(relevance, labels, *, floor: float = 1e-5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Region means ``R̄_k``, sizes ``|C_k|`` and ratios ``α_k`` (Algorithm 2 lines 2–5, Eq. 14).

    ``|R̄_k|`` is floored at ``floor`` **before** the normalisation of Eq. 14 (not in the paper), so
    a region whose mean is about 0 keeps some budget and ``Σ_k |C_k|·α_k = d`` still holds; if
    every region is at the floor the allocation is uniform.

    Returns:
        ``(region_mean, sizes, alpha)``, each of length s.
    """
    r = check_array(relevance, "relevance", ndim_min=1).astype(np.float64).ravel()
    labels = np.asarray(labels).ravel()
    if labels.shape != r.shape or labels.min() < 0:
        raise ValueError(f"labels must give one region id >= 0 per feature ({r.size}), got shape {labels.shape}")
    if not floor > 0:
        raise ValueError(f"floor must be > 0 so every region keeps some budget, got {floor!r}")
    sizes = np.bincount(labels).astype(np.float64)
    if np.any(sizes == 0):
        raise ValueError("region labels must be 0..s-1 with every region non-empty")
    means = np.bincount(labels, weights=r) / sizes  # Alg. 2 line 3
    mag = np.maximum(np.abs(means), floor)  # |R̄_k| (Eq. 14), floored
    alpha = r.size * mag / np.sum(sizes * mag)  # Eq. 14 with μ_k = |C_k|/d
    return means, sizes.astype(np.int64), alpha


class RegionAllocation(BudgetAllocation):
    """AFRRS (Eqs. 14–15): every feature of region ``C_k`` gets ``β_j = α_k``.

    The third strategy next to :class:`~tfdpmech.mechanisms.adlm.allocation.UniformAllocation` (ILM) and
    :class:`~tfdpmech.mechanisms.adlm.allocation.RelevanceAllocation` (AdLM). ``gamma <= 0`` gives one region per
    feature, i.e. AdLM's ratios with ``|R*_j|``; ``gamma = inf`` gives one region, i.e. ILM.

    Args:
        relevance: the private relevance ``R*`` (normalised to [0, 1] after averaging, then noised).
        gamma: the merge threshold γ of Algorithm 1.
        n_regions: alternative stopping rule (not in the paper).
        floor: lower bound on ``|R̄_k|`` (not in the paper; keeps ε_k > 0).

    Attributes:
        labels_: region id of every feature (flat, length d).
        n_regions_: s.
        region_relevance_: ``R̄_k``.
        sizes_: ``|C_k|``.
        alpha_: ``α_k``.
    """

    name = "regions"
    needs_relevance = True

    def __init__(self, relevance, gamma: float = DEFAULT_GAMMA, *, n_regions: int | None = None,
                 floor: float = 1e-5):
        self.relevance = check_array(relevance, "relevance", ndim_min=1).astype(np.float64)
        self.gamma = _check_gamma(gamma)
        self.n_regions = n_regions
        self.floor = float(floor)
        self.labels_ = segment_regions(self.relevance, self.gamma, n_regions=n_regions)
        self.region_relevance_, self.sizes_, self.alpha_ = region_budgets(self.relevance, self.labels_, floor=floor)
        self.n_regions_ = int(len(self.alpha_))

    def ratios(self, feature_shape) -> np.ndarray:
        feature_shape = tuple(int(s) for s in feature_shape)
        # the same shape rules as RelevanceAllocation: exact, flat, or equal up to axes of length 1
        RelevanceAllocation(self.relevance, floor=self.floor).ratios(feature_shape)
        return self._check_sum(self.alpha_[self.labels_].reshape(feature_shape))

    def summary(self) -> dict:
        """s, region sizes, means and α (for reports)."""
        return {"gamma": self.gamma, "n_regions": self.n_regions_, "sizes": self.sizes_.tolist(),
                "region_relevance": self.region_relevance_.tolist(), "alpha": self.alpha_.tolist()}

