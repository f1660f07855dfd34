"""AdLM and ILM (Phan et al., ICDM'17): adaptive (or uniform) Laplace noise drawn once, before training.

* :mod:`.mechanism`: :class:`AdLM`, :class:`ILM`.
* :mod:`.perturbation`: the once-only noise draws (lines 13–19); :mod:`.releases`: their ledger entries.
* :mod:`.private_data`: :class:`PrivateData` (the released data), ``AdLMBudget`` (the callback).
* :mod:`.sensitivity`: Δ_h0 policies, the per-record ε, and the model checks they rest on.
* :mod:`.reference`: :class:`AdLMReference`, :class:`ILMReference`, the authors' public code path
  (the reference mode, a class of its own; claimed, none proven); :mod:`.reference_steps`: its steps, one function each.
* :mod:`.allocation`: :class:`BudgetAllocation` (Eq. 16's β): uniform (ILM), relevance (AdLM); AFRRS
  subclasses it.
* :mod:`.lrp`: layer-wise relevance propagation with the ε-rule (§II-C, Eqs. 4–8).
* :mod:`.private_relevance`: the noisy, dataset-averaged relevance and its Δ_R (§III-A, Lemma 1).
* :mod:`.input_noise`: :class:`InputNoise`, the authors' fresh per-step input noise (reproduction).
* :mod:`.perturbed_bias`: :class:`PerturbedBias`, the first layer's bias times a frozen noisy constant.
* :mod:`.taylor_cross_entropy`: :class:`TaylorCrossEntropy`, the order-2 Taylor loss (§III-C, Lemma 5).
* :mod:`.networks`: the networks of the authors' public code (the reference mode).
"""

from .allocation import BudgetAllocation, RelevanceAllocation, UniformAllocation, get_allocation
from .input_noise import InputNoise
from .lrp import STARTS, SUPPORTED_LAYERS, lrp_relevance
from .mechanism import ILM, MODES, NOISE_MODES, AdLM
from .networks import authors_mnist_network, lenet5_relevance_model
from .perturbed_bias import PerturbedBias
from .private_data import PrivateData
from .private_relevance import normalize_per_example, private_relevance, relevance_sensitivity
from .reference import AdLMReference, ILMReference
from .sensitivity import (
    DELTA_H0_POLICIES,
    check_bounded_last_hidden,
    first_affine_layer,
    first_layer_geometry,
    first_layer_sensitivity,
    provable_epsilon_per_record,
)
from .taylor_cross_entropy import TaylorCrossEntropy, loss_sensitivity, taylor_coefficients

__all__ = [
    "AdLM", "ILM", "PrivateData", "MODES", "NOISE_MODES", "AdLMReference", "ILMReference", "DELTA_H0_POLICIES", "first_affine_layer",
    "check_bounded_last_hidden", "first_layer_geometry", "first_layer_sensitivity", "provable_epsilon_per_record",
    "BudgetAllocation", "UniformAllocation", "RelevanceAllocation", "get_allocation",
    "SUPPORTED_LAYERS", "STARTS", "lrp_relevance", "normalize_per_example", "relevance_sensitivity", "private_relevance",
    "InputNoise", "PerturbedBias", "TaylorCrossEntropy", "loss_sensitivity", "taylor_coefficients",
    "authors_mnist_network", "lenet5_relevance_model",
]
