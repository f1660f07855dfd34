"""tfdpmech: noise-once differential-privacy mechanisms for Keras, next to DP-SGD.

Every release is recorded in a :class:`PrivacyLedger` with the ε the paper claims and the ε a
correct argument proves (or "none proven").
"""

from . import (
    allocation, audit, callbacks, chebyshev, data, layers, ledger, losses, mechanisms, models, noise, query_budget,
    relevance, validation,
)
from .callbacks import PrivacyBudget
from .layers import BatchMinMax, BoundedLRN, ConvRBM, InputNoise, NoisyOutputNeuron, PerturbedBias, UnitClip
from .ledger import PrivacyLedger, Release, format_epsilon
from .losses import ChebyshevEnergy, ConvexifiedCrossEntropy, FunctionalSoftmaxHead, TaylorCrossEntropy
from .mechanisms import AdLM, ILM, DPPredictor, InputPerturbation, PrivateCDBN, PrivateData, compute_bounds
from .metrics import taylor_accuracy
from .query_budget import BudgetExhaustedError, BudgetStateError, QueryBudgetAccountant
from .validation import PrivacyLeakWarning

__version__ = "0.1.0"

__all__ = [
    # mechanisms (one per paper)
    "AdLM", "ILM", "PrivateData", "DPPredictor", "compute_bounds", "InputPerturbation", "PrivateCDBN",
    # layers, losses, metrics
    "BatchMinMax", "BoundedLRN", "ConvRBM", "InputNoise", "NoisyOutputNeuron", "PerturbedBias", "UnitClip",
    "ChebyshevEnergy", "ConvexifiedCrossEntropy", "FunctionalSoftmaxHead", "TaylorCrossEntropy", "taylor_accuracy",
    # accounting
    "PrivacyBudget", "PrivacyLedger", "Release", "format_epsilon", "QueryBudgetAccountant", "BudgetExhaustedError",
    "BudgetStateError", "PrivacyLeakWarning",
    # modules
    "allocation", "audit", "callbacks", "chebyshev", "data", "layers", "ledger", "losses", "mechanisms", "models",
    "noise", "query_budget", "relevance", "validation",
]
