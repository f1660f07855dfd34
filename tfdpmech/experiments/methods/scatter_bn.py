"""``dpsgd_scatter`` with the private per-channel normalisation (``options["scatter_norm"] = "private_bn"``).

The run spends its ε on two releases, both proven and both in one ledger (composed at the run's δ by
``dp_accounting``, the smallest of its RDP and PLD bounds): first the normalisation's statistics
(:func:`tfdpmech.features.scatter_norm.private_scatter_statistics`: two Gaussian mechanisms of noise multiplier
σ_bn, ``options["scatter_bn_noise"]``, 8 by default as Tramèr & Boneh), then DP-SGD, whose noise multiplier σ
is the smallest for which the composition of both events does not exceed the target ε (the same search as
every DP-SGD calibration, :func:`tfdpmech.accounting.sigma_search.smallest_sigma`). Everything is calibrated
and checked before the statistics are released.
"""

from __future__ import annotations

import math

import numpy as np

from ...accounting.dpsgd import dpsgd_event
from ...accounting.events import compose_events
from ...accounting.gaussian import require_dp_accounting
from ...accounting.ledger import PrivacyLedger
from ...accounting.poisson_dpsgd import SIGMA_MAX
from ...accounting.sigma_search import NotCertifiableError, smallest_sigma
from ...features.scatter import scattering_channels
from ...features.scatter_norm import (BN_NOISE_MULTIPLIER, normalisation_event, normalise_channels,
                                      private_scatter_statistics)
from ...mechanisms.dpsgd import make_dpsgd
from ...mechanisms.dpsgd.sampling.poisson_sampling import check_expected_batch_size
from ...validation import check_delta, check_epsilon, check_positive_real

__all__ = ["BN_STREAM", "composed_noise_multiplier", "private_bn_run"]

BN_STREAM = 0x5CA7  # the normalisation's noise: numpy.random.default_rng([seed, BN_STREAM]), apart from DP-SGD's


def _sampling(recipe, n: int) -> tuple[float, int]:
    """(q, steps) of the recipe's Poisson run on n records, as :class:`~tfdpmech.mechanisms.dpsgd.DPSGD` computes them."""
    batch = check_expected_batch_size(recipe.batch_for(n), n)
    q = batch / n
    return q, recipe.epochs * int(math.ceil(1.0 / q - 1e-12))


def composed_noise_multiplier(epsilon: float, delta: float, *, q: float, steps: int, prior_events) -> float:
    """The smallest DP-SGD σ whose run composed with ``prior_events`` has ε <= ``epsilon`` at ``delta``.

    Raises:
        NotCertifiableError: no σ up to the package's largest certifies it (the prior events spend the budget).
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    dp_accounting = require_dp_accounting("the composed DP-SGD calibration")
    prior = list(prior_events)

    def eps_of(sigma: float) -> float:
        return compose_events([*prior, dpsgd_event(dp_accounting, float(sigma), q, steps)], delta)[0]

    def not_certifiable(best):
        return NotCertifiableError(
            f"epsilon={epsilon:g} cannot be certified at delta={delta:g} for the normalisation's release and "
            f"{steps} DP-SGD steps at q={q:.4g} (the smallest ε reached is {best:.4g}); raise epsilon or "
            "options['scatter_bn_noise'], or use options['scatter_norm'] = 'group'")

    return smallest_sigma(eps_of, epsilon, max_sigma=SIGMA_MAX, max_shrinks=40, tol=1e-3, relative_tol=0.25,
                          not_certifiable=not_certifiable)


def private_bn_run(x_private, epsilon: float, delta: float, seed: int, recipe, *,
                   bn_noise: float = BN_NOISE_MULTIPLIER):
    """The normalisation's release and the DP-SGD run after it, sharing one ledger.

    Returns:
        ``(dp, features, statistics)``: the :class:`~tfdpmech.mechanisms.dpsgd.DPSGD` run (its ledger holds the
        normalisation's release; DP-SGD's is recorded when it compiles), the normalised private features
        ``(n, 81·H'·W')`` and the :class:`~tfdpmech.features.scatter_norm.ScatterStatistics`.

    Raises:
        ValueError: ``bn_noise`` <= 0 (named ``options['scatter_bn_noise']``), a budget the two releases cannot
            meet; before anything is released.
    """
    bn_noise = check_positive_real(bn_noise, "options['scatter_bn_noise']")
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    coefficients = scattering_channels(x_private)
    n = len(coefficients)
    q, steps = _sampling(recipe, n)
    sigma = composed_noise_multiplier(epsilon, delta, q=q, steps=steps, prior_events=[normalisation_event(bn_noise)])
    ledger = PrivacyLedger(target_delta=delta)
    rng = np.random.default_rng([int(seed), BN_STREAM])
    statistics = private_scatter_statistics(coefficients, noise_multiplier=bn_noise, delta=delta, rng=rng,
                                            ledger=ledger)
    dp = make_dpsgd(None, delta, n, recipe=recipe, seed=seed, engine="tfdpmech", ledger=ledger, noise_multiplier=sigma)
    if (dp.sampling_probability, dp.steps) != (q, steps):  # the calibration's run is the run that trains
        raise RuntimeError(f"DP-SGD run with q={dp.sampling_probability}, {dp.steps} steps; calibrated for q={q}, "
                           f"{steps} steps")
    return dp, normalise_channels(coefficients, statistics), statistics
