"""σ of a Poisson DP-SGD run from n: at construction, or at the first fit when ``n`` is not given.

Everything of a run that depends on the number of units n (q or L, the steps per epoch, the padded batch, σ
for the target ε and the proven ε) is computed by :meth:`PoissonCalibration.calibrate`. ``DPSGD(..., n=n)``
calls it in its constructor; ``DPSGD(...)`` without ``n`` on a model from :func:`tfdpmech.make_private` calls it
at the first ``fit`` with the number of records that fit trains on (after ``validation_split``), before the
model is compiled and before anything is charged: the ledger's release states that n.
"""

from __future__ import annotations

import math

from ....accounting.poisson_dpsgd import (check_sampling_probability, poisson_dpsgd_epsilon,
                                          poisson_dpsgd_noise_multiplier)
from ....validation import check_positive_int
from .base import MAX_STEPS, check_delta_below_one_over_n
from ..sampling.poisson_sampling import check_expected_batch_size, padded_batch_size

__all__ = ["PoissonCalibration"]

_SIZED = ("sampling_probability", "expected_batch_size", "steps_per_epoch", "steps", "padded_batch_size",
          "noise_multiplier", "epsilon_achieved")


class PoissonCalibration:
    """The n-dependent settings of :class:`~tfdpmech.mechanisms.dpsgd.DPSGD` (mixed into it)."""

    n_from_fit = False  # True when the first fit gave n (the run was constructed without it)

    def _defer_sizes(self, expected_batch_size, sampling_probability, noise_multiplier) -> None:
        """Keep the arguments σ is computed from; every n-dependent attribute is None until :meth:`calibrate`."""
        if sampling_probability is not None:
            sampling_probability = check_sampling_probability(sampling_probability)
        elif expected_batch_size is not None:
            expected_batch_size = check_positive_int(expected_batch_size, "expected_batch_size")
        self._size_arguments = (expected_batch_size, sampling_probability, noise_multiplier)
        for name in _SIZED:
            setattr(self, name, None)

    def calibrate(self, n: int, *, from_fit: bool = False) -> None:
        """Compute q (or L), the steps, the padded batch, σ and the proven ε for ``n`` units.

        Args:
            n: the number of records (users of a user-level run) every step samples from.
            from_fit: the first fit of a run constructed without ``n`` gives it (recorded in ``n_from_fit``).

        Raises:
            ValueError: δ >= 1/n, an expected batch size above n, more steps than the accountant computes, a
                target ε the accountant cannot certify; a second n once the run's release is recorded.
        """
        n = check_positive_int(n, "n")
        if self.n == n:
            return
        if self.n is not None and (self.release is not None or not self.n_from_fit):
            raise ValueError(f"this run's noise was calibrated for n={self.n} records, got {n}; train on the same "
                             "records or construct a new DPSGD (nothing of this fit has been charged)")
        expected_batch_size, sampling_probability, noise_multiplier = self._size_arguments
        check_delta_below_one_over_n(self.delta, n)
        if sampling_probability is not None:
            q, batch = sampling_probability, sampling_probability * n
        else:
            batch = check_expected_batch_size(expected_batch_size, n)
            q = batch / n
        steps_per_epoch = int(math.ceil(1.0 / q - 1e-12))
        if self.epochs * steps_per_epoch > MAX_STEPS:
            raise ValueError(
                f"epochs={self.epochs} with {steps_per_epoch} Poisson steps per epoch is "
                f"{self.epochs * steps_per_epoch:.3g} DP-SGD steps, more than {MAX_STEPS:.0e}, beyond what the "
                "accountant computes; pass a realistic number of epochs"
            )
        steps = self.epochs * steps_per_epoch
        # what the accountant composes: (q, steps) for DP-SGD, (q_b, ceil(steps / b)) for BandMF (.banded_run)
        q_accounted, events, padded_units = self._accounted_sampling(n, batch, steps_per_epoch, steps)
        if self.bands == 1:
            q_accounted = q  # the very q DP-SGD composes (not recomputed as L / n)
        if noise_multiplier is None:
            noise_multiplier = poisson_dpsgd_noise_multiplier(self.target_epsilon, self.delta, q=q_accounted,
                                                              steps=events, accountant=self.accountant)
        achieved = poisson_dpsgd_epsilon(noise_multiplier, self.delta, q=q_accounted, steps=events,
                                         accountant=self.accountant)
        # every check passed: set the run's sizes together (the settings are fixed outside construction, and
        # calibrating completes it)
        depth = self.__dict__.get("_constructing", 0)
        object.__setattr__(self, "_constructing", depth + 1)
        try:
            self.n, self.n_from_fit = n, from_fit
            self.sampling_probability, self.expected_batch_size = q, batch
            self.batch_size = max(1, int(round(batch)))  # the expected batch size, rounded (what messages read)
            self.steps_per_epoch, self.steps = steps_per_epoch, steps
            self.padded_batch_size = padded_batch_size(n, q) if self.bands == 1 else padded_batch_size(
                padded_units, q_accounted)  # BandMF: the largest partition at q_b
            self.noise_multiplier, self.epsilon_achieved = noise_multiplier, achieved
            self.epsilon = achieved if self.target_epsilon is None else self.target_epsilon
            self._set_strategy(q_accounted, events)
        finally:
            object.__setattr__(self, "_constructing", depth)

    def _require_n(self, what: str) -> None:
        """Refuse ``what`` before the run knows n."""
        if self.n is None:
            raise ValueError(
                f"{what} needs n, the number of private records: construct DPSGD(..., n=len(x_private)), or let "
                "the first fit of tfdpmech.make_private(model, DPSGD(...)) take n from the records it trains on")
