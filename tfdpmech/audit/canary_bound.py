"""The ε lower bound of a one-run audit (Steinke, Nasr & Jagielski 2023, Theorem 3 and Appendix D).

With r guesses about m canaries of which W are correct, Theorem 3 bounds, for an (ε, δ)-DP
training algorithm and every v,

    P[W ≥ v]  ≤  f(v) + 2·m·δ · max_{i ∈ {1..m}} (f(v − i) − f(v)) / i,
    f(v) := P[Binomial(r, e^ε / (e^ε + 1)) ≥ v].

:func:`p_value` is that tail for the observed W; :func:`epsilon_lower_bound` the largest ε whose
null hypothesis "(ε, δ)-DP" is rejected at level β = 1 − confidence. The audit around it is
:mod:`tfdpmech.audit.canary`.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from scipy import stats

__all__ = ["DEFAULT_CONFIDENCE", "p_value", "epsilon_lower_bound"]

DEFAULT_CONFIDENCE = 0.95

_EPS_SEARCH_MAX = 30.0  # all r guesses correct at 95 % gives ε_lb ≈ ln(r / 3): below 30 for any r < 10^12
_EPS_GRID = 0.25  # scan step for the first crossing before bisection
_EPS_TOL = 1e-6


# --- the bound (Theorem 3 / Appendix D) ---------------------------------------------------------
def _check_int(value, name: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_counts(correct, guesses, m) -> tuple[int, int, int]:
    m = _check_int(m, "m", minimum=1)
    guesses = _check_int(guesses, "guesses")
    correct = _check_int(correct, "correct")
    if guesses > m:
        raise ValueError(f"guesses={guesses} exceeds the number of canaries m={m}; at most one guess per canary")
    if correct > guesses:
        raise ValueError(f"correct={correct} exceeds guesses={guesses}; count only correct guesses")
    return correct, guesses, m


def _check_confidence(confidence) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real):
        raise TypeError(f"confidence must be a real number in (0, 1), got {confidence!r}")
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}; e.g. 0.95 for 95 %")
    return confidence


def _check_audit_delta(delta) -> float:
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
        raise TypeError(f"delta must be a real number in [0, 1), got {delta!r}")
    delta = float(delta)
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must lie in [0, 1), got {delta}; 0 for pure ε-DP, else the method's δ")
    return delta


def _p_values(correct: int, guesses: int, m: int, epsilons: np.ndarray, delta: float) -> np.ndarray:
    """Theorem 3's tail bound for every ε in ``epsilons`` (vectorised over ε)."""
    q = 1.0 / (1.0 + np.exp(-epsilons))  # accuracy of ε-DP randomized response
    tail = stats.binom.sf(correct - 1, guesses, q)  # f(v) = P[Binomial(r, q) ≥ v]
    if delta == 0.0 or correct == 0:
        return np.minimum(tail, 1.0)
    # f(v − i) − f(v) = P[v − i ≤ Binomial(r, q) < v] for i = 1..v, one column per ε
    pmf = stats.binom.pmf(np.arange(correct - 1, -1, -1)[:, None], guesses, q[None, :])
    alpha = np.max(np.cumsum(pmf, axis=0) / np.arange(1, correct + 1)[:, None], axis=0)
    return np.minimum(tail + 2.0 * m * delta * alpha, 1.0)


def _p_value(correct: int, guesses: int, m: int, epsilon: float, delta: float) -> float:
    return float(_p_values(correct, guesses, m, np.array([epsilon]), delta)[0])


def p_value(correct: int, guesses: int, m: int, epsilon: float, delta: float = 0.0) -> float:
    """Theorem 3's bound on P[W ≥ correct] if the training is (ε, δ)-DP (Steinke et al., App. D).

    Args:
        correct: v, the number of correct guesses.
        guesses: r = k₊ + k₋, the number of guesses (abstentions excluded).
        m: the number of canaries, each included with probability ½.
        epsilon: ε ≥ 0 of the null hypothesis.
        delta: δ ∈ [0, 1) of the null hypothesis (0: pure ε-DP).

    Returns:
        f(v) + 2mδ·max_i (f(v−i) − f(v))/i, capped at 1.

    Raises:
        TypeError / ValueError: counts that are not integers with 0 ≤ correct ≤ guesses ≤ m,
            ε < 0 or not finite, δ outside [0, 1).
    """
    correct, guesses, m = _check_counts(correct, guesses, m)
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) or not math.isfinite(epsilon) \
            or epsilon < 0:
        raise ValueError(f"epsilon must be a finite real number >= 0, got {epsilon!r}")
    return _p_value(correct, guesses, m, float(epsilon), _check_audit_delta(delta))


def epsilon_lower_bound(correct: int, guesses: int, m: int, *, delta: float = 0.0,
                        confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The ε lower bound at ``confidence`` from ``correct`` of ``guesses`` guesses on m canaries.

    Steinke et al., Theorem 3 with the p-value of their Appendix D: the result is the first ε at
    which the p-value reaches β = 1 − confidence, found by a scan in steps of 0.25 followed by
    bisection to 1e-6. Every ε below it is rejected ("not (ε, δ)-DP") at level β. For δ = 0 the
    p-value is a binomial tail, increasing in ε, so this is the largest rejected ε; for δ > 0
    taking the first crossing keeps the bound conservative even where the δ term is not monotone.

    Args:
        correct: v, the number of correct guesses.
        guesses: r = k₊ + k₋.
        m: the number of canaries (each included with probability ½), which enters through 2mδ.
        delta: δ of the hypotheses tested (0 for pure ε-DP claims; the method's δ otherwise).
        confidence: 1 − β, e.g. 0.95.

    Returns:
        ε_lb ≥ 0 (0 when not even ε = 0 is rejected).

    Raises:
        TypeError / ValueError: bad counts, δ outside [0, 1), confidence outside (0, 1).
    """
    correct, guesses, m = _check_counts(correct, guesses, m)
    delta = _check_audit_delta(delta)
    beta = 1.0 - _check_confidence(confidence)

    if _p_value(correct, guesses, m, 0.0, delta) >= beta:
        return 0.0
    # first crossing on a grid of step 0.25, then bisection inside that step
    grid = np.arange(0.0, _EPS_SEARCH_MAX + _EPS_GRID, _EPS_GRID)
    # the δ term only adds, so the binomial tail alone (cheap) crosses no earlier than the full bound
    crossed = np.flatnonzero(_p_values(correct, guesses, m, grid, 0.0) >= beta)
    if crossed.size == 0:  # cannot happen for correct <= guesses (f(v) → 1 as ε → ∞)
        return float(grid[-1])
    if delta > 0.0:
        grid = grid[:crossed[0] + 1]
        crossed = np.flatnonzero(_p_values(correct, guesses, m, grid, delta) >= beta)
    lo, hi = float(grid[crossed[0] - 1]), float(grid[crossed[0]])
    while hi - lo > _EPS_TOL:
        mid = 0.5 * (lo + hi)
        if _p_value(correct, guesses, m, mid, delta) < beta:
            lo = mid
        else:
            hi = mid
    return lo
