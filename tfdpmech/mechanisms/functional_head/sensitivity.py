"""Replace-one sensitivities of the functional head's statistics (S1, S2).

The head's private data enter only through two sums over the n private records
(Zhang et al., "Functional Mechanism", PVLDB 2012, §4; the order-2 Taylor
polynomial of the per-class sigmoid cross-entropy, AdLM Eq. 25):

    S1 = Σ_i p_i (½·1 − y_i)ᵀ        (d × C, one column per class)
    S2 = Σ_i p_i p_iᵀ                 (d × d, shared by the C classes, symmetric)

where ``p_i ∈ R^d`` is the record's feature vector with the bias feature
appended (its last coordinate) and ``y_i`` its one-hot label. The released
vector is ``v = (vec S1, triu S2)``: S2 is symmetric, so only its upper
triangle (diagonal included, d(d+1)/2 numbers) is released and the lower one is
mirrored. Replacing one record ``(p, y)`` by ``(p', y')`` changes ``v`` by
``v(p, y) − v(p', y')``; the sensitivities below are the exact suprema of its
L1 (for C >= 4) and L2 norms over the feature domain (the tests compute them by brute force).
The released S2 may carry a public weight λ (``quadratic_weight``): the head releases
``(vec S1, λ·triu S2)`` and divides the noisy S2 by λ afterwards (post-processing), which moves
noise from S1 to S2 when λ < 1.

**Laplace (L1), features in [0, 1] per coordinate, bias = 1.** With ``a = p``,
``b = p'`` on the d' = d − 1 real coordinates and ``u = ½·1 − y`` (every entry ±½),
``‖Δv‖₁ = ‖ΔS1‖₁ + λ‖Δ triu S2‖₁`` and the two parts are bounded separately:

* S1: for two different labels, the two classes where ``y`` and ``y'`` differ contribute
  ``½(a_j + b_j)`` each and the other C − 2 classes ``½|a_j − b_j|`` (the equal-label case is never
  larger, since ``a + b ≥ |a − b|``); this is convex in (a_j, b_j), so at most ``max(C/2, 2)`` per
  real feature, plus 2 for the bias row: ``‖ΔS1‖₁ ≤ 2 + d'·max(C/2, 2)``.
* S2 triangle: ``Σ_{j≤k} |a_j a_k − b_j b_k|`` over the real coordinates plus ``Σ_j |a_j − b_j|``
  (the bias column; the bias–bias entry does not change); each term is at most 1, so
  ``‖Δ triu S2‖₁ ≤ d'(d' + 1)/2 + d' = d'(d' + 3)/2``.

For C >= 4 both bounds are attained by the same pair (``a = 1``, ``b = 0``, different labels), so

    Δ₁ = 2 + d'·C/2 + λ·d'(d' + 3)/2      (= 2 + d'(C + 3)/2 + d'²/2 at λ = 1)

is the exact supremum; for C < 4 it is an upper bound.

**Gaussian (L2), ‖p‖₂ ≤ 1 (bias included).** With ``c = pᵀp'`` and unit norms
(the supremum is on the sphere),
``‖ΔS1‖²_F = C/2 − 2c·uᵀu'`` where ``uᵀu' = C/4`` (same label) or
``(C − 4)/4`` (different labels), and
``‖Δ triu S2‖² ≤ ‖ppᵀ − p'p'ᵀ‖²_F = 2(1 − c²)``, with equality when
``ppᵀ − p'p'ᵀ`` is diagonal (e.g. ``p = (α, β)``, ``p' = (β, α)``, for which
``c = 2αβ`` takes every value in [−1, 1]). Hence

    Δ₂² = max over c ∈ [c_min, 1] of max( C(1 − c)/2,  C/2 − c(C − 4)/2 ) + 2λ²(1 − c²),

with ``c_min = −1`` for features of any sign and ``c_min = 0`` for non-negative
features (e.g. sigmoid or clipped units, then normalised). Both branches are
concave quadratics in c, so the maximum is at a clipped vertex. For C = 10, λ = 1:
Δ₂ = √10 (any sign) and √7 (non-negative).
"""

from __future__ import annotations

import math

from ...validation import check_positive_int, check_positive_real

__all__ = ["laplace_sensitivity", "gaussian_sensitivity", "num_released"]


def laplace_sensitivity(num_features: int, num_classes: int, *, quadratic_weight: float = 1.0) -> float:
    """L1 sensitivity Δ₁ of ``(vec S1, λ·triu S2)`` under replace-one, features in [0, 1].

    ``Δ₁ = 2 + d'·max(C/2, 2) + λ·d'(d' + 3)/2``: the supremum of the S1 part plus λ times the
    supremum of the S2 part (triangle inequality). For C >= 4 both suprema are attained by the
    same pair (``p = 1``, ``p' = 0`` on the real features, different labels), so the bound is
    exact; for λ = 1 it is ``2 + d'(C + 3)/2 + d'²/2``. For C < 4 it is a valid upper bound.

    Args:
        num_features: d', the number of real features (the bias feature, fixed at 1, is not counted).
        num_classes: C >= 2.
        quadratic_weight: λ > 0, the weight of the released S2.

    Raises:
        TypeError / ValueError: non-integer counts, d' < 1, C < 2 or λ <= 0.
    """
    d = check_positive_int(num_features, "num_features")
    c = check_positive_int(num_classes, "num_classes", minimum=2)
    lam = check_positive_real(quadratic_weight, "quadratic_weight")
    return 2.0 + d * max(c / 2.0, 2.0) + lam * d * (d + 3) / 2.0


def gaussian_sensitivity(num_classes: int, *, nonnegative: bool = False, quadratic_weight: float = 1.0) -> float:
    """L2 sensitivity Δ₂ of ``(vec S1, λ·triu S2)`` under replace-one, every ‖p‖₂ ≤ 1 (bias included).

    Independent of the feature dimension (the clip bounds the whole vector).

    Args:
        num_classes: C >= 2.
        nonnegative: every feature coordinate is >= 0 (then ``pᵀp' >= 0``, a smaller bound).
        quadratic_weight: λ > 0, the weight of the released S2 (the S2 term is multiplied by λ²).

    Returns:
        Δ₂ (exact supremum; derivation in the module docstring).
    """
    c_cls = check_positive_int(num_classes, "num_classes", minimum=2)
    lam2 = check_positive_real(quadratic_weight, "quadratic_weight") ** 2
    lo = 0.0 if nonnegative else -1.0

    def same(c):  # equal labels: ‖ΔS1‖² = C(1 − c)/2
        return c_cls * (1.0 - c) / 2.0 + 2.0 * lam2 * (1.0 - c * c)

    def diff(c):  # different labels: ‖ΔS1‖² = C/2 − c(C − 4)/2
        return c_cls / 2.0 - c * (c_cls - 4) / 2.0 + 2.0 * lam2 * (1.0 - c * c)

    def clip(c):
        return min(max(c, lo), 1.0)

    best = max(same(clip(-c_cls / (8.0 * lam2))), diff(clip(-(c_cls - 4) / (8.0 * lam2))),
               same(lo), diff(lo), same(1.0), diff(1.0))
    return math.sqrt(best)


def num_released(num_features: int, num_classes: int) -> int:
    """How many numbers the release holds: ``d·C + d(d+1)/2`` with ``d = d' + 1`` (bias)."""
    d = check_positive_int(num_features, "num_features") + 1
    return d * int(num_classes) + d * (d + 1) // 2
