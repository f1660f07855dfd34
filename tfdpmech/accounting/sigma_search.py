"""The one search for the smallest noise multiplier σ that meets a target ε, given any ε(σ).

Every calibration of the package that has no closed form (DP-SGD's RDP run, Poisson DP-SGD by PLD
or RDP, one Gaussian mechanism by RDP or PLD) calls :func:`smallest_sigma` with its own ε(σ), which
must be decreasing in σ. The search brackets the root of ``ε(σ) − ε_target`` by multiplying σ by a
constant factor, solves it by Brent's method (``scipy.optimize.brentq``, as
``dp_accounting.calibrate_dp_mechanism`` does), then steps up to the certified side of the root:
the σ returned always has ``ε(σ) <= ε_target``. :class:`NotCertifiableError` says that no σ does.
"""

from __future__ import annotations

import math
from typing import Callable

from scipy import optimize

__all__ = ["NotCertifiableError", "smallest_sigma"]

LEVEL_OFF = 0.99  # ε shrinking by less than 1 % when σ is multiplied: the bound has levelled off
STEPS_UP = 8  # tolerance steps taken towards the certified side of Brent's root


class NotCertifiableError(ValueError):
    """No noise multiplier certifies the target ε at this δ, sampling rate and number of steps (or, for
    AdLM's per-record mode, its batch-calibrated noise proves more than the target at this batch size).

    A ``ValueError`` (raised before anything trains); ``tfdpmech compare`` reports such a run as
    skipped, with this message, and goes on with the others.
    """


def smallest_sigma(epsilon_of: Callable[[float], float], epsilon: float, *, lower: float = 1.0, upper: float = 1.0,
                   factor: float = 2.0, max_sigma: float, max_shrinks: int, tol: float = math.inf,
                   relative_tol: float, stop_on_level_off: bool = False,
                   not_certifiable: Callable[[float], Exception]) -> float:
    """The smallest σ (within the tolerance) with ``epsilon_of(σ) <= epsilon``.

    Args:
        epsilon_of: ε as a function of σ, decreasing; an error it raises counts as ``ε = inf``.
        epsilon: the target ε.
        lower, upper: the starting bracket (``upper`` is tried first).
        factor: the bracket grows (σ too small) or shrinks (σ more than enough) by this factor.
        max_sigma: give up once the bracket's upper end would pass it.
        max_shrinks: at most this many shrinks; then the last certified σ is returned.
        tol, relative_tol: Brent's tolerance on σ is ``min(tol, relative_tol · lower end of the bracket)``.
        stop_on_level_off: give up as soon as one growth lowers ε by less than 1 %.
        not_certifiable: builds the exception raised on giving up, from the smallest ε reached.

    Returns:
        σ > 0 with ``epsilon_of(σ) <= epsilon``.
    """
    def eps_of(sigma):
        try:
            return epsilon_of(sigma)
        except (ValueError, OverflowError, FloatingPointError):  # the accountant's numerics break down
            return math.inf

    lo, hi = lower, upper
    reached = eps_of(hi)
    if reached > epsilon:  # grow σ until the target is met
        previous = reached
        while True:
            lo, hi = hi, hi * factor
            if hi > max_sigma:
                raise not_certifiable(reached)
            current = eps_of(hi)
            if current <= epsilon:
                break
            if stop_on_level_off and current >= previous * LEVEL_OFF:
                raise not_certifiable(min(reached, current))
            reached, previous = min(reached, current), current
    if eps_of(lo) <= epsilon:  # shrink σ until the target is exceeded
        hi = lo
        for _ in range(max_shrinks):
            lo = lo / factor
            if eps_of(lo) > epsilon:
                break
            hi = lo
        else:  # the target is met with almost no noise
            return hi

    step = min(tol, relative_tol * lo)
    try:
        sigma = float(optimize.brentq(lambda s: eps_of(s) - epsilon, lo, hi, xtol=step))
    except (ValueError, RuntimeError):  # pragma: no cover - no sign change found: keep the certified end
        sigma = hi
    for _ in range(STEPS_UP):  # step up to the certified side of the root
        if eps_of(sigma) <= epsilon:
            return sigma
        sigma = min(hi, sigma + step)
    return hi
