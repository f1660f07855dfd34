"""Keras losses of tfdpmech."""

from .taylor_cross_entropy import TaylorCrossEntropy, loss_sensitivity, taylor_coefficients

__all__ = ["TaylorCrossEntropy", "loss_sensitivity", "taylor_coefficients"]
