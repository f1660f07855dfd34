"""Accounting of Poisson-sampled DP-SGD (:mod:`tfdpmech.mechanisms.dpsgd.runs.poisson`): ε ↔ σ in q and steps,
proven.

:func:`poisson_dpsgd_epsilon` composes ``steps`` Poisson-subsampled Gaussian mechanisms (sampling
probability q, noise multiplier σ) with ``dp_accounting``'s PLD accountant (pessimistic, Koskela,
Jälkö & Honkela, AISTATS 2020; Doroshenko et al., "Connect the Dots", PETS 2022) or its RDP
accountant; :func:`poisson_dpsgd_noise_multiplier` finds the smallest σ for a target ε with
:func:`~tfdpmech.accounting.sigma_search.smallest_sigma`. Arguments: the noise multiplier (or target
ε), then δ, then ``q=``, ``steps=``, ``accountant=`` as keywords.
"""

from __future__ import annotations

import functools
import math
import numbers

from ..validation import check_choice, check_delta, check_epsilon, check_positive_int
from .dpsgd import dpsgd_event
from .gaussian import require_dp_accounting
from .rdp_orders import rdp_epsilon
from .sigma_search import NotCertifiableError, smallest_sigma

__all__ = [
    "ACCOUNTANTS",
    "ACCOUNTANT_NAMES",
    "PLD_DISCRETIZATION",
    "SIGMA_MAX",
    "check_sampling_probability",
    "pld_discretization",
    "poisson_dpsgd_epsilon",
    "poisson_dpsgd_noise_multiplier",
]

_PURPOSE = "DP-SGD accounting"

# PLD (Koskela, Jälkö & Honkela, AISTATS 2020; Doroshenko et al., "Connect the Dots", PETS 2022) with
# pessimistic discretisation is an upper bound on ε; a 1e-3 value discretisation (the library's
# default is 1e-4) makes one calibration ~10x faster and changed σ by < 1 % in MNIST-sized runs.
ACCOUNTANTS = ("pld", "rdp")
ACCOUNTANT_NAMES = {
    "pld": "dp_accounting PLD accountant (pessimistic, discretisation 1e-3, finer below ε = 0.5, "
           "add-or-remove-one adjacency)",
    "rdp": "dp_accounting RDP accountant (add-or-remove-one adjacency)",
}
PLD_DISCRETIZATION = 1e-3
SIGMA_MAX = 1e4  # the largest noise multiplier the Poisson calibration tries


def check_sampling_probability(q, name: str = "sampling_probability") -> float:
    """Check the Poisson sampling probability q lies in (0, 1].

    Raises:
        TypeError: not a real number.
        ValueError: q <= 0, q > 1, NaN or inf.
    """
    if isinstance(q, bool) or not isinstance(q, numbers.Real):
        raise TypeError(f"{name} must be a real number in (0, 1], got {type(q).__name__} {q!r}")
    q = float(q)
    if not (math.isfinite(q) and 0.0 < q <= 1.0):
        raise ValueError(
            f"{name} must lie in (0, 1], got {q}; it is the probability that a record joins a step's batch, "
            "q = expected_batch_size / n (e.g. 1000 / 7000)"
        )
    return q


def _check_steps(steps) -> int:
    return check_positive_int(steps, "steps")


def _pld_accountant(dp_accounting, interval: float = PLD_DISCRETIZATION):
    return dp_accounting.pld.PLDAccountant(value_discretization_interval=interval)


def pld_discretization(coarse_epsilon: float) -> float:
    """The PLD value discretisation used for a run whose ε at discretisation 1e-3 is ``coarse_epsilon``.

    1e-3 for ε >= 0.5; below, ``min(1e-4, ε/100)`` (at least 1e-6), so the pessimistic rounding stays
    small next to ε (at ε ≈ 0.01 a 1e-3 grid overstates ε by about 50 %).
    """
    if coarse_epsilon >= 0.5:
        return PLD_DISCRETIZATION
    return max(1e-6, min(1e-4, coarse_epsilon / 100.0))


@functools.lru_cache(maxsize=2048)
def _epsilon_cached(noise_multiplier: float, q: float, steps: int, delta: float, accountant: str,
                    at_most: float = math.inf) -> float:
    # at_most: a calibration's target for the RDP accountant (exact when ε <= at_most; see rdp_orders)
    dp_accounting = require_dp_accounting(_PURPOSE)
    event = dpsgd_event(dp_accounting, noise_multiplier, q, steps)
    if accountant == "rdp":
        return rdp_epsilon(dp_accounting, event, delta, at_most)
    epsilon = float(_pld_accountant(dp_accounting).compose(event).get_epsilon(delta))
    if pld_discretization(epsilon) < PLD_DISCRETIZATION:
        fine = _pld_accountant(dp_accounting, pld_discretization(epsilon))
        epsilon = min(epsilon, float(fine.compose(event).get_epsilon(delta)))  # both are upper bounds
    return epsilon


def poisson_dpsgd_epsilon(noise_multiplier: float, delta: float, *, q: float, steps: int,
                          accountant: str = "pld") -> float:
    """ε of ``steps`` Poisson-subsampled Gaussian steps (noise multiplier σ, sampling probability q).

    Args:
        noise_multiplier: σ = noise standard deviation / clipping norm (>= 0).
        delta: δ in (0, 1).
        q: sampling probability in (0, 1].
        steps: number of DP-SGD steps.
        accountant: ``"pld"`` (tighter) or ``"rdp"``.

    Returns:
        The accountant's ε at δ (``inf`` for σ = 0).

    Raises:
        TypeError / ValueError: bad arguments. ImportError: dp-accounting is missing.
    """
    if isinstance(noise_multiplier, bool) or not isinstance(noise_multiplier, numbers.Real):
        raise TypeError(f"noise_multiplier must be a real number >= 0, got {noise_multiplier!r}")
    sigma = float(noise_multiplier)
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"noise_multiplier must be finite and >= 0, got {sigma}")
    q = check_sampling_probability(q, "q")
    steps = _check_steps(steps)
    delta = check_delta(delta)
    accountant = check_choice(accountant, "accountant", ACCOUNTANTS)
    if sigma == 0:
        return math.inf
    return _epsilon_cached(sigma, q, steps, delta, accountant)


def poisson_dpsgd_noise_multiplier(epsilon: float, delta: float, *, q: float, steps: int, accountant: str = "pld",
                                   tol: float = 1e-4) -> float:
    """Smallest σ (within ``tol``) whose Poisson DP-SGD run meets (ε, δ); ε(σ) <= ε is guaranteed.

    Brackets the root of ``ε(σ) − ε_target`` by doubling / halving from σ = 1 and solves it with
    :func:`~tfdpmech.accounting.sigma_search.smallest_sigma` on :func:`poisson_dpsgd_epsilon`, which is
    decreasing in σ.

    Raises:
        ValueError: ε <= 0, δ not in (0, 1), q not in (0, 1], steps < 1, or a target ε that the
            accountant cannot certify for this δ and number of steps (the message says what to change).
        ImportError: dp-accounting is missing.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    q = check_sampling_probability(q, "q")
    steps = _check_steps(steps)
    accountant = check_choice(accountant, "accountant", ACCOUNTANTS)
    if not (isinstance(tol, numbers.Real) and 0 < tol < 1):
        raise ValueError(f"tol must lie in (0, 1), got {tol!r}")
    require_dp_accounting(_PURPOSE)
    return _calibrate_poisson(epsilon, delta, q, steps, accountant, float(tol))


@functools.lru_cache(maxsize=512)
def _calibrate_poisson(epsilon, delta, q, steps, accountant, tol) -> float:
    at_most = epsilon if accountant == "rdp" else math.inf  # RDP: exact where ε <= target, the same root

    def eps_of(sigma):  # refines the PLD grid at small ε, which a fixed accountant would not
        return _epsilon_cached(float(sigma), q, steps, delta, accountant, at_most)

    def not_certifiable(best):
        return NotCertifiableError(
            f"epsilon={epsilon:g} cannot be certified at delta={delta:g} for {steps} steps with sampling "
            f"probability q={q:.4g} by the {accountant.upper()} accountant (the smallest ε reached, with noise "
            f"multiplier up to {SIGMA_MAX:g}, is {best:.4g}); raise epsilon or delta, or train fewer steps"
        )

    # ε(σ) is decreasing (the grid switch only lowers it), so the root is the smallest σ meeting ε
    return smallest_sigma(eps_of, epsilon, max_sigma=SIGMA_MAX, max_shrinks=40, tol=tol, relative_tol=0.25,
                          not_certifiable=not_certifiable)
