"""Old path of the heads' noise calibrations, now in :mod:`tfdpmech.accounting.gaussian`; kept for one release.

Importing this module warns once (``DeprecationWarning``). :func:`gaussian_epsilon` here keeps its
old signature ``(sigma, sensitivity, delta, *, accountant="pld")``; the package's one
``gaussian_epsilon`` is :func:`tfdpmech.accounting.gaussian.gaussian_epsilon` of the noise multiplier
``sigma/sensitivity``.
"""

from .._deprecation import warn_moved
from ..accounting.gaussian import gaussian_epsilon as _multiplier_epsilon
from ..accounting.gaussian import gaussian_sigma, laplace_scale
from ..validation import check_positive_real

__all__ = ["gaussian_sigma", "gaussian_epsilon", "laplace_scale"]


def gaussian_epsilon(sigma: float, sensitivity: float, delta: float, *, accountant: str = "pld") -> float:
    """ε at δ of one Gaussian mechanism (σ, Δ₂): ``accounting.gaussian.gaussian_epsilon(σ/Δ₂, δ, accountant)``."""
    multiplier = check_positive_real(sigma, "sigma") / check_positive_real(sensitivity, "sensitivity")
    return _multiplier_epsilon(multiplier, delta, accountant)


warn_moved(__name__, "tfdpmech.accounting.gaussian")
