"""Keras losses of tfdpmech."""

from .convexified_cross_entropy import ConvexifiedCrossEntropy, convexified_cross_entropy_reference
from .taylor_cross_entropy import TaylorCrossEntropy, loss_sensitivity, taylor_coefficients

__all__ = [
    "ConvexifiedCrossEntropy", "convexified_cross_entropy_reference", "TaylorCrossEntropy", "loss_sensitivity",
    "taylor_coefficients",
]
