"""Keras losses of tfdpmech (``keras.losses.Loss`` subclasses)."""

from .convexified_cross_entropy import ConvexifiedCrossEntropy
from .functional_softmax_head import FunctionalSoftmaxHead, head_sensitivity
from .taylor_cross_entropy import TaylorCrossEntropy, loss_sensitivity, taylor_coefficients

__all__ = [
    "FunctionalSoftmaxHead", "head_sensitivity", "ConvexifiedCrossEntropy", "TaylorCrossEntropy", "loss_sensitivity",
    "taylor_coefficients",
]
