"""Every noise calibration of the package: Laplace and Gaussian, ε of one release and the noise for a target ε.

* Laplace: :func:`laplace_scale` (``b = Δ₁/ε``).
* Gaussian (through ``dp_accounting``): :func:`gaussian_sigma` (the smallest σ for (ε, δ) and a
  sensitivity Δ₂), :func:`gaussian_epsilon` (ε of a noise multiplier), the per-record feature release
  of input perturbation (:func:`local_gaussian_epsilon`, :func:`sigma_local_gaussian`) and μ-GDP
  (:func:`gdp_delta`, :func:`gdp_epsilon`).

One Gaussian mechanism ``x + N(0, σ²I)`` with L2 sensitivity Δ₂ has noise multiplier ``σ/Δ₂``.
Three accountants of ``dp_accounting`` compute its (ε, δ):

* ``"analytic"`` (default): the exact privacy curve of one Gaussian mechanism,
  ``δ(ε) = Φ(1/(2m) − εm) − e^ε Φ(−1/(2m) − εm)`` (Balle & Wang 2018), through
  ``dp_accounting.pld.privacy_loss_mechanism.GaussianPrivacyLoss``;
* ``"rdp"``: ``dp_accounting.rdp.RdpAccountant`` (looser; it cannot certify small ε at small δ with
  its default orders);
* ``"pld"``: ``dp_accounting.pld.PLDAccountant``.

``dp_accounting`` is imported on first use (about 1 s), with a one-line ImportError naming the fix.
"""

from __future__ import annotations

import functools
import math
import numbers

from ..validation import check_choice, check_delta, check_epsilon, check_positive_real
from .sigma_search import smallest_sigma

__all__ = [
    "ACCOUNTANTS",
    "require_dp_accounting",
    "laplace_scale",
    "gaussian_sigma",
    "gaussian_epsilon",
    "local_gaussian_epsilon",
    "sigma_local_gaussian",
    "gdp_delta",
    "gdp_epsilon",
]

ACCOUNTANTS = ("analytic", "rdp", "pld")
DP_ACCOUNTING_HINT = "pip install dp-accounting"


def require_dp_accounting(purpose: str = "this privacy computation"):
    """Import ``dp_accounting``, or raise a one-line ImportError that names ``purpose`` and the fix."""
    try:
        import dp_accounting
    except Exception as exc:  # ImportError, or a broken install
        raise ImportError(f"dp_accounting is missing ({purpose} needs it): {DP_ACCOUNTING_HINT}") from exc
    return dp_accounting


def _gaussian_loss(multiplier, sensitivity: float = 1.0):
    require_dp_accounting("the Gaussian-mechanism accounting")
    from dp_accounting.pld import privacy_loss_mechanism

    return privacy_loss_mechanism.GaussianPrivacyLoss(multiplier, sensitivity=sensitivity)


@functools.lru_cache(maxsize=4096)
def _analytic_epsilon(multiplier: float, sensitivity: float, delta: float) -> float:
    # a pure function of its arguments, cached: a bisection costs ~50 evaluations of the privacy curve
    return _smallest_epsilon(_gaussian_loss(multiplier, sensitivity=sensitivity), delta)


def _smallest_epsilon(loss, delta: float) -> float:
    """The smallest ε with ``loss.get_delta_for_epsilon(ε) <= delta`` (bisection from above: the
    returned ε always satisfies it; δ(ε) is decreasing in ε)."""
    lo, hi = 0.0, 1.0
    if loss.get_delta_for_epsilon(0.0) <= delta:
        return 0.0
    for _ in range(200):
        if loss.get_delta_for_epsilon(hi) <= delta:
            break
        lo, hi = hi, hi * 2.0
    for _ in range(100):  # bisection; hi always satisfies δ(hi) <= δ
        mid = 0.5 * (lo + hi)
        if loss.get_delta_for_epsilon(mid) <= delta:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-12 * hi:
            break
    return float(hi)


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """``b = Δ₁/ε``: the Laplace mechanism (Dwork et al. 2006, Thm. 1) gives ε-DP."""
    return check_positive_real(sensitivity, "sensitivity") / check_epsilon(epsilon)


def gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest σ for which one Gaussian mechanism with L2 sensitivity Δ₂ is (ε, δ)-DP.

    Computed by ``dp_accounting``'s exact privacy curve of the Gaussian mechanism
    (``GaussianPrivacyLoss.from_privacy_guarantee``; the analytic Gaussian mechanism of
    Balle & Wang, ICML 2018), not by the classic ``√(2 ln(1.25/δ))·Δ/ε`` formula, which is
    looser and only valid for ε < 1. Its inverse is :func:`gaussian_epsilon` of ``σ/Δ₂``.

    Raises:
        ValueError / TypeError: ε <= 0, δ ∉ (0, 1), Δ₂ <= 0.
        ImportError: dp_accounting is missing.
    """
    sensitivity = check_positive_real(sensitivity, "sensitivity")
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    require_dp_accounting("the Gaussian-mechanism calibration")
    from dp_accounting.pld import common, privacy_loss_mechanism

    loss = privacy_loss_mechanism.GaussianPrivacyLoss.from_privacy_guarantee(
        common.DifferentialPrivacyParameters(epsilon, delta), sensitivity=sensitivity)
    return float(loss.standard_deviation)


def gaussian_epsilon(multiplier, delta, accountant: str = "analytic") -> float:
    """ε at δ of one Gaussian mechanism with noise multiplier ``σ/Δ₂`` (see the module docstring).

    For noise σ on a release of L2 sensitivity Δ₂ pass ``σ/Δ₂``. ``accountant="pld"`` is an
    independent cross-check of :func:`gaussian_sigma` (the PLD accountant discretises pessimistically,
    so its ε is slightly above the exact one).

    Raises:
        ImportError: dp_accounting is missing.
        ValueError / TypeError: multiplier <= 0, δ ∉ (0, 1), unknown accountant.
    """
    multiplier = check_positive_real(multiplier, "multiplier")
    delta = check_delta(delta)
    check_choice(accountant, "accountant", ACCOUNTANTS)
    dp_accounting = require_dp_accounting("the Gaussian-mechanism accounting")
    if accountant == "analytic":
        # exact: δ(ε) = Φ(1/(2m) − εm) − e^ε Φ(−1/(2m) − εm) (Balle & Wang 2018), decreasing in ε
        return _analytic_epsilon(multiplier, 1.0, delta)
    acc = dp_accounting.rdp.RdpAccountant() if accountant == "rdp" else dp_accounting.pld.PLDAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(multiplier))
    return float(acc.get_epsilon(delta))


def local_gaussian_epsilon(sigma, delta, feature_norm_bound: float = 1.0, *, accountant: str = "analytic") -> float:
    """ε of one record's features released as ``x + N(0, σ²I)`` with ``‖x‖ <= R`` (replace-one).

    A Gaussian mechanism with L2 sensitivity ``2R`` and noise multiplier ``σ/(2R)``, accounted with
    ``dp_accounting`` (:func:`gaussian_epsilon`).

    Args:
        sigma: the noise std (> 0).
        delta: δ ∈ (0, 1).
        feature_norm_bound: R, the public bound on ‖x‖.
        accountant: ``"analytic"``, ``"rdp"`` or ``"pld"``.

    Returns:
        ε >= 0 (proven, feature-level).

    Raises:
        ImportError: dp_accounting is missing.
        ValueError / TypeError: invalid inputs.
    """
    sigma = check_positive_real(sigma, "sigma")
    delta = check_delta(delta)
    R = check_positive_real(feature_norm_bound, "feature_norm_bound")
    check_choice(accountant, "accountant", ACCOUNTANTS)
    return gaussian_epsilon(sigma / (2.0 * R), delta, accountant)


def sigma_local_gaussian(epsilon, delta, feature_norm_bound: float = 1.0, *, accountant: str = "analytic",
                         tol: float = 1e-6) -> float:
    """Smallest σ whose per-record Gaussian mechanism on the features meets (ε, δ).

    Sensitivity ``2R`` (replace one record inside the R-ball). ``"analytic"`` (default) takes the exact
    smallest σ of :func:`gaussian_sigma`; ``"rdp"`` / ``"pld"`` search σ with
    :func:`~tfdpmech.accounting.sigma_search.smallest_sigma`. In every case ``local_gaussian_epsilon(σ) <= ε``.

    Args:
        epsilon: target ε > 0 of the feature release.
        delta: δ ∈ (0, 1).
        feature_norm_bound: R.
        accountant: ``"analytic"`` (exact, fast), ``"rdp"`` or ``"pld"`` (~0.2 s per evaluation).
        tol: relative tolerance on the noise multiplier (``"rdp"`` / ``"pld"``).

    Returns:
        σ > 0.

    Raises:
        ImportError: dp_accounting is missing.
        ValueError / TypeError: invalid inputs, or an ε the chosen accountant cannot certify at this δ.
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    R = check_positive_real(feature_norm_bound, "feature_norm_bound")
    check_choice(accountant, "accountant", ACCOUNTANTS)
    if isinstance(tol, bool) or not (isinstance(tol, numbers.Real) and 0 < tol < 1):
        raise ValueError(f"tol must lie in (0, 1), got {tol!r}")
    if accountant == "analytic":
        return gaussian_sigma(2.0 * R, epsilon, delta)
    require_dp_accounting("the Gaussian-mechanism calibration")

    def not_certifiable(_reached):
        return ValueError(
            f"the {accountant!r} accountant cannot certify epsilon={epsilon:g} at delta={delta:g} (its bound "
            "levels off, e.g. RDP at ln(1/δ)/max order); use accountant='analytic' (exact for one Gaussian)"
        )

    # the classic bound sqrt(2 ln(1.25/δ))/ε (valid for ε < 1) is within a small factor of the optimum
    ceiling = 100.0 * math.sqrt(2.0 * math.log(1.25 / delta)) / min(epsilon, 1.0)
    # no accountant certifies less noise than the exact curve needs: the search starts there (a PLD grid for a
    # far smaller σ, whose ε is huge, would not fit in memory)
    exact = gaussian_sigma(1.0, epsilon, delta)
    multiplier = smallest_sigma(lambda m: gaussian_epsilon(m, delta, accountant), epsilon, lower=exact,
                                upper=exact, factor=1.25, max_sigma=ceiling, max_shrinks=2,
                                relative_tol=tol, not_certifiable=not_certifiable)
    return float(multiplier) * 2.0 * R


def gdp_delta(mu, epsilon) -> float:
    """δ(ε) of μ-GDP (Dong, Roth, Su 2022, Cor. 2.13), through ``dp_accounting``.

    μ-GDP is exactly the privacy curve of one Gaussian mechanism with sensitivity μ and noise
    std 1, so ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2)`` comes from
    ``dp_accounting.pld.privacy_loss_mechanism.GaussianPrivacyLoss``.

    Raises:
        ValueError / TypeError: μ <= 0, ε < 0 or not finite.
    """
    mu = check_positive_real(mu, "mu")
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise TypeError(f"epsilon must be a real number >= 0, got {type(epsilon).__name__} {epsilon!r}")
    epsilon = float(epsilon)
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be finite and >= 0, got {epsilon}")
    return float(_gaussian_loss(1.0, sensitivity=mu).get_delta_for_epsilon(epsilon))


def gdp_epsilon(mu, delta) -> float:
    """The smallest ε with ``δ(ε) <= delta`` for μ-GDP (e.g. μ = 1, δ = 1e-5 → ε ≈ 4.38), via ``dp_accounting``.

    Lu et al. ("A Differentially Private Framework for Deep Learning with Convexified Loss
    Functions", Theorem 3) compose per-query Gaussian answers in GDP; this reports the composed μ
    as (ε, δ)-DP.

    Raises:
        ValueError / TypeError: μ <= 0, δ ∉ (0, 1).
    """
    mu = check_positive_real(mu, "mu")
    delta = check_delta(delta)
    return _analytic_epsilon(1.0, mu, delta)
