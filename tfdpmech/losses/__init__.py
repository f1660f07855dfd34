"""Keras losses of tfdpmech."""

from .chebyshev_energy import ChebyshevEnergy
from .convexified_cross_entropy import ConvexifiedCrossEntropy, convexified_cross_entropy_reference
from .functional_softmax_head import FunctionalSoftmaxHead, head_sensitivity
from .taylor_cross_entropy import TaylorCrossEntropy, loss_sensitivity, taylor_coefficients

__all__ = [
    "ChebyshevEnergy", "FunctionalSoftmaxHead", "head_sensitivity", "ConvexifiedCrossEntropy", "convexified_cross_entropy_reference", "TaylorCrossEntropy", "loss_sensitivity",
    "taylor_coefficients",
]
