"""tfdpmech: noise-once differential-privacy mechanisms for Keras, next to DP-SGD.

Every release is recorded in a :class:`PrivacyLedger` with the ε the paper claims and the ε a
correct argument proves (or "none proven"). The package map is in ``docs/architecture.md``.
"""

from .cpu_malloc import apply_malloc_settings as _apply_malloc_settings

_apply_malloc_settings()  # glibc's malloc set for training, unless TFDPMECH_MALLOC=default (tfdpmech.cpu_malloc)

from . import (  # noqa: E402
    accounting, audit, data, contract, features, layers, losses, mechanisms, metrics, models, noise, validation,
)
from .accounting import (
    BudgetExhaustedError, BudgetStateError, PrivacyBudget, PrivacyLedger, QueryBudgetAccountant, Release,
    format_epsilon,
)
from .layers import BatchMinMax, BatchStatisticsNormalization, BoundedLRN, ConvRBM, InputNoise, NoisyOutputNeuron, PerturbedBias, UnitClip
from .features import public_features, random_features
from .mechanisms.functional_head import FunctionalHead
from .mechanisms.pcdbn import FunctionalSoftmaxHead, cdbn_network
from .losses import ConvexifiedCrossEntropy, TaylorCrossEntropy
from .mechanisms import (
    AFRRS, ILM, AdLM, AdLMReference, AFRRSReference, ChebyshevEnergy, DPPredictor, ILMReference, InputPerturbation,
    InputPerturbationAssumptions, OutputPerturbationHead, PCDBNReference, PrivateCDBN, PrivateData, compute_bounds,
)
from .contract import Mechanism, PreparedFit
from .mechanisms.dpsgd import DPSGD, replace_batch_norm, resume
from .private_training import make_private
from .metrics import taylor_accuracy
from .privacy_warnings import PrivacyLeakWarning, UnprovenModeWarning

__version__ = "0.1.0"

__all__ = [
    # the one way to train privately, and the contract every mechanism answers
    "make_private", "DPSGD", "resume", "replace_batch_norm", "Mechanism", "PreparedFit",
    # mechanisms (one per paper) and the authors' code paths (the reference modes with a class of their own)
    "AdLM", "ILM", "AFRRS", "PrivateData", "DPPredictor", "compute_bounds", "InputPerturbation",
    "InputPerturbationAssumptions", "OutputPerturbationHead", "PrivateCDBN", "cdbn_network", "AdLMReference", "ILMReference", "AFRRSReference", "PCDBNReference",
    # the functional-mechanism head and its feature extractors
    "FunctionalHead", "public_features", "random_features",
    # layers, losses, metrics
    "BatchMinMax", "BatchStatisticsNormalization", "BoundedLRN", "ConvRBM", "InputNoise", "NoisyOutputNeuron", "PerturbedBias", "UnitClip",
    "ChebyshevEnergy", "ConvexifiedCrossEntropy", "FunctionalSoftmaxHead", "TaylorCrossEntropy", "taylor_accuracy",
    # accounting
    "PrivacyBudget", "PrivacyLedger", "Release", "format_epsilon", "QueryBudgetAccountant", "BudgetExhaustedError",
    "BudgetStateError", "PrivacyLeakWarning", "UnprovenModeWarning",
    # subpackages and modules
    "accounting", "audit", "contract", "data", "features", "layers", "losses", "mechanisms",
    "metrics", "models", "noise", "validation",
]
