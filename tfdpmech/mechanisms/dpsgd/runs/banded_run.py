"""``DPSGD(..., bands=b)``: banded matrix factorization (BandMF), correlated noise amplified by cyclic Poisson sampling.

The part of :class:`~tfdpmech.mechanisms.dpsgd.DPSGD` that ``bands`` decides (mixed into it). With ``bands=1`` (the
default) nothing changes: the same batches, noise, σ and ledger entry as DP-SGD, draw for draw. With ``bands=b > 1``
(Choquette-Choo et al., "Amplified banded matrix factorization: a unified approach to private training", NeurIPS
2023, arXiv:2306.08153, its amplification of b-banded strategies by cyclic Poisson sampling; jax-privacy 2.x's
BandMF):

* **sampling**: each of the n units assigned once, on its own, to one of b partitions (uniformly, from the secret
  sampling key); step t samples Poisson from partition ``t mod b`` only, each unit with probability
  ``q_b = b · L / n`` (:mod:`..sampling.cyclic_poisson`): a unit takes part at most once in any b consecutive steps;
* **noise**: ``w = C⁻¹ z`` stream-wise (:mod:`..noise.correlated_noise`), C the b-banded Toeplitz strategy optimised
  for the run's steps (:mod:`..noise.banded_strategy`), ``z_t ~ N(0, (σ C_clip sens(C))² I)``;
* **accounting**: ``dp_accounting`` composes ``⌈steps / b⌉`` Poisson-sampled Gaussian events with the same σ and
  probability ``q_b`` (each unit is in one partition, which is sampled once every b steps); σ is calibrated to the
  target ε from that event. The ledger's release names the mechanism (``"dpsgd_bandmf"``) and its bands.

Refused, before anything is charged (the amplification argument covers none of them): ``bands`` above the steps
of an epoch (``q_b = b · L / n`` would exceed 1), tensorflow-privacy's engine (its DP models draw their own noise), several
workers (their shared batches do not partition), and shuffled batches (:class:`~tfdpmech.mechanisms.dpsgd.ShuffledDPSGD`
has no ``bands``). Keras's ``gradient_accumulation_steps`` is refused for every DP-SGD run.
"""

from __future__ import annotations

import math
import numbers

from ....accounting.gaussian import require_dp_accounting
from ....accounting.poisson_dpsgd import ACCOUNTANT_NAMES
from ..noise.banded_strategy import banded_strategy
from ..noise.correlated_noise import (BandedNoise, buffer_bands, key_check, make_noise_buffers, reset_noise_buffers,
                                      stored_key_check)
from ..sampling.cyclic_poisson import CyclicPartitions
from ....distribute import strategy_of
from .train_step import KERAS_3

__all__ = ["BandedRun", "check_bands"]


def check_bands(bands) -> int:
    """``bands`` as an int >= 1 (TypeError / ValueError naming it, with the fix)."""
    if isinstance(bands, bool) or not isinstance(bands, numbers.Integral):
        raise TypeError(f"bands must be an int >= 1 (1: DP-SGD's independent noise; b > 1: BandMF with b bands), got "
                        f"{bands!r} ({type(bands).__name__}); e.g. bands=1 or bands=8")
    if bands < 1:
        raise ValueError(f"bands must be >= 1 (1: DP-SGD's independent noise; b > 1: BandMF with b bands), got "
                         f"bands={bands}; pass bands=1 for DP-SGD")
    return int(bands)


class BandedRun:
    """The bands of a Poisson DP-SGD run (see the module docstring); ``bands = 1`` is DP-SGD unchanged."""

    bands = 1
    strategy = None  # the BandedStrategy (bands > 1, once n is known)
    partition_sampling_probability = None  # q_b (bands > 1, once n is known)
    rounds = None  # ⌈steps / b⌉ (bands > 1)

    def _set_bands(self, bands) -> None:
        self.bands = check_bands(bands)
        if self.bands > 1 and self.requested_engine == "tensorflow_privacy":
            raise ValueError(f"bands={self.bands} (BandMF) trains on tfdpmech's engine: tensorflow-privacy's DP models "
                             "draw their own independent noise. Pass engine='tfdpmech' (or 'auto'), or bands=1")
        self._partitions = {}

    def _accounted_sampling(self, n: int, batch: float, steps_per_epoch: int, steps: int):
        """``(q the accountant composes, events composed, padded batch base)``: ``(L/n, steps, n)`` for one band,
        ``(b·L/n, ⌈steps/b⌉, ⌈n/b⌉)`` for b bands.

        Raises:
            ValueError: b above the steps of an epoch, i.e. partitions of n/b units smaller than the expected batch
                (q_b > 1).
        """
        if self.bands == 1:
            return batch / n, steps, n
        q_b = self.bands * batch / n
        if self.bands > steps_per_epoch or q_b > 1:
            raise ValueError(
                f"bands={self.bands} is more than the {steps_per_epoch} steps of an epoch: its {self.bands} partitions "
                f"of the n={n} units hold {n / self.bands:.4g} on average, fewer than the expected batch size "
                f"L={batch:g}, so a partition cannot be sampled with probability q_b = bands · L / n = {q_b:.4g} <= 1. "
                f"Pass bands <= {max(1, min(steps_per_epoch, int(n // batch)))}, or a smaller expected_batch_size"
            )
        return q_b, int(math.ceil(steps / self.bands)), -(-n // self.bands)

    def _set_strategy(self, q_b: float, rounds: int) -> None:
        """The optimised strategy for the run's steps (bands > 1), q_b and the rounds (set by calibrate)."""
        if self.bands > 1:
            self.strategy = banded_strategy(self.steps, self.bands)
            self.partition_sampling_probability, self.rounds = q_b, rounds

    def _accounted_steps(self, steps: int) -> tuple[float, int]:
        """``(q, events)`` the accountant composes for ``steps`` steps of this run."""
        if self.bands == 1:
            return self.sampling_probability, steps
        return self.partition_sampling_probability, int(math.ceil(steps / self.bands))

    def partitions(self, key):
        """The cyclic partitions under sampling ``key`` (None for one band: plain Poisson sampling)."""
        if self.bands == 1:
            return None
        if key != self._sampling_key:
            raise ValueError(f"bands={self.bands}: the cyclic partitions are fixed for the whole run, from the run's own "
                             "seed; drop dataset(..., seed=...) (pass the seed to DPSGD(..., seed=...) instead)")
        if key not in self._partitions:
            units = self.n if self.users is None else self.users.n
            self._partitions[key] = CyclicPartitions(units, self.bands, key)
        return self._partitions[key]

    # -- engine ------------------------------------------------------------------------------
    def _check_distribution(self, model) -> None:
        super()._check_distribution(model)
        keras_2_strategy = not KERAS_3 and strategy_of(model) is not None
        if self.bands > 1 and (self.engine != "tfdpmech" or self.multiworker is not None or keras_2_strategy):
            why = ("several workers share batches that do not follow the cyclic partitions" if self.multiworker
                   is not None else "Keras 2's optimizer variables cannot hold the noise buffer across replicas "
                   "(train without a tf.distribute strategy there, or on Keras 3)" if keras_2_strategy else
                   f"engine={self.engine!r} draws its own independent noise")
            raise ValueError(f"bands={self.bands} (BandMF) trains on tfdpmech's engine on one machine: {why}. Pass "
                             "engine='tfdpmech' on one machine, or bands=1 (nothing has been charged)")

    def _correlated_noise(self):
        """The train step's :class:`~..noise.correlated_noise.BandedNoise` (None for one band)."""
        if self.bands == 1:
            return None
        return BandedNoise(self.strategy.coefficients, self.strategy.sensitivity,
                           lambda: self.first_step + self._planned_steps(), self._sampling_key)

    def _compile_checked(self, model, loss, metrics, optimizer, *, resumed: bool = False):
        held = None if optimizer is None else buffer_bands(getattr(optimizer, "inner_optimizer", optimizer))
        if held is not None and not resumed and held != self.bands and self.bands > 1:
            raise ValueError(f"this optimizer holds the BandMF noise buffer of a run with bands={held}; this run has "
                             f"bands={self.bands}: compile with a new optimizer (nothing has been charged)")
        compiled = super()._compile_checked(model, loss, metrics, optimizer, resumed=resumed)
        if self.engine == "tfdpmech":
            target = getattr(compiled.optimizer, "inner_optimizer", compiled.optimizer)
            if not resumed:
                reset_noise_buffers(target)  # a new run's stream starts with no past noise
            if self.bands > 1 and getattr(target, "built", False):
                make_noise_buffers(target, compiled.trainable_variables, self.bands)
            stored = stored_key_check(target) if self.bands > 1 else None
            if resumed and stored not in (None, 0, key_check(self._sampling_key)):
                raise ValueError(
                    f"this BandMF run (bands={self.bands}) was saved mid-stream under another sampling key: its "
                    "partitions and the noise buffer belong to the seed it started with. Resume it with that seed, "
                    "tfdpmech.resume(model, seed=...); a run started without a seed (OS entropy) cannot be resumed "
                    "(nothing has been trained or charged)")
        return compiled

    # -- the ledger --------------------------------------------------------------------------
    def _noise_release(self, basis: str, event, details: dict):
        """``(mechanism, basis, event, details)`` of the release: DP-SGD's own for one band."""
        if self.bands == 1:
            return "dpsgd", basis, event, details
        dp_accounting = require_dp_accounting("BandMF accounting")
        unit = "users" if self.users is not None else "records"
        s = self.strategy
        basis = (
            f"BandMF, {self.bands} bands (banded matrix factorization; Choquette-Choo et al. 2023, 'Amplified banded "
            f"matrix factorization'): each of the n={self.n} {unit} assigned once, on its own, to one of "
            f"{self.bands} partitions by a secret uniform draw; step t samples each {unit[:-1]} of partition t mod "
            f"{self.bands} independently with probability q_b={self.partition_sampling_probability:.6g} (= b L / n); per-"
            f"{'user' if self.users is not None else 'example'} clipping C={self.l2_norm_clip:g}; the noise of step t is "
            f"(C^-1 z)_t for the {self.bands}-banded Toeplitz strategy C optimised for {self.steps} steps "
            f"(sensitivity {s.sensitivity:.6g}), z ~ N(0, (σ C sens)^2) with σ={self.noise_multiplier:.6g}; the noisy "
            f"sum divided by L={self.expected_batch_size:g}. " + self._unit_basis() + "Proven ε: "
            f"{ACCOUNTANT_NAMES[self.accountant]} over {self.rounds} = ceil({self.steps}/{self.bands}) Poisson-subsampled "
            "Gaussian rounds with the same σ and q_b, assuming the sampling randomness and the noise stay secret."
        )
        event = dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(self.partition_sampling_probability,
                                                dp_accounting.GaussianDpEvent(self.noise_multiplier)),
            self.rounds)
        details = {**details, "noise": "bandmf", "bands": self.bands, "sampling": "cyclic_poisson",
                   "partition_sampling_probability": self.partition_sampling_probability, "rounds": self.rounds,
                   "strategy_coefficients": [float(c) for c in s.coefficients],
                   "strategy_sensitivity": s.sensitivity, "strategy_loss_ratio": s.ratio}
        return "dpsgd_bandmf", basis, event, details
