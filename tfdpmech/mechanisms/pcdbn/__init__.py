"""pCDBN (Phan, Wu, Dou 2017): a convolutional deep belief network trained with the functional mechanism.

* :mod:`.mechanism`: :class:`PrivateCDBN`, the layer-by-layer builder.
* :mod:`.energy`: :class:`ChebyshevEnergy`, one CRBM layer's perturbed polynomial energy and its modes.
* :mod:`.monomials`: the monomial tables and data sums of that polynomial.
* :mod:`.reference`: :class:`PCDBNReference`, the authors' public code path (claimed, none proven).

The layer is :class:`tfdpmech.layers.ConvRBM`; the sigmoid surrogates are in :mod:`tfdpmech.chebyshev`.
"""

from .energy import ENERGY_MODES, ChebyshevEnergy, check_domain, energy_sensitivity
from .mechanism import PCDBN_MODES, PrivateCDBN
from .reference import PCDBNReference
from .monomials import (
    MAX_MONOMIALS,
    check_functional_feasible,
    energy_orders,
    monomial_count,
    monomial_features,
    monomial_table,
    multinomial_factors,
)

__all__ = [
    "PrivateCDBN", "PCDBN_MODES", "PCDBNReference", "ChebyshevEnergy", "ENERGY_MODES", "check_domain", "energy_sensitivity",
    "MAX_MONOMIALS", "check_functional_feasible", "energy_orders", "monomial_count", "monomial_features",
    "monomial_table", "multinomial_factors",
]
