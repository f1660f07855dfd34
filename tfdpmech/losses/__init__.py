"""Keras losses of tfdpmech (``keras.losses.Loss`` subclasses), each defined in its paper's subpackage.

:class:`TaylorCrossEntropy` (AdLM, :mod:`tfdpmech.mechanisms.adlm.taylor_cross_entropy`) and
:class:`ConvexifiedCrossEntropy` (Lu et al.,
:mod:`tfdpmech.mechanisms.output_perturbation.convexified_cross_entropy`), resolved on first access
(:mod:`tfdpmech._lazy`).
"""

from .._lazy import lazy_attributes

_TAYLOR = "tfdpmech.mechanisms.adlm.taylor_cross_entropy"
_PAPER_LOSSES = {
    "ConvexifiedCrossEntropy": "tfdpmech.mechanisms.output_perturbation.convexified_cross_entropy",
    "TaylorCrossEntropy": _TAYLOR,
    "loss_sensitivity": _TAYLOR,
    "taylor_coefficients": _TAYLOR,
}
__getattr__, __dir__ = lazy_attributes(__name__, _PAPER_LOSSES)

__all__ = ["ConvexifiedCrossEntropy", "TaylorCrossEntropy", "loss_sensitivity", "taylor_coefficients"]
