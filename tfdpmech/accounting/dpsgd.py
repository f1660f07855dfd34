"""DP-SGD accounting with ``dp_accounting``: ε ↔ noise multiplier σ for a training run.

DP-SGD (Abadi et al., "Deep Learning with Differential Privacy", CCS 2016) adds N(0, σ²C²) to the
sum of per-example gradients clipped to norm C. ``dp_accounting``'s RDP accountant
(``dp_accounting.rdp.RdpAccountant``, add-or-remove-one-example adjacency; the orders of
:mod:`.rdp_orders`, which give the default orders' ε) composes
``steps = ceil(epochs · n / batch_size)`` Poisson subsampled Gaussian mechanisms, each sampling
every example with probability ``q = batch_size / n``, and converts the RDP bound to (ε, δ). This is
exactly tensorflow-privacy's "ε assuming Poisson sampling" of ``compute_dp_sgd_privacy_statement``.
The smallest σ with ε(σ) ≤ target is found with ``dp_accounting.calibrate_dp_mechanism`` (ε is
decreasing in σ), so the achieved ε never exceeds the target.

:func:`poisson_dpsgd_epsilon` / :func:`poisson_dpsgd_noise_multiplier` account the Poisson-sampled DP-SGD
of :mod:`tfdpmech.dpsgd.poisson` (PLD or RDP, directly in q and steps), whose ε is proven.

Every function takes the same argument order: the noise multiplier (or the target ε), then δ, then
the shape of the run as keyword-only arguments (``n=, batch_size=, epochs=`` or ``q=, steps=``), so
that no two numbers of the run can be swapped by position:

* :func:`dpsgd_epsilon` / :func:`dpsgd_noise_multiplier` (the run as ``n``, ``batch_size``, ``epochs``),
* :func:`dpsgd_epsilon_after_steps` (``sampling_probability``, ``steps``),
* :func:`poisson_dpsgd_epsilon` / :func:`poisson_dpsgd_noise_multiplier` (``q``, ``steps``, ``accountant``);

and :func:`epsilon_any_order` ``(noise_multiplier, delta, epochs)``, whose run has one number.

:func:`epsilon_any_order` is the ε that holds for any data order (each example used once per epoch,
no amplification by sampling: ``epochs`` Gaussian mechanisms composed by RDP).

With microbatches of more than one example a neighbouring dataset can change one microbatch's
clipped mean gradient arbitrarily within the clip ball, which doubles the sensitivity to 2C under
add-or-remove adjacency; the accounting then uses σ/2 (tensorflow-privacy's
``used_microbatching=True``; "How to DP-fy ML", Ponomareva et al. 2023, Sec. 5.6).
"""

from __future__ import annotations

import functools
import math
import numbers

from scipy import optimize

from ..validation import check_batch_size, check_choice, check_delta, check_epsilon, check_positive_int
from .gaussian import require_dp_accounting
from .rdp_orders import rdp_accountant, rdp_epsilon

__all__ = [
    "NotCertifiableError",
    "ACCOUNTANT",
    "SAMPLING",
    "check_training_shape",
    "dpsgd_steps",
    "dpsgd_epsilon",
    "dpsgd_noise_multiplier",
    "dpsgd_epsilon_after_steps",
    "poisson_dpsgd_epsilon",
    "poisson_dpsgd_noise_multiplier",
    "epsilon_any_order",
    "ACCOUNTANTS",
    "ACCOUNTANT_NAMES",
    "check_sampling_probability",
    "pld_discretization",
]


class NotCertifiableError(ValueError):
    """No noise multiplier certifies the target ε at this δ, sampling rate and number of steps (or, for
    AdLM's per-record mode, its batch-calibrated noise proves more than the target at this batch size).

    A ``ValueError`` (raised before anything trains); ``tfdpmech compare`` reports such a run as
    skipped, with this message, and goes on with the others.
    """

ACCOUNTANT = "dp_accounting RDP accountant (add-or-remove-one adjacency)"
SAMPLING = "Poisson subsampling with q = batch_size / n"
_PURPOSE = "DP-SGD accounting"


def check_training_shape(delta, n, batch_size, epochs):
    """Validate ``(δ, n, batch_size, epochs)`` of a DP-SGD run and return them as numbers.

    Raises:
        ValueError / TypeError: δ ∉ (0, 1), n <= 0, batch_size > n or <= 0, epochs <= 0.
    """
    delta = check_delta(delta)
    n = check_positive_int(n, "n")
    batch_size = check_batch_size(batch_size, n=n)
    epochs = check_positive_int(epochs, "epochs")
    return delta, n, batch_size, epochs


def dpsgd_steps(n: int, batch_size: int, epochs: int) -> int:
    """Number of DP-SGD steps the accounting covers: ``ceil(epochs · n / batch_size)``.

    Training with ``drop_remainder=True`` batches runs ``epochs · floor(n / batch_size)`` steps,
    never more.
    """
    n = check_positive_int(n, "n")
    batch_size = check_batch_size(batch_size, n=n)
    epochs = check_positive_int(epochs, "epochs")
    return -(-epochs * n // batch_size)  # exact integer ceil (no float rounding)


def _dpsgd_event(dp_accounting, noise_multiplier, q, steps):
    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(noise_multiplier)), steps
    )


@functools.lru_cache(maxsize=1024)
def _rdp_epsilon(noise_multiplier: float, q: float, steps: int, delta: float, at_most: float = math.inf) -> float:
    # Pure function of its arguments; cached because each evaluation costs ~0.1 s (160 RDP orders).
    # at_most: a calibration's target (exact when ε <= at_most, above it otherwise; see rdp_orders).
    dp_accounting = require_dp_accounting(_PURPOSE)
    return rdp_epsilon(dp_accounting, _dpsgd_event(dp_accounting, noise_multiplier, q, steps), delta, at_most)


def dpsgd_epsilon(noise_multiplier: float, delta: float, *, n: int, batch_size: int, epochs: int,
                  used_microbatching: bool = False) -> float:
    """ε of DP-SGD with noise multiplier σ after ``epochs`` epochs (RDP, Poisson sampling).

    Args:
        noise_multiplier: σ, the noise standard deviation divided by the clipping norm (>= 0).
        delta: δ ∈ (0, 1).
        n: number of training examples.
        batch_size: examples per step (expected batch size of the Poisson sampling).
        epochs: passes over the data; ``steps = ceil(epochs · n / batch_size)``.
        used_microbatching: microbatches hold more than one example (sensitivity 2C: σ/2 is
            accounted).

    Returns:
        ε (``inf`` for σ = 0). Equals tensorflow-privacy's "ε assuming Poisson sampling" of
        ``compute_dp_sgd_privacy_statement`` for the same inputs.

    Raises:
        ImportError: dp-accounting is not installed.
        ValueError / TypeError: invalid inputs (δ ∉ (0, 1), n <= 0, batch_size > n, ...).
    """
    if isinstance(noise_multiplier, bool) or not isinstance(noise_multiplier, numbers.Real):
        raise TypeError(f"noise_multiplier must be a real number >= 0, got {noise_multiplier!r}")
    sigma = float(noise_multiplier)
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"noise_multiplier must be finite and >= 0, got {sigma}")
    delta, n, batch_size, epochs = check_training_shape(delta, n, batch_size, epochs)
    require_dp_accounting(_PURPOSE)
    if sigma == 0:
        return math.inf
    effective = sigma / 2 if used_microbatching else sigma
    return _rdp_epsilon(effective, batch_size / n, dpsgd_steps(n, batch_size, epochs), delta)


def dpsgd_epsilon_after_steps(noise_multiplier: float, delta: float, *, sampling_probability: float, steps: int,
                              used_microbatching: bool = False) -> float:
    """Poisson-RDP ε after ``steps`` optimizer steps with noise multiplier σ and sampling rate q (0 for 0 steps)."""
    steps = int(steps)
    if steps <= 0:
        return 0.0
    sigma = noise_multiplier / 2 if used_microbatching else noise_multiplier
    return _rdp_epsilon(float(sigma), float(sampling_probability), steps, float(delta))


def epsilon_any_order(noise_multiplier: float, delta: float, epochs: int, *, used_microbatching: bool = False) -> float:
    """ε for any data order: each example is used once per epoch, so ``epochs`` Gaussian mechanisms
    compose by RDP, without amplification by sampling (tensorflow-privacy's "each example occurring
    once per epoch")."""
    epochs = check_positive_int(epochs, "epochs")
    delta = check_delta(delta)
    dp_accounting = require_dp_accounting(_PURPOSE)
    sigma = noise_multiplier / 2 if used_microbatching else noise_multiplier
    return rdp_epsilon(dp_accounting, dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma), epochs),
                       delta)


def dpsgd_noise_multiplier(epsilon: float, delta: float, *, n: int, batch_size: int, epochs: int,
                           used_microbatching: bool = False, tol: float = 1e-6) -> float:
    """Smallest noise multiplier σ whose DP-SGD run meets (ε, δ) (RDP accountant, Poisson sampling).

    Brackets the root of ``ε(σ) − ε_target`` by doubling/halving from σ = 1 and calls
    ``dp_accounting.calibrate_dp_mechanism``, which returns σ within ``tol`` of the optimum
    with ``ε(σ) <= ε_target`` guaranteed.

    Args:
        epsilon: target ε > 0.
        delta, n, batch_size, epochs, used_microbatching: as for :func:`dpsgd_epsilon`.
        tol: absolute tolerance on σ.

    Returns:
        σ > 0 with ``dpsgd_epsilon(σ, ...) <= epsilon``.

    Raises:
        ImportError: dp-accounting is not installed.
        ValueError / TypeError: ε <= 0, δ ∉ (0, 1), n <= 0, epochs <= 0, batch_size > n.
    """
    epsilon = check_epsilon(epsilon)
    delta, n, batch_size, epochs = check_training_shape(delta, n, batch_size, epochs)
    if not (isinstance(tol, numbers.Real) and 0 < tol < 1):
        raise ValueError(f"tol must lie in (0, 1), got {tol!r}")
    require_dp_accounting(_PURPOSE)
    return _calibrate(epsilon, delta, n, batch_size, epochs, bool(used_microbatching), float(tol))


@functools.lru_cache(maxsize=256)
def _calibrate(epsilon, delta, n, batch_size, epochs, used_microbatching, tol) -> float:
    dp_accounting = require_dp_accounting(_PURPOSE)
    q = batch_size / n
    steps = dpsgd_steps(n, batch_size, epochs)
    factor = 2.0 if used_microbatching else 1.0  # accounted σ_eff = σ / factor

    def eps_of(sigma_eff):  # exact where it is <= epsilon, above epsilon elsewhere: the same root
        return _rdp_epsilon(float(sigma_eff), q, steps, delta, epsilon)

    # Bracket [lo, hi] with eps_of(lo) > epsilon >= eps_of(hi); ε(σ) is decreasing.
    lo, hi = 1.0, 1.0
    if eps_of(hi) > epsilon:
        previous = eps_of(hi)
        for _ in range(60):
            lo, hi = hi, hi * 2.0
            try:
                current = eps_of(hi)
            except ValueError:  # dp_accounting's numerics break down at huge σ
                current = previous
            if current <= epsilon:
                break
            if current >= previous * 0.99:  # the RDP bound has levelled off above the target
                raise NotCertifiableError(
                    f"epsilon={epsilon:g} cannot be certified with delta={delta:g} by the RDP accountant for "
                    f"{steps} steps (ε levels off at {current:.4g}); raise epsilon or delta, or train fewer epochs"
                )
            previous = current
        else:  # pragma: no cover - needs an absurdly small ε
            raise NotCertifiableError(f"no noise multiplier <= {hi:g} reaches epsilon={epsilon:g}; the target is too small")
    else:
        for _ in range(60):
            lo = lo / 2.0
            if eps_of(lo) > epsilon:
                break
            hi = lo
        else:  # ε is so large that almost no noise is needed
            return hi * factor
    sigma_eff = dp_accounting.calibrate_dp_mechanism(
        lambda: rdp_accountant(dp_accounting, delta, at_most=epsilon),
        lambda s: _dpsgd_event(dp_accounting, s, q, steps),
        epsilon,
        delta,
        dp_accounting.ExplicitBracketInterval(lo, hi),
        tol=min(tol, lo / 2) if lo > 0 else tol,
    )
    sigma_eff = float(sigma_eff)
    if eps_of(sigma_eff) > epsilon:  # belt and braces: never hand out a σ above budget
        sigma_eff = hi
    return sigma_eff * factor

# --- Poisson-sampled DP-SGD (tfdpmech.dpsgd.poisson): the ε that is proven ----------------------
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
    event = _dpsgd_event(dp_accounting, noise_multiplier, q, steps)
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

    Brackets the root of ``ε(σ) − ε_target`` by doubling / halving from σ = 1 and solves it by
    Brent's method (``scipy.optimize.brentq``, as ``dp_accounting.calibrate_dp_mechanism`` does) on
    :func:`poisson_dpsgd_epsilon`, which is decreasing in σ.

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

    def eps_of(sigma):
        try:
            return _epsilon_cached(float(sigma), q, steps, delta, accountant, at_most)
        except (ValueError, OverflowError, FloatingPointError):  # the accountant's numerics break down
            return math.inf

    def not_certifiable(best):
        return NotCertifiableError(
            f"epsilon={epsilon:g} cannot be certified at delta={delta:g} for {steps} steps with sampling "
            f"probability q={q:.4g} by the {accountant.upper()} accountant (the smallest ε reached, with noise "
            f"multiplier up to {SIGMA_MAX:g}, is {best:.4g}); raise epsilon or delta, or train fewer steps"
        )

    lo = hi = 1.0
    if eps_of(hi) > epsilon:  # grow σ until the target is met
        best = eps_of(hi)
        while True:
            lo, hi = hi, hi * 2.0
            if hi > SIGMA_MAX:
                raise not_certifiable(best)
            current = eps_of(hi)
            if current <= epsilon:
                break
            best = min(best, current)
    else:  # shrink σ until the target is exceeded
        for _ in range(40):
            lo = lo / 2.0
            if eps_of(lo) > epsilon:
                break
            hi = lo
        else:  # the target is met with almost no noise
            return hi

    # Brent's method on ε(σ) − ε_target (as dp_accounting.calibrate_dp_mechanism does), on our ε(σ):
    # it refines the PLD grid at small ε, which calibrate_dp_mechanism's fixed accountant would not.
    # ε(σ) is decreasing (the grid switch only lowers it), so the root is the smallest σ meeting ε.
    step = min(tol, lo / 4)
    try:
        sigma = float(optimize.brentq(lambda s: eps_of(s) - epsilon, lo, hi, xtol=step))
    except (ValueError, RuntimeError):  # pragma: no cover - no sign change found: keep the certified end
        sigma = hi
    for _ in range(8):  # step up to the certified side of the root
        if eps_of(sigma) <= epsilon:
            return sigma
        sigma = min(hi, sigma + step)
    return hi
