"""Constants of L2-regularised logistic regression from public quantities only (Kang et al. 2020).

The Lipschitz constant G and strong convexity Δ of Theorem 1, the smoothness β ("L") and the
radius D of Theorem 2, for features with ‖x‖ <= R (§3.2 takes R = 1). The paper's theorems assume
a margin loss ℓ(yθᵀx) (§5.1), which is strongly convex only with an explicit L2 term: Δ = λ.
"""

from __future__ import annotations

import dataclasses
import math

from ...validation import check_choice, check_positive_int, check_positive_real

__all__ = ["G_CONVENTIONS", "L2_CONVENTIONS", "LogisticConstants", "logistic_constants"]

G_CONVENTIONS = ("full", "data_term")
L2_CONVENTIONS = ("half", "keras")


@dataclasses.dataclass(frozen=True)
class LogisticConstants:
    """Data-independent constants of ``φ(θ; x, y) + (λ/2)‖θ‖²`` with ``‖x‖ <= R``, ``‖θ‖ <= D``.

    Attributes:
        G: Lipschitz constant in θ (``R·sup|∇_s φ| + λD`` for ``g_convention="full"``).
        beta: smoothness in θ (``R²·sup φ'' + λ``).
        strong_convexity: Δ = λ (also the PL constant μ).
        theta_bound: D, the radius of the ball the iterates are projected onto.
        phi2: sup of φ'' on the logits (1/4 binary, 1/2 softmax).
        feature_norm_bound: R.
        l2: λ, in the (λ/2)‖θ‖² convention.
        keras_l2: the factor to pass to ``keras.regularizers.L2`` (= λ/2).
        num_classes: 2 (sigmoid, one logit) or M > 2 (softmax).
        g_convention: ``"full"`` or ``"data_term"``.
    """

    G: float
    beta: float
    strong_convexity: float
    theta_bound: float
    phi2: float
    feature_norm_bound: float
    l2: float
    keras_l2: float
    num_classes: int
    g_convention: str


def logistic_constants(l2, feature_norm_bound: float = 1.0, *, num_classes: int = 2, theta_bound=None,
                       g_convention: str = "full", l2_convention: str = "half") -> LogisticConstants:
    """G, smoothness, strong convexity and D of L2-regularised logistic regression (Theorems 1–2).

    Every constant depends on public quantities only (λ, R, M). ``D = sqrt(2 ln M / λ)``: the
    regularised objective is ``ln M`` at θ = 0 for any data, so ``(λ/2)‖θ*‖² <= ln M`` also for the
    noisy objective. Binary (sigmoid): ``sup|φ'| = 1``, ``sup φ'' = 1/4``. Softmax (M > 2): the
    per-record gradient ``x(p − e_y)ᵀ`` has Frobenius norm ``<= √2·R`` and the logit Hessian
    ``diag(p) − ppᵀ`` has norm ``<= 1/2``; the paper's margin-form theory does not cover it.

    Args:
        l2: the regularisation strength.
        feature_norm_bound: R, the public bound on ‖x‖.
        num_classes: 2 for binary logistic regression, M > 2 for multinomial.
        theta_bound: D; None means ``sqrt(2 ln M / λ)``.
        g_convention: ``"full"`` (``G = R·g + λD``, the literal theorem, default) or
            ``"data_term"`` (``G = R·g``: the regulariser gradient cancels between neighbours).
        l2_convention: ``"half"``: ``l2`` is λ of ``(λ/2)‖θ‖²`` (the paper's Δ); ``"keras"``:
            ``l2`` is the factor of ``keras.regularizers.L2(l2)``, which adds ``l2·‖θ‖²``, so λ = 2·l2.

    Returns:
        :class:`LogisticConstants`.

    Raises:
        ValueError / TypeError: l2 or R <= 0, num_classes < 2, unknown convention.
    """
    lam = check_positive_real(l2, "l2")
    check_choice(l2_convention, "l2_convention", L2_CONVENTIONS)
    if l2_convention == "keras":
        lam *= 2.0
    R = check_positive_real(feature_norm_bound, "feature_norm_bound")
    M = check_positive_int(num_classes, "num_classes", minimum=2)
    check_choice(g_convention, "g_convention", G_CONVENTIONS)
    D = math.sqrt(2.0 * math.log(M) / lam) if theta_bound is None else check_positive_real(theta_bound, "theta_bound")
    grad, phi2 = (1.0, 0.25) if M == 2 else (math.sqrt(2.0), 0.5)
    G = R * grad + (lam * D if g_convention == "full" else 0.0)
    return LogisticConstants(G=G, beta=R**2 * phi2 + lam, strong_convexity=lam, theta_bound=D, phi2=phi2,
                             feature_norm_bound=R, l2=lam, keras_l2=lam / 2.0, num_classes=M,
                             g_convention=g_convention)
