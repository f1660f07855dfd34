"""Chebyshev (and related) polynomial surrogates of the sigmoid, for pCDBN's energy (§2.3, §3.1, §3.4).

Phan, Wu, Dou, "Preserving Differential Privacy in Convolutional Deep Belief Networks",
Machine Learning 2017 (corrected version). Our reading of the paper's polynomial:
``docs/mechanisms/pcdbn.md``.

Two families are kept apart on purpose, because the polynomial §3.1 prints is not Eq. 10 applied to σ:

* ``"chebyshev_sigmoid"``: the truncated Chebyshev series of σ on [−1, 1] (Eq. 10), computed with
  ``numpy.polynomial.chebyshev`` by Gauss–Chebyshev quadrature, to any degree.
* ``"paper_smoothstep"``: the polynomial the paper prints and the authors' code uses,
  ``(−5X⁷ + 21X⁵ − 35X³ + 35X + 16)/32`` and its lower-degree relatives. It is *not* the Chebyshev
  truncation of σ: it is a maximally flat step from 0 at X = −1 to 1 at X = +1 (sup distance from
  σ on [−1, 1] is 0.322). The code's degree-5 polynomial is broken (p(0) = 5); the consistent
  smoothstep ``(3X⁵ − 10X³ + 15X + 8)/16`` is used instead.

Also ``"taylor"`` (the truncated Taylor expansion of §4.1.2; the paper prints the series of tanh x,
used here for σ(x) = ½ + ½tanh(x/2) at 0) and ``"piecewise"`` (``c1·X + c2``; §4.1.2 gives no
constants, so the degree-1 Chebyshev fit is the default).

Coefficients ``alpha`` are always in the monomial basis, ascending powers, float64.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.polynomial.chebyshev as C
import tensorflow as tf

from ...validation import check_choice, check_positive_int

__all__ = [
    "APPROXIMATIONS",
    "PAPER_SMOOTHSTEP",
    "PAPER_SMOOTHSTEP_DENOMINATORS",
    "sigmoid",
    "check_degree",
    "chebyshev_coefficients",
    "chebyshev_to_monomial",
    "sigmoid_chebyshev_alpha",
    "approximation_alpha",
    "sup_error",
    "chebyshev_error_bounds",
    "poly_eval_np",
    "poly_eval",
]

APPROXIMATIONS = ("paper_smoothstep", "chebyshev_sigmoid", "taylor", "piecewise")

# Numerators over the denominators below, ascending powers (the L = 7 one is §3.1's instance of Eq. 14;
# L = 2, 3 are the authors' code, L = 5 the consistent smoothstep).
_SMOOTHSTEP_NUMERATORS = {
    2: (3.0, 2.0, -1.0),  # (−X² + 2X + 3)/4, code
    3: (2.0, 3.0, 0.0, -1.0),  # (−X³ + 3X + 2)/4, code
    5: (8.0, 15.0, 0.0, -10.0, 0.0, 3.0),  # (3X⁵ − 10X³ + 15X + 8)/16, NOT the code's broken L = 5
    7: (16.0, 35.0, 0.0, -35.0, 0.0, 21.0, 0.0, -5.0),  # paper §3.1, Eq. 14 instance
}
PAPER_SMOOTHSTEP_DENOMINATORS = {2: 4.0, 3: 4.0, 5: 16.0, 7: 32.0}
PAPER_SMOOTHSTEP = {
    L: np.asarray(num, dtype=np.float64) / PAPER_SMOOTHSTEP_DENOMINATORS[L] for L, num in _SMOOTHSTEP_NUMERATORS.items()
}
PIECEWISE_DEFAULT = (0.2356, 0.5)  # (c1, c2): the L = 1 Chebyshev fit (§4.1.2 gives no values)


def sigmoid(x):
    """The logistic function in float64 numpy."""
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


def check_degree(degree, name: str = "degree") -> int:
    """Check a polynomial degree L is an integer >= 1.

    Raises:
        TypeError: not an integer.
        ValueError: L < 1.
    """
    try:
        return check_positive_int(degree, name, minimum=1)
    except ValueError as exc:
        raise ValueError(f"{exc}; the truncated expansion needs degree >= 1 (the paper uses L = 7, L >= 3 suffices)") from None


def chebyshev_coefficients(f=sigmoid, degree: int = 7, n_nodes: int = 4096) -> np.ndarray:
    """Chebyshev series coefficients ``A_0..A_L`` of ``f`` on [−1, 1] in the Eq. 10 convention.

    ``A_k = (2/π) ∫ f(x) T_k(x) / √(1−x²) dx`` by Gauss–Chebyshev quadrature
    (``numpy.polynomial.chebyshev.chebgauss``); the series is ``½A_0 + Σ_{k≥1} A_k T_k``.

    Args:
        f: a vectorised function on [−1, 1] (default σ).
        degree: L >= 1.
        n_nodes: quadrature nodes (exact for polynomials of degree < 2·n_nodes).

    Returns:
        float64 array of length L + 1.

    Raises:
        ValueError / TypeError: degree < 1, n_nodes < degree + 1, or f not finite on the nodes.
    """
    degree = check_degree(degree)
    n_nodes = check_positive_int(n_nodes, "n_nodes", minimum=degree + 1)
    x, w = C.chebgauss(n_nodes)  # w = π/N
    fx = np.asarray(f(x), dtype=np.float64)
    if fx.shape != x.shape or not np.all(np.isfinite(fx)):
        raise ValueError("f must map an array of nodes in [-1, 1] to finite values of the same shape")
    return (2.0 / np.pi) * (C.chebvander(x, degree) * (w * fx)[:, None]).sum(axis=0)  # Eq. 10


def chebyshev_to_monomial(A) -> np.ndarray:
    """Monomial coefficients ``alpha`` of ``½A_0 + Σ A_k T_k`` (Eq. 10; Eqs. 13–14 drop the ½ on A_0)."""
    A = np.array(A, dtype=np.float64, copy=True)
    if A.ndim != 1 or A.size == 0:
        raise ValueError(f"A must be a non-empty 1-D coefficient array, got shape {A.shape}")
    A[0] *= 0.5
    return C.cheb2poly(A)


def sigmoid_chebyshev_alpha(degree: int, n_nodes: int = 4096) -> np.ndarray:
    """Monomial coefficients of the degree-L Chebyshev truncation of σ on [−1, 1] (Eq. 10, then Eq. 14)."""
    alpha = chebyshev_to_monomial(chebyshev_coefficients(sigmoid, degree, n_nodes))
    alpha[2::2] = 0.0  # σ − ½ is odd: even A_k (k >= 2) vanish; drop quadrature round-off
    return alpha


def approximation_alpha(approx: str = "paper_smoothstep", degree: int = 7, *, piecewise=PIECEWISE_DEFAULT) -> np.ndarray:
    """Monomial coefficients of a sigmoid surrogate on [−1, 1].

    Args:
        approx: one of :data:`APPROXIMATIONS`.
        degree: L >= 1; ``paper_smoothstep`` exists for L ∈ {2, 3, 5, 7}; ``piecewise`` is L = 1.
        piecewise: ``(c1, c2)`` of ``c1·X + c2`` for ``approx="piecewise"``.

    Returns:
        float64 array ``alpha[0..L]``.

    Raises:
        ValueError: unknown ``approx``, degree < 1, or a degree the preset does not have.
    """
    check_choice(approx, "approx", APPROXIMATIONS)
    degree = check_degree(degree)
    if approx == "paper_smoothstep":
        if degree not in PAPER_SMOOTHSTEP:
            raise ValueError(
                f"degree={degree} has no paper_smoothstep preset; use one of {sorted(PAPER_SMOOTHSTEP)} "
                "or approx='chebyshev_sigmoid' for any degree"
            )
        return PAPER_SMOOTHSTEP[degree].copy()
    if approx == "chebyshev_sigmoid":
        return sigmoid_chebyshev_alpha(degree)
    if approx == "taylor":
        # σ(x) = ½ + ½ tanh(x/2) = ½ + x/4 − x³/48 + x⁵/480 − 17x⁷/80640 + ...
        series = {0: 0.5, 1: 0.25, 3: -1.0 / 48.0, 5: 1.0 / 480.0, 7: -17.0 / 80640.0, 9: 31.0 / 1451520.0}
        if degree > max(series):
            raise ValueError(f"taylor surrogate is tabulated up to degree {max(series)}, got {degree}")
        alpha = np.zeros(degree + 1)
        for k, v in series.items():
            if k <= degree:
                alpha[k] = v
        return alpha
    if degree != 1:
        raise ValueError(f"piecewise (pCDBN_PW) is linear: pass degree=1, got {degree}")
    c1, c2 = (float(c) for c in piecewise)
    return np.array([c2, c1])


def poly_eval_np(x, alpha) -> np.ndarray:
    """Evaluate ``Σ alpha_l x^l`` in float64 numpy (Horner)."""
    return np.polynomial.polynomial.polyval(np.asarray(x, dtype=np.float64), np.asarray(alpha, dtype=np.float64))


def sup_error(alpha, f=sigmoid, n_points: int = 20001) -> float:
    """Measured ``max_{x∈[−1,1]} |f(x) − Σ alpha_l x^l|`` on a fine grid."""
    x = np.linspace(-1.0, 1.0, n_points)
    return float(np.max(np.abs(np.asarray(f(x), dtype=np.float64) - poly_eval_np(x, alpha))))


def chebyshev_error_bounds(degree: int, f=sigmoid, n_nodes: int = 4096) -> dict:
    """Lemma 3's scalar quantities (Eqs. 20–21) next to the measured error, to help choose L.

    Lemma 3 (§3.4, Eq. 19) is qualitative: its lower bound is 0 for odd L with σ, it ignores
    the |a| factor of each unit's energy and the sum over records, and it does not apply to the
    smoothstep polynomial.

    Returns:
        dict with ``lower_bound`` = (π/4)|A_{L+1}|, ``lebesgue_factor`` = 4 + (4/π²) ln L,
        ``upper_bound`` = lebesgue_factor × sup error of the truncation, ``sup_error_chebyshev``
        (the truncation of ``f``) and, for σ, ``sup_error_paper_smoothstep`` when L has a preset.
    """
    degree = check_degree(degree)
    A = chebyshev_coefficients(f, degree + 1, n_nodes)
    alpha = chebyshev_to_monomial(A[: degree + 1])
    measured = sup_error(alpha, f)
    factor = 4.0 + (4.0 / math.pi**2) * math.log(degree)
    out = {
        "degree": degree,
        "lower_bound": (math.pi / 4.0) * abs(float(A[degree + 1])),  # Eq. 20
        "lebesgue_factor": factor,  # Eq. 21
        "upper_bound": factor * measured,
        "sup_error_chebyshev": measured,
    }
    if f is sigmoid and degree in PAPER_SMOOTHSTEP:
        out["sup_error_paper_smoothstep"] = sup_error(PAPER_SMOOTHSTEP[degree], f)
    return out


def poly_eval(x, alpha, *, clip_input: bool = True, clip_output: bool = False):
    """Evaluate ``Σ alpha_l X^l`` on a tensor by Horner's rule (X clipped to [−1, 1], where §3.1's Z puts it).

    Args:
        x: a float tensor.
        alpha: monomial coefficients, ascending (numpy or tensor).
        clip_input: clip X to [−1, 1] first; the smoothstep turns down outside it.
        clip_output: clip the result to [0, 1] (the authors' code).

    Returns:
        A tensor of the dtype and shape of ``x``.
    """
    x = tf.convert_to_tensor(x)
    alpha = tf.cast(alpha, x.dtype)
    if clip_input:
        x = tf.clip_by_value(x, -1.0, 1.0)
    n = alpha.shape[0]
    out = tf.zeros_like(x) + alpha[n - 1]
    for l in range(n - 2, -1, -1):
        out = out * x + alpha[l]
    if clip_output:
        out = tf.clip_by_value(out, 0.0, 1.0)
    return out
