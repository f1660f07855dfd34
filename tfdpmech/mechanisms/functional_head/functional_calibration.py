"""The noise of the functional head's one release: the sensitivity of (S1, λ·S2), the noise scale, the basis.

Laplace (pure ε, features in [0, 1]) or Gaussian ((ε, δ), unit-norm features), with the sensitivities
of :mod:`tfdpmech.mechanisms.functional_head.sensitivity` and the calibrations of :mod:`tfdpmech.accounting.gaussian`.
"""

from __future__ import annotations

import math

from ...accounting.gaussian import gaussian_sigma, laplace_scale
from .sensitivity import gaussian_sensitivity, laplace_sensitivity

__all__ = ["functional_calibration"]


def functional_calibration(mechanism: str, epsilon: float, delta: float, d_real: int, num_classes: int, *,
                           quadratic_weight: float, nonnegative: bool) -> tuple:
    """``(sensitivity, noise scale, noise std, basis)`` of the release for ``d_real`` features (all public)."""
    if mechanism == "laplace":
        sens = laplace_sensitivity(d_real, num_classes, quadratic_weight=quadratic_weight)
        scale = laplace_scale(sens, epsilon)
        noise_std = math.sqrt(2.0) * scale
        basis = (
            f"Laplace mechanism (Dwork et al. 2006) on (vec S1, upper triangle of S2) of the order-2 Taylor "
            f"cross-entropy (functional mechanism, Zhang et al. PVLDB 2012): features in [0, 1] plus bias 1, "
            f"λ={quadratic_weight:g} on S2, replace-one L1 sensitivity Δ₁ = 2 + d'·max(C/2, 2) + λ·d'(d'+3)/2 = {sens:g} "
            f"(d'={d_real}, C={num_classes}; "
            "tfdpmech.mechanisms.functional_head.sensitivity); released once; PSD projection, ridge and solve are post-processing"
        )
    else:
        sens = gaussian_sensitivity(num_classes, nonnegative=nonnegative,
                                    quadratic_weight=quadratic_weight)
        scale = gaussian_sigma(sens, epsilon, delta)
        noise_std = scale
        basis = (
            f"Gaussian mechanism on (vec S1, upper triangle of S2) of the order-2 Taylor cross-entropy: each "
            f"feature vector, bias included, clipped to L2 norm ≤ 1; joint replace-one L2 sensitivity "
            f"Δ₂ = {sens:.6g} (λ={quadratic_weight:g} on S2, C={num_classes}, {'non-negative' if nonnegative else 'any-sign'} "
            "features; tfdpmech.mechanisms.functional_head.sensitivity); σ from dp_accounting's exact Gaussian privacy curve "
            "(analytic Gaussian); released once; PSD projection, ridge and solve are post-processing"
        )
    return sens, scale, noise_std, basis
