"""The noise calibration Kang et al. 2020 claim: Theorem 1 (Eq. 9) and Theorem 3 (Eq. 12), and its accountant.

Kang, Liu, Niu, Tong, Zhang, Wang, "Input Perturbation: A New Paradigm between Central and Local
Differential Privacy", arXiv:2002.08570 (2020). Every σ and ε here is the paper's *claimed*
guarantee: the published proof has gaps (see ``docs/mechanisms/input_perturbation.md``), so the
ledger records no provable ε for it. The proven alternative is the per-record Gaussian mechanism
of :mod:`tfdpmech.accounting.gaussian`.
"""

from __future__ import annotations

import math
import warnings

from ...validation import (
    check_batch_size, check_choice, check_delta, check_epsilon, check_positive_int, check_positive_real,
)

__all__ = [
    "CONDITIONS",
    "paper_constant",
    "curvature_factor",
    "sigma_input_perturbation",
    "epsilon_paper_accountant",
    "paper_shape",
]

CONDITIONS = ("strong_convexity", "pl")


def paper_constant(epsilon, delta, kappa: float = 1.0) -> float:
    """The constant ``c`` of Eq. 9 that the proof of Theorem 1 implies: ``(8 + 4ε/ln(1/δ))/κ``.

    The paper never states ``c``. Its proof (Appendix A.1) bounds the per-step log moment with
    ``C >= ((n−1)/n)·sqrt(2Δ(ℓ(θ_T) − ℓ*))`` (Eqs. 27–28), composes T steps (Eqs. 30–31) and
    requires ``α_M(a) <= aε/2`` with ``e^{−aε/2} <= δ`` (Eq. 33, printed reversed); at the order
    ``a* = 2 ln(1/δ)/ε`` this gives the ``c`` above. ``κ = sqrt(2(ℓ(θ_T) − ℓ*))`` is the "constant"
    of Eq. 28, unknowable before training; the default κ = 1 is a convention, not a bound.

    Args:
        epsilon: target ε > 0.
        delta: δ ∈ (0, 1).
        kappa: the gap constant κ > 0.

    Returns:
        c > 0.

    Raises:
        ValueError / TypeError: ε <= 0, δ ∉ (0, 1), κ <= 0.
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    kappa = check_positive_real(kappa, "kappa")
    return (8.0 + 4.0 * epsilon / math.log(1.0 / delta)) / kappa


def curvature_factor(curvature, condition, paper_literal_pl) -> float:
    """The factor in the denominators of Eqs. 9 / 12: √Δ (or √μ), or 1 for Eq. 12 read literally."""
    check_choice(condition, "condition", CONDITIONS)
    curvature = check_positive_real(curvature, "curvature")
    if paper_literal_pl:
        if condition != "pl":
            raise ValueError("paper_literal_pl=True reproduces Eq. 12 of Theorem 3; pass condition='pl' with it")
        return 1.0  # Eq. 12 as printed: Eqs. 50-52 absorb √μ into the constant
    return math.sqrt(curvature)


def sigma_input_perturbation(epsilon, delta, n, T, G, curvature, *, condition: str = "strong_convexity",
                             c=None, kappa: float = 1.0, paper_literal_pl: bool = False) -> float:
    """Noise std of Theorem 1 (Eq. 9) or Theorem 3 (Eq. 12): claimed by the paper, not proven.

    ``σ² = c · G² · T · ln(1/δ) / (n(n−1) · sqrt(curvature) · ε²)``, with ``c`` from
    :func:`paper_constant` unless given. For ``condition="pl"`` the curvature is the PL constant μ
    (√μ in place of √Δ, as in the lower bound of Eq. 50, so that strong convexity, which implies PL
    with μ = Δ, gives the same σ); ``paper_literal_pl=True`` drops the factor as Eq. 12 prints it.

    Args:
        epsilon: target ε > 0.
        delta: δ ∈ (0, 1).
        n: number of training records (>= 2).
        T: number of full-batch gradient steps (>= 1).
        G: Lipschitz constant of the per-record loss in θ.
        curvature: strong-convexity constant Δ, or PL constant μ.
        condition: ``"strong_convexity"`` (Theorem 1) or ``"pl"`` (Theorem 3).
        c: the constant of Eq. 9; None means ``(8 + 4ε/ln(1/δ))/κ``.
        kappa: the gap constant κ (used only when ``c`` is None).
        paper_literal_pl: reproduce Eq. 12 literally (no √μ).

    Returns:
        σ, the per-coordinate noise standard deviation.

    Raises:
        ValueError / TypeError: ε <= 0, δ ∉ (0, 1), n < 2, T < 1, G, curvature, c or κ <= 0.

    Reference: Kang et al. 2020, Theorems 1 and 3.
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    n = check_positive_int(n, "n", minimum=2)
    T = check_positive_int(T, "T")
    G = check_positive_real(G, "G")
    factor = curvature_factor(curvature, condition, paper_literal_pl)
    c = paper_constant(epsilon, delta, kappa) if c is None else check_positive_real(c, "c")
    var = c * G**2 * T * math.log(1.0 / delta) / (n * (n - 1) * factor * epsilon**2)  # Eq. 9 / 12
    return math.sqrt(var)


def epsilon_paper_accountant(sigma, delta, n, t, G, curvature, *, kappa: float = 1.0,
                             condition: str = "strong_convexity", paper_literal_pl: bool = False) -> float:
    """ε after ``t`` gradient steps under the moment bound of Theorem 1's proof (Eqs. 24–33), Eq. 9 inverted.

    ``K = 2tG²/(n(n−1)κ·sqrt(curvature)·σ²)`` and ``ε(t) = K + 2·sqrt(K ln(1/δ))``, from the
    optimal moment order ``a = sqrt(ln(1/δ)/K)``. A claimed value (Theorem 1's proof), not proven.

    Args:
        sigma: the noise std (> 0).
        delta: δ ∈ (0, 1).
        n: number of training records (>= 2).
        t: completed gradient steps (>= 0); ε(0) = 0.
        G, curvature, kappa, condition, paper_literal_pl: as for :func:`sigma_input_perturbation`.

    Returns:
        ε(t) >= 0.

    Raises:
        ValueError / TypeError: invalid inputs.
    """
    sigma = check_positive_real(sigma, "sigma")
    delta = check_delta(delta)
    n = check_positive_int(n, "n", minimum=2)
    t = check_positive_int(t, "t", minimum=0)
    G, kappa = check_positive_real(G, "G"), check_positive_real(kappa, "kappa")
    factor = curvature_factor(curvature, condition, paper_literal_pl)
    if t == 0:
        return 0.0
    K = 2.0 * t * G**2 / (n * (n - 1) * kappa * factor * sigma**2)  # Eqs. 24-31 with C >= κ√Δ
    return K + 2.0 * math.sqrt(K * math.log(1.0 / delta))


def paper_shape(n: int, epochs: int, batch_size, *, strict: bool) -> tuple[int, int]:
    """``(n, T)`` that Theorems 1 / 3 see: ``(n, epochs)`` for full-batch descent (``batch_size`` None or >= n).

    A mini-batch is outside the proof: refused when ``strict``, else extrapolated with a warning
    (n -> batch_size in n(n-1), T -> all optimizer steps).

    Raises:
        ValueError: a mini-batch with ``strict``, or a batch_size larger than n.
    """
    if batch_size is None:
        return n, epochs
    check_batch_size(batch_size, n=n)
    if batch_size >= n:
        return n, epochs
    message = (
        f"batch_size={batch_size} < n={n}: the paper's proof is for full-batch gradient descent; pass "
        "batch_size=None (full batch) or assumptions=InputPerturbationAssumptions(strict=False) to "
        "extrapolate (n -> batch_size in n(n-1), T -> all "
        "optimizer steps, an extrapolation Theorem 1 does not cover)"
    )
    if strict:
        raise ValueError(message)
    warnings.warn(message, UserWarning, stacklevel=4)
    return max(batch_size, 2), epochs * -(-n // batch_size)
