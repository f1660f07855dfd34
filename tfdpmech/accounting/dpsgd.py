"""DP-SGD accounting with ``dp_accounting``: ε ↔ noise multiplier σ for a training run.

DP-SGD (Abadi et al., "Deep Learning with Differential Privacy", CCS 2016) adds N(0, σ²C²) to the
sum of per-example gradients clipped to norm C. ``dp_accounting``'s RDP accountant
(``dp_accounting.rdp.RdpAccountant``, add-or-remove-one-example adjacency; the orders of
:mod:`.rdp_orders`, which give the default orders' ε) composes
``steps = ceil(epochs · n / batch_size)`` Poisson subsampled Gaussian mechanisms, each sampling
every example with probability ``q = batch_size / n``, and converts the RDP bound to (ε, δ). This is
exactly tensorflow-privacy's "ε assuming Poisson sampling" of ``compute_dp_sgd_privacy_statement``.
The smallest σ with ε(σ) ≤ target is found by :func:`~tfdpmech.accounting.sigma_search.smallest_sigma`
(ε is decreasing in σ), so the achieved ε never exceeds the target.

:mod:`~tfdpmech.accounting.poisson_dpsgd` accounts the Poisson-sampled DP-SGD of
:mod:`tfdpmech.mechanisms.dpsgd.runs.poisson` (PLD or RDP, directly in q and steps), whose ε is proven.

Every function takes the same argument order: the noise multiplier (or the target ε), then δ, then
the shape of the run as keyword-only arguments (``n=, batch_size=, epochs=`` or ``q=, steps=``), so
that no two numbers of the run can be swapped by position:

* :func:`dpsgd_epsilon` / :func:`dpsgd_noise_multiplier` (the run as ``n``, ``batch_size``, ``epochs``),
* :func:`dpsgd_epsilon_after_steps` (``sampling_probability``, ``steps``),
* ``poisson_dpsgd_epsilon`` / ``poisson_dpsgd_noise_multiplier`` (``q``, ``steps``, ``accountant``);

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

from ..validation import check_batch_size, check_delta, check_epsilon, check_positive_int
from .gaussian import require_dp_accounting
from .rdp_orders import rdp_epsilon
from .sigma_search import NotCertifiableError, smallest_sigma

__all__ = [
    "NotCertifiableError",
    "ACCOUNTANT",
    "SAMPLING",
    "check_training_shape",
    "dpsgd_steps",
    "dpsgd_event",
    "dpsgd_epsilon",
    "dpsgd_noise_multiplier",
    "dpsgd_epsilon_after_steps",
    "epsilon_any_order",
]


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


def dpsgd_event(dp_accounting, noise_multiplier, q, steps):
    """The ``DpEvent`` of ``steps`` Poisson-subsampled Gaussian steps (sampling probability q, noise multiplier σ)."""
    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(noise_multiplier)), steps
    )


@functools.lru_cache(maxsize=1024)
def _rdp_epsilon(noise_multiplier: float, q: float, steps: int, delta: float, at_most: float = math.inf) -> float:
    # Pure function of its arguments; cached because each evaluation costs ~0.1 s (160 RDP orders).
    # at_most: a calibration's target (exact when ε <= at_most, above it otherwise; see rdp_orders).
    dp_accounting = require_dp_accounting(_PURPOSE)
    return rdp_epsilon(dp_accounting, dpsgd_event(dp_accounting, noise_multiplier, q, steps), delta, at_most)


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

    Brackets the root of ``ε(σ) − ε_target`` by doubling/halving from σ = 1 and solves it with
    :func:`~tfdpmech.accounting.sigma_search.smallest_sigma`, which returns σ within ``tol`` of the optimum
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
    q = batch_size / n
    steps = dpsgd_steps(n, batch_size, epochs)
    factor = 2.0 if used_microbatching else 1.0  # accounted σ_eff = σ / factor

    def eps_of(sigma_eff):  # exact where it is <= epsilon, above epsilon elsewhere: the same root
        return _rdp_epsilon(float(sigma_eff), q, steps, delta, epsilon)

    def not_certifiable(reached):
        return NotCertifiableError(
            f"epsilon={epsilon:g} cannot be certified with delta={delta:g} by the RDP accountant for "
            f"{steps} steps (ε levels off at {reached:.4g}); raise epsilon or delta, or train fewer epochs"
        )

    sigma_eff = smallest_sigma(eps_of, epsilon, max_sigma=2.0 ** 60, max_shrinks=60, tol=tol, relative_tol=0.5,
                               stop_on_level_off=True, not_certifiable=not_certifiable)
    return sigma_eff * factor
