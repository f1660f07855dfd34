"""Cyclic Poisson sampling over b partitions: the sampling that amplifies banded matrix factorization (BandMF).

Choquette-Choo et al., "Amplified banded matrix factorization" (NeurIPS 2023): the n units (records, or users of a
user-level run) are split once, at the run's start, into b fixed partitions drawn from the run's secret sampling key;
step t samples Poisson, each unit of partition ``t mod b`` independently with probability ``q_b = b · L / n``, and no
other unit. A unit can therefore take part at most once in any b consecutive steps (b-min-separation), which is what
makes the strategy's columns of one unit disjoint, and at most ``⌈steps / b⌉`` times.

The partitions: **each unit is assigned on its own**, uniformly at random to one of the b partitions (independent
draws from the key, one per unit), not by splitting a permutation into equal parts. Under add-or-remove-one
neighbours the other units' partitions then do not depend on whether the added unit is there, so the run on
``D ∪ {u}`` is the run on ``D`` plus ``u`` in a uniformly random partition: a mixture over that partition of the
mechanism the amplified accounting covers for each fixed partition, and a mixture of mechanisms that each meet
(ε, δ) against ``D`` meets it too. (Equal parts cut from a permutation of all n would move other units between
partitions when one is added; that case is not what the proof covers.) The sizes are therefore random, about
``n / b ± sqrt(n / b)``, n need not divide into b, and every unit has the same probability ``q_b`` in each of its
rounds; a step's expected batch is ``q_b`` times its partition's size, L on average; the divisor stays the public L.

With b = 1 there is one partition, the identity: the batches are those of plain Poisson sampling, draw for draw
(:func:`sample_units` then calls the same sampler on the same generator).
"""

from __future__ import annotations

import numpy as np

from .poisson_sampling import PoissonSampler, step_rng

__all__ = ["CyclicPartitions", "sample_units", "PARTITION_SPAWN_KEY"]

PARTITION_SPAWN_KEY = (0x42414E44, 0)  # the assignment's generator: a child of the sampling key no step uses


class CyclicPartitions:
    """b fixed partitions of n units, from the secret sampling ``key``; step t samples partition ``t mod b``.

    Args:
        n: the number of units (records, or users).
        bands: b >= 1.
        key: the run's secret sampling key (:func:`~.poisson_sampling.sampling_key`).
    """

    def __init__(self, n: int, bands: int, key):
        self.n, self.bands = int(n), int(bands)
        rng = np.random.default_rng(np.random.SeedSequence(list(key), spawn_key=PARTITION_SPAWN_KEY))
        assignment = rng.integers(0, self.bands, size=self.n)  # unit i's partition: its own draw
        self.parts = [np.flatnonzero(assignment == p) for p in range(self.bands)]

    def partition_of(self, step: int) -> np.ndarray:
        """The units step ``step`` samples from (sorted)."""
        return self.parts[int(step) % self.bands]

    def sample(self, q: float, key, step: int) -> np.ndarray:
        """The sorted units of step ``step``: each of its partition with probability ``q``, from ``(key, step)``."""
        part = self.partition_of(step)
        return part[PoissonSampler(len(part), q, step_rng(key, step)).sample()]


def sample_units(n: int, q: float, key, step: int, partitions: CyclicPartitions | None = None) -> np.ndarray:
    """The units of step ``step``: plain Poisson over all n (``partitions`` None), else over its cyclic partition."""
    if partitions is None:
        return PoissonSampler(n, q, step_rng(key, step)).sample()
    return partitions.sample(q, key, step)
