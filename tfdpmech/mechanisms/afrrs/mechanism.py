"""AFRRS in the per-record private mode: AdLM's Algorithm 1 with region budgets.

Wang, Xie, Tan, Li, Wang, "Preserving Differential Privacy in Deep Learning Based on Feature
Relevance Region Segmentation". AFRRS keeps AdLM's three Laplace steps and changes one: the
per-feature budget comes from relevance *regions* (Algorithm 1, Eqs. 14–15) instead of single
features. :class:`AFRRS` therefore is :class:`~tfdpmech.mechanisms.AdLM` with

* the private relevance normalised after averaging (§4.1, after Eq. 9): each record's relevance
  is min-max scaled into [0, 1] (what Lemma 1's bound needs), averaged, noised with
  ``Lap(2d/(|D|·ε1))`` (Eq. 10–11), and then min-max scaled over the d features — after the
  noise, so the global scaling is post-processing (the paper applies it before the noise, where
  the 2d/|D| bound does not cover it);
* :class:`~tfdpmech.mechanisms.afrrs.allocation.RegionAllocation` as the budget strategy.

Noise is drawn once per record (``noise_mode="per_example_frozen"``), so the ledger proves
``ε1 + |L|·d·ε2/Δ_f + 2|L|·ε3/Δ_F`` per record exactly as for AdLM (the allocation keeps
``Σ_j ε_j = d·ε2``). The paper's Theorem 4 claims ``ε1 + ε2 + ε3``; the ledger shows both.

The provable head mode (a functional-mechanism head on statistics aggregated over the private
set) perturbs no input features, so a budget allocation does not apply there.
"""

from __future__ import annotations

import keras
import numpy as np

from ..adlm.taylor_cross_entropy import loss_sensitivity
from ..adlm.private_relevance import relevance_sensitivity
from ...validation import check_positive_int
from ..adlm import AdLM, first_layer_geometry, first_layer_sensitivity
from .allocation import DEFAULT_GAMMA, RegionAllocation, _check_gamma, global_minmax
from .reference import AFRRSReference

__all__ = ["AFRRS", "afrrs_sensitivities"]


class AFRRS(AdLM):
    """AFRRS (Algorithm 2) as a once-only, per-record preprocessing step (``mode="private"``).

    Args:
        eps1, eps2, eps3, batch_size: as for :class:`~tfdpmech.mechanisms.AdLM`.
        gamma: the merge threshold γ of Algorithm 1 (the paper does not report it).
        n_regions: optional alternative stopping rule (not in the paper).
        **kwargs: passed to :class:`~tfdpmech.mechanisms.AdLM` (``noise_mode``,
            ``delta_h0_policy``, ``seed``, ``ledger``, ...). The reference mode is its own class,
            :class:`~tfdpmech.mechanisms.afrrs.reference.AFRRSReference` (``mode="reference"`` is refused).

    Example:
        >>> afrrs = AFRRS.from_total(0.6, batch_size=50, gamma=0.1, seed=0)        # doctest: +SKIP
        >>> model = tfdpmech.make_private(afrrs_mnist_model(private=True), afrrs,  # doctest: +SKIP
        ...                               relevance_model=public_model)          # trained on public data only
        >>> model.compile(optimizer="adam")                                       # doctest: +SKIP
        >>> model.fit(x_train, y_train, epochs=10)  # relevance, regions, perturbation, then training  # doctest: +SKIP
        >>> print(afrrs.ledger.summary())                                         # doctest: +SKIP
    """

    name = "afrrs"
    paper = "Wang et al., AFRRS: AdLM with budgets per feature-relevance region"
    allocation_name = "regions"
    reference_class = AFRRSReference
    described = {"gamma": "gamma"}

    def __init__(self, eps1, eps2, eps3, batch_size, *, gamma: float = DEFAULT_GAMMA, n_regions: int | None = None,
                 **kwargs):
        gamma = _check_gamma(gamma)  # checked before anything else is set up
        if n_regions is not None:
            n_regions = check_positive_int(n_regions, "n_regions")
        super().__init__(eps1, eps2, eps3, batch_size, **kwargs)
        self.gamma = gamma
        self.n_regions = n_regions
        self.relevance_unnormalised = None
        self._allocation: RegionAllocation | None = None

    def fit_relevance(self, relevance_model, x, y, **kwargs) -> np.ndarray:
        """Private relevance (Eqs. 9–11, ε1), then the min-max over the d features as post-processing."""
        r = super().fit_relevance(relevance_model, x, y, **kwargs)
        self.relevance_unnormalised = r
        self.relevance = global_minmax(r).reshape(r.shape)
        self._allocation = None
        return self.relevance

    def allocation(self) -> RegionAllocation:
        """Region segmentation (Algorithm 1) and region budgets (Eqs. 14–15) of the private relevance."""
        if self.relevance is None:
            raise ValueError("AFRRS needs the private relevance; call fit_relevance() first")
        if self._allocation is None:
            self._allocation = RegionAllocation(self.relevance, self.gamma, n_regions=self.n_regions,
                                                floor=self.relevance_floor)
        return self._allocation

    def describe(self) -> dict:
        """γ, and the number of relevance regions once the relevance is known."""
        facts = super().describe()
        if self.relevance is not None:
            facts["regions"] = self.allocation().summary()["n_regions"]
        return facts

    def report(self, epochs: int | None = None) -> dict:
        out = super().report(epochs)
        if self.relevance is not None:
            out["segmentation"] = self.allocation().summary()
        return out


# ------------------------------------------------------------------------------------------------
# Sensitivities (Lemmas 1–3) of the paper's models (tfdpmech.mechanisms.afrrs.models: Tables 1 and 2)
# ------------------------------------------------------------------------------------------------
def afrrs_sensitivities(model: keras.Model, n: int, *, policy: str = "paper_literal", d_relevance=None) -> dict:
    """Δ_R (Lemma 1), Δ_f (Lemma 2) and Δ_F (Lemma 3) for a model of Table 1 or 2.

    Args:
        model: a built Keras model whose first Dense/Conv2D is h_0 and whose last layer is the
            output Dense reading the last hidden layer h_l.
        n: |D|, the number of records the relevance is averaged over.
        policy: how Δ_f counts a convolution's neurons (see
            :func:`tfdpmech.mechanisms.adlm.first_layer_sensitivity`); ``"paper_literal"`` is
            ``2·|h0|·d`` with |h0| all output units.
        d_relevance: features of the relevance map (default: the model's d).

    Returns:
        ``{"delta_R", "delta_f", "delta_F", "d", "h0", "h_l"}``.
    """
    first = next(layer for layer in model.layers if isinstance(layer, (keras.layers.Dense, keras.layers.Conv2D)))
    geo = first_layer_geometry(first)
    out = model.layers[-1]
    h_l = int(out.kernel.shape[0])
    m = int(out.kernel.shape[1])
    d = geo["d"] if d_relevance is None else int(d_relevance)
    return {"delta_R": relevance_sensitivity(d, n), "delta_f": first_layer_sensitivity(policy, **geo),
            "delta_F": loss_sensitivity(m, h_l), "d": geo["d"], "h0": geo["neurons"], "h_l": h_l}
