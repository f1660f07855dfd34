"""AFRRS in the reference mode: the AdLM authors' code path with AFRRS's region budgets.

AFRRS (Wang et al.) has no public code. Its paper reuses AdLM's pipeline, proofs and MNIST setup
(§5.1–5.2: a LeNet-5 relevance model on 32×32 inputs of which the central 28×28 are perturbed),
so the reference mode runs the AdLM authors' public MNIST code path
(:class:`~tfdpmech.mechanisms.adlm.reference.AdLMReference`: one Laplace map per step shared by
the batch, clipped to ±10, batch norm with batch statistics, summed Taylor loss with clean labels
and a once-drawn weight-space noise term) and replaces only the budget ratios:

1. relevance ``R_j(D)``: mean LRP over the private records (Eq. 9) on the 32×32 grid, cropped to
   the 28×28 features the noise perturbs;
2. standardised ``(R_j − ξ)/(τ − ξ)`` over those d = 784 features (after Eq. 9), then
   ``+ Lap(2d/(|D|·ε1))`` (Eqs. 10–11) — in the paper's order, before the noise;
3. region segmentation (Algorithm 1) and ``β_j = α_k`` (Eqs. 14–15).

Ledger: the paper's ε (Theorem 4) as claimed, none proven — the labels are used without noise at
every step and the input noise is shared by the batch.
"""

from __future__ import annotations

import numpy as np

from ...accounting.ledger import Release
from ...contract import release
from ...noise import laplace
from ...released_data import array_fingerprint
from ...validation import check_positive_int, check_unit_interval
from ..adlm.reference import CODE_PATH, REFERENCE_REASON, AdLMReference
from ..adlm.reference_steps import averaged_relevance, inner_crop, pad_to_grid, to_code_range
from .allocation import DEFAULT_GAMMA, RegionAllocation, _check_gamma, global_minmax

__all__ = ["AFRRSReference"]


class AFRRSReference(AdLMReference):
    """AFRRS on the AdLM authors' code path (the reference mode); ledger: claimed, none proven.

    Args:
        eps1, eps2, eps3, batch_size: budgets and L (the paper reports none of the split; AdLM's
            code uses 1 : 1 : 2, e.g. 0.15, 0.15, 0.30 for the paper's ε = 0.6).
        gamma: the merge threshold γ (not reported in the paper).
        n_regions: optional alternative stopping rule (not in the paper).
        **kwargs: as for :class:`~tfdpmech.mechanisms.adlm.reference.AdLMReference`.
    """

    name = "afrrs"
    paper = "Wang et al., AFRRS, on the AdLM authors' code path (AFRRS has no public code)"

    def __init__(self, eps1, eps2, eps3, batch_size, *, gamma: float = DEFAULT_GAMMA, n_regions=None, **kwargs):
        if "allocation" in kwargs:
            raise TypeError("AFRRSReference sets its own allocation (region budgets); do not pass allocation")
        gamma = _check_gamma(gamma)
        if n_regions is not None:
            n_regions = check_positive_int(n_regions, "n_regions")
        super().__init__(eps1, eps2, eps3, batch_size, allocation="relevance", **kwargs)
        self.gamma = gamma
        self.n_regions = n_regions
        self.region_allocation: RegionAllocation | None = None

    def _allocation_name(self) -> str:
        return "regions"

    def fit_relevance(self, relevance_model, x_private01, *, samples: int | None = None,
                      start: str = "all_logits") -> np.ndarray:
        """Private relevance, segmentation and region ratios; returns the 28×28 β (spends ε1).

        Args:
            relevance_model: a model on 32×32 inputs in [−1, 1], trained on public data.
            x_private01: the private training images in [0, 1], shape (n, 28, 28, 1).
            samples: records LRP averages over (default: all, as Eq. 9 states).
            start: LRP seed (as the AdLM code: all outputs).
        """
        x = check_unit_interval(x_private01, "x_private")
        n = len(x)
        samples = n if samples is None else int(samples)
        avg = inner_crop(averaged_relevance(relevance_model, pad_to_grid(to_code_range(x)), samples=samples,
                                            rng=self._rng, start=start))  # Eq. 9; §5.2: the central 28×28 of the 32×32 map
        d = avg.size
        scale = 2.0 * d / (n * self.eps1)  # Eq. 11: Δ_R = 2d/|D|
        noise = laplace(scale, avg.shape, self._rng)
        self.relevance = global_minmax(avg) + noise  # standardised, then Eq. 10
        self.region_allocation = RegionAllocation(self.relevance, self.gamma, n_regions=self.n_regions)
        self.beta = self.region_allocation.ratios(avg.shape + (1,))[..., 0]
        self.relevance_details = {"n": n, "samples": min(samples, n), "d": d, "noise_scale": scale,
                                  "noise_fingerprint": array_fingerprint(noise),
                                  **self.region_allocation.summary()}
        release(self.ledger, Release(
            component="relevance", mechanism="laplace", epsilon_claimed=self.eps1, epsilon_provable=None,
            neighbours="replace_one", protects="record",
            basis=(f"none proven (AFRRS has no public code; {CODE_PATH} with AFRRS's allocation): "
                   f"{REFERENCE_REASON}; in this step the min-max standardisation uses the data's min and max "
                   "before the noise, which the 2d/|D| bound does not cover"),
            sensitivity=2.0 * d / n, noise_scale=scale, reproduction=True,
            details={"n": n, "d": d, "noise_fingerprint": array_fingerprint(noise)},
        ))
        return self.beta
