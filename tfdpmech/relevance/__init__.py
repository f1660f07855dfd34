"""Layer-wise relevance propagation and AdLM's private (noisy, dataset-averaged) relevance."""

from .lrp import STARTS, SUPPORTED_LAYERS, lrp_relevance
from .private_relevance import normalize_per_example, private_relevance, relevance_sensitivity

__all__ = ["SUPPORTED_LAYERS", "STARTS", "lrp_relevance", "normalize_per_example", "relevance_sensitivity",
           "private_relevance"]
