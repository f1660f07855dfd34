"""Keras losses of tfdpmech (``keras.losses.Loss`` subclasses)."""

from .convexified_cross_entropy import ConvexifiedCrossEntropy
from .taylor_cross_entropy import TaylorCrossEntropy, loss_sensitivity, taylor_coefficients

__all__ = ["ConvexifiedCrossEntropy", "TaylorCrossEntropy", "loss_sensitivity", "taylor_coefficients"]
