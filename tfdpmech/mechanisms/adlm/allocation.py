"""Per-feature budget ratios β for the private first affine layer (AdLM Eq. 16).

Every strategy returns ``β`` with the input's feature shape, all entries > 0 and
``Σ_j β_j = d``, so that ``Σ_j ε_j = d·ε2`` as Lemma 4's proof needs. A new strategy
(e.g. AFRRS relevance regions) subclasses :class:`BudgetAllocation` and implements
:meth:`BudgetAllocation.ratios`.
"""

from __future__ import annotations

import abc

import numpy as np

from ...validation import check_array, check_choice, check_real

__all__ = ["BudgetAllocation", "UniformAllocation", "RelevanceAllocation", "get_allocation"]


class BudgetAllocation(abc.ABC):
    """How ε2 is shared among the d input features."""

    name: str = "base"
    needs_relevance: bool = False

    @abc.abstractmethod
    def ratios(self, feature_shape) -> np.ndarray:
        """Return β of shape ``feature_shape`` with ``Σβ = d`` and ``β > 0``."""

    @staticmethod
    def _check_sum(beta: np.ndarray) -> np.ndarray:
        d = beta.size
        if not (np.all(beta > 0) and abs(beta.sum() - d) < 1e-6 * d):
            raise AssertionError(f"budget ratios must be > 0 and sum to d={d}, got sum {beta.sum()}")
        return beta


class UniformAllocation(BudgetAllocation):
    """ILM (AdLM App. C): the same budget for every feature, ``β_j = 1``."""

    name = "uniform"

    def ratios(self, feature_shape) -> np.ndarray:
        return self._check_sum(np.ones(tuple(feature_shape), dtype=np.float64))


class RelevanceAllocation(BudgetAllocation):
    """AdLM (Eq. 16): ``β_j = d·r_j / Σ r``, so relevant features get less noise.

    Args:
        relevance: the private (noisy) relevance ``R̄``, shape = feature shape.
        floor: lower bound on ``r_j`` so no feature gets ε_j = 0 (infinite noise).
        mode: ``"floor"`` (default): ``r_j = max(R̄_j, floor)``; ``"abs"`` (Eq. 16 as printed):
            ``r_j = max(|R̄_j|, floor)``, which also favours strongly negative noisy relevance.

    Raises:
        ValueError: relevance not finite, floor <= 0, unknown mode, or (in :meth:`ratios`)
            a relevance shape that does not match the features.
    """

    name = "relevance"
    needs_relevance = True

    def __init__(self, relevance, floor: float = 1e-5, mode: str = "floor"):
        self.relevance = check_array(relevance, "relevance", ndim_min=1).astype(np.float64)
        floor = check_real(floor, "floor")
        if not floor > 0:
            raise ValueError(f"floor must be > 0 so that every feature keeps some budget, got {floor}")
        self.floor = float(floor)
        self.mode = check_choice(mode, "mode", ("floor", "abs"))

    def ratios(self, feature_shape) -> np.ndarray:
        feature_shape = tuple(int(s) for s in feature_shape)
        # Accept the exact shape, a flat vector of d entries, or the same shape up to axes of
        # length 1 (e.g. (28, 28) for (28, 28, 1)). Any other reshape would silently move the
        # relevance of one feature onto another, e.g. (3, 2) onto (2, 3).
        def squeezed(shape):
            return tuple(s for s in shape if s != 1)

        same_size = self.relevance.size == int(np.prod(feature_shape))
        compatible = same_size and (
            self.relevance.ndim == 1 or squeezed(self.relevance.shape) == squeezed(feature_shape)
        )
        if not compatible:
            raise ValueError(
                f"relevance has shape {self.relevance.shape} but the inputs have feature shape {feature_shape}; "
                "compute it with tfdpmech.mechanisms.adlm.private_relevance on the same inputs"
            )
        r = self.relevance.reshape(feature_shape)
        r = np.abs(r) if self.mode == "abs" else r
        r = np.maximum(r, self.floor)
        return self._check_sum(r.size * r / r.sum())  # Eq. 16


def get_allocation(allocation, relevance=None, **kwargs) -> BudgetAllocation:
    """Resolve ``"uniform"`` / ``"relevance"`` / a :class:`BudgetAllocation` instance."""
    if isinstance(allocation, BudgetAllocation):
        return allocation
    check_choice(allocation, "allocation", ("uniform", "relevance"))
    if allocation == "uniform":
        return UniformAllocation()
    if relevance is None:
        raise ValueError("allocation='relevance' needs the private relevance; call fit_relevance() first")
    return RelevanceAllocation(relevance, **kwargs)
