"""tfdpmech: noise-once differential-privacy mechanisms for Keras, next to DP-SGD.

Every release is recorded in a :class:`PrivacyLedger` with the ε the paper claims and the ε a
correct argument proves (or "none proven").
"""

from . import (
    allocation, audit, callbacks, data, layers, ledger, losses, mechanisms, models, noise, query_budget, relevance,
    validation,
)
from .callbacks import PrivacyBudget
from .layers import BatchMinMax, BoundedLRN, InputNoise, NoisyOutputNeuron, PerturbedBias, UnitClip
from .ledger import PrivacyLedger, Release, format_epsilon
from .losses import ConvexifiedCrossEntropy, TaylorCrossEntropy
from .mechanisms import AdLM, ILM, DPPredictor, PrivateData, compute_bounds
from .metrics import taylor_accuracy
from .query_budget import BudgetExhaustedError, BudgetStateError, QueryBudgetAccountant
from .validation import PrivacyLeakWarning

__version__ = "0.1.0"

__all__ = [
    "AdLM", "ILM", "PrivateData", "DPPredictor", "compute_bounds", "ConvexifiedCrossEntropy", "NoisyOutputNeuron",
    "QueryBudgetAccountant", "BudgetExhaustedError", "BudgetStateError", "audit", "query_budget", "PrivacyBudget", "PrivacyLedger", "Release", "format_epsilon",
    "TaylorCrossEntropy", "taylor_accuracy", "BatchMinMax", "BoundedLRN", "InputNoise", "PerturbedBias",
    "UnitClip", "PrivacyLeakWarning", "allocation", "callbacks", "data", "layers", "ledger", "losses",
    "mechanisms", "models", "noise", "relevance", "validation",
]
