"""Cyclic Poisson sampling over b partitions: the sampling that amplifies banded matrix factorization (BandMF).

Choquette-Choo et al., "Amplified banded matrix factorization" (NeurIPS 2023), §4 and Theorem 4: the n units
(records, or users of a user-level run) are split once, at the run's start, into b fixed partitions by a permutation
drawn from the run's secret sampling key; step t samples Poisson, each unit of partition ``t mod b`` independently
with probability ``q_b``, and no other unit. A unit can therefore take part at most once in any b consecutive steps
(b-min-separation), which is what makes the strategy's columns of one unit disjoint.

Partitions: ``numpy.array_split`` of the permutation, so their sizes are ``⌊n/b⌋`` or ``⌈n/b⌉`` (n need not divide
into b). Every partition is sampled with the same ``q_b = L / ⌊n/b⌋`` (L the expected batch size of the run): every
unit has exactly that probability in each of its rounds, which is what the accounting composes (a partition of
``⌈n/b⌉`` units gives batches of expected size ``q_b ⌈n/b⌉ <= L (1 + 1/⌊n/b⌋)``; the divisor stays the public L).

With b = 1 there is one partition, the identity: the batches are those of plain Poisson sampling, draw for draw
(:func:`sample_units` then calls the same sampler on the same generator).
"""

from __future__ import annotations

import numpy as np

from .poisson_sampling import PoissonSampler, step_rng

__all__ = ["CyclicPartitions", "sample_units", "PARTITION_SPAWN_KEY"]

PARTITION_SPAWN_KEY = (0x42414E44, 0)  # the permutation's generator: a child of the sampling key no step uses


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
        self.parts = [np.sort(p) for p in np.array_split(rng.permutation(self.n), self.bands)]

    @property
    def smallest(self) -> int:
        """``⌊n / b⌋``: the size of the smallest partition."""
        return self.n // self.bands

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
