"""Noise scales of the head's one release; every (ε, δ) computation goes through ``dp_accounting``."""

from __future__ import annotations

from ..accounting.gaussian import gaussian_epsilon as _multiplier_epsilon
from ..accounting.gaussian import require_dp_accounting
from ..validation import check_delta, check_epsilon, check_positive_real

__all__ = ["gaussian_sigma", "gaussian_epsilon", "laplace_scale"]


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """``b = Δ₁/ε``: the Laplace mechanism (Dwork et al. 2006, Thm. 1) gives ε-DP."""
    return check_positive_real(sensitivity, "sensitivity") / check_epsilon(epsilon)


def gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest σ for which one Gaussian mechanism with L2 sensitivity Δ₂ is (ε, δ)-DP.

    Computed by ``dp_accounting``'s exact privacy curve of the Gaussian mechanism
    (``GaussianPrivacyLoss.from_privacy_guarantee``; the analytic Gaussian mechanism of
    Balle & Wang, ICML 2018), not by the classic ``√(2 ln(1.25/δ))·Δ/ε`` formula, which is
    looser and only valid for ε < 1.

    Raises:
        ValueError / TypeError: ε <= 0, δ ∉ (0, 1), Δ₂ <= 0.
        ImportError: dp_accounting is missing.
    """
    sensitivity = check_positive_real(sensitivity, "sensitivity")
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    require_dp_accounting("the functional head's Gaussian calibration")
    from dp_accounting.pld import common, privacy_loss_mechanism

    loss = privacy_loss_mechanism.GaussianPrivacyLoss.from_privacy_guarantee(
        common.DifferentialPrivacyParameters(epsilon, delta), sensitivity=sensitivity)
    return float(loss.standard_deviation)


def gaussian_epsilon(sigma: float, sensitivity: float, delta: float, *, accountant: str = "pld") -> float:
    """ε at δ of one Gaussian mechanism (σ, Δ₂) from ``dp_accounting`` (default: its PLD accountant).

    An independent cross-check of :func:`gaussian_sigma` (the PLD accountant discretises
    pessimistically, so its ε is slightly above the exact one).
    """
    multiplier = check_positive_real(sigma, "sigma") / check_positive_real(sensitivity, "sensitivity")
    return _multiplier_epsilon(multiplier, delta, accountant)
