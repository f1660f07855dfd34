"""Noise scales of the head's one release, from ``dp_accounting`` where (ε, δ) is involved."""

from __future__ import annotations

from ..validation import check_delta, check_epsilon, check_positive_real

__all__ = ["gaussian_sigma", "gaussian_epsilon", "laplace_scale", "DP_ACCOUNTING_HINT"]

DP_ACCOUNTING_HINT = "pip install 'dp-accounting>=0.4.3' (a dependency of tfdpmech)"


def _dp_accounting():
    try:
        import dp_accounting  # noqa: F401  (a declared dependency; imported lazily to keep import time low)
        from dp_accounting.pld import common, privacy_loss_mechanism
    except ImportError as exc:  # pragma: no cover - dependency declared in setup.cfg
        raise ImportError(f"dp_accounting is missing: {DP_ACCOUNTING_HINT}") from exc
    return dp_accounting, common, privacy_loss_mechanism


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
    _, common, plm = _dp_accounting()
    loss = plm.GaussianPrivacyLoss.from_privacy_guarantee(
        common.DifferentialPrivacyParameters(epsilon, delta), sensitivity=sensitivity)
    return float(loss.standard_deviation)


def gaussian_epsilon(sigma: float, sensitivity: float, delta: float, *, accountant: str = "pld") -> float:
    """ε at δ of one Gaussian mechanism (σ, Δ₂), from ``dp_accounting``'s PLD or RDP accountant.

    An independent cross-check of :func:`gaussian_sigma` (the PLD accountant discretises
    pessimistically, so its ε is slightly above the exact one).
    """
    sigma = check_positive_real(sigma, "sigma")
    sensitivity = check_positive_real(sensitivity, "sensitivity")
    delta = check_delta(delta)
    dp_accounting, _, _ = _dp_accounting()
    acc = dp_accounting.pld.PLDAccountant() if accountant == "pld" else dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(sigma / sensitivity))
    return float(acc.get_epsilon(delta))
