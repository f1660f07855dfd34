"""pCDBN (Phan, Wu, Dou 2017): a convolutional deep belief network trained with the functional mechanism.

* :mod:`.mechanism`: :class:`PrivateCDBN`, the layer-by-layer training (``make_private(model, PrivateCDBN(...))``);
  :mod:`.network_parts`: the parts of the model it trains, found and checked.
* :mod:`.energy`: :class:`ChebyshevEnergy`, one CRBM layer's perturbed polynomial energy and its modes.
* :mod:`.monomials`: the monomial tables and data sums of that polynomial.
* :mod:`.reference`: :class:`PCDBNReference`, the authors' public code path (claimed, none proven);
  :mod:`.reference_steps`: its steps, one function each.
* :mod:`.conv_rbm`: :class:`ConvRBM`, the convolutional RBM layer (also ``tfdpmech.layers.ConvRBM``).
* :mod:`.chebyshev`: the polynomial surrogates of the sigmoid (Eqs. 10–14) the layer and the energy use.
* :mod:`.softmax_head`: :class:`FunctionalSoftmaxHead`, the private output layer (§3.3).
* :mod:`.networks`: :func:`cdbn_network`, the model ``PrivateCDBN`` trains, and the network of the authors'
  public code (the reference mode).
"""

from .chebyshev import APPROXIMATIONS, approximation_alpha
from .conv_rbm import BoxConstraint, ConvRBM
from .energy import ENERGY_MODES, ChebyshevEnergy, check_domain, energy_sensitivity
from .mechanism import PrivateCDBN
from .networks import cdbn_network, pcdbn_authors_network
from .reference import PCDBNReference
from .softmax_head import FunctionalSoftmaxHead, head_sensitivity
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
    "PrivateCDBN", "PCDBNReference", "ChebyshevEnergy", "ENERGY_MODES", "check_domain", "energy_sensitivity",
    "MAX_MONOMIALS", "check_functional_feasible", "energy_orders", "monomial_count", "monomial_features",
    "monomial_table", "multinomial_factors", "ConvRBM", "BoxConstraint", "APPROXIMATIONS", "approximation_alpha",
    "FunctionalSoftmaxHead", "head_sensitivity", "cdbn_network", "pcdbn_authors_network",
]
