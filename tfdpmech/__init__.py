"""tfdpmech: noise-once differential-privacy mechanisms for Keras, next to DP-SGD.

Every release is recorded in a :class:`PrivacyLedger` with the ε the paper claims and the ε a
correct argument proves (or "none proven").
"""

from . import allocation, callbacks, data, layers, ledger, losses, mechanisms, models, noise, relevance, validation
from .callbacks import PrivacyBudget
from .layers import BatchMinMax, BoundedLRN, InputNoise, PerturbedBias, UnitClip
from .ledger import PrivacyLedger, Release, format_epsilon
from .losses import TaylorCrossEntropy
from .mechanisms import AdLM, ILM, PrivateData
from .metrics import taylor_accuracy
from .validation import PrivacyLeakWarning

__version__ = "0.1.0"

__all__ = [
    "AdLM", "ILM", "PrivateData", "PrivacyBudget", "PrivacyLedger", "Release", "format_epsilon",
    "TaylorCrossEntropy", "taylor_accuracy", "BatchMinMax", "BoundedLRN", "InputNoise", "PerturbedBias",
    "UnitClip", "PrivacyLeakWarning", "allocation", "callbacks", "data", "layers", "ledger", "losses",
    "mechanisms", "models", "noise", "relevance", "validation",
]
