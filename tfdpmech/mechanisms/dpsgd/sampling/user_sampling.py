"""User-level DP-SGD (McMahan et al. 2018, "Learning differentially private recurrent language models";
jax-privacy's ``UserSelectionStrategy``): the unit of privacy is a person, not a row.

Every step includes each of the n *users* independently with probability q; a sampled user contributes up to
k of their records, the next k in a cycle over the steps the user is sampled in (so each record is used
evenly), and those records' gradients are summed and clipped once to C
(:mod:`tfdpmech.mechanisms.dpsgd.clipping.layer_rules.groups`: a user's k rows are one clipping unit, a user
with fewer records padded with zero-weight rows). Adding or removing a user, with all of their records, changes one
clipped unit: the Poisson ε over users, from ``dp_accounting``, is a guarantee for the neighbour relation "add or
remove one user (all of their records)".

The cycle position of a user at step t is the number of earlier steps that sampled it: kept as the batches are
drawn, and recomputed from the secret key when a stream starts elsewhere (a later ``fit``, a resumed run).
"""

from __future__ import annotations

import numbers

import numpy as np

from .cyclic_poisson import sample_units
from .records import take_rows

__all__ = ["UserRecords", "check_users"]


def check_users(user_ids, records_per_user, n: int) -> tuple[np.ndarray, int]:
    """``(user_ids as an array, k)``, checked against the run's n (the number of distinct users).

    Raises:
        TypeError / ValueError: ``records_per_user`` missing, not an int or below 1; ``user_ids`` not one id
            per record (1-D, integers or strings); n not the number of distinct users.
    """
    if isinstance(records_per_user, bool) or not isinstance(records_per_user, numbers.Integral):
        raise TypeError(f"records_per_user must be an int k >= 1 with user_ids, got {records_per_user!r}")
    if records_per_user < 1:
        raise ValueError(f"records_per_user must be >= 1, got {records_per_user}; pass e.g. records_per_user=8")
    ids = np.asarray(user_ids)
    if ids.ndim != 1 or ids.size == 0 or not (np.issubdtype(ids.dtype, np.integer) or ids.dtype.kind in "US"):
        raise TypeError(f"user_ids must be a 1-D array of one integer or string id per record, got shape "
                        f"{ids.shape} dtype {ids.dtype}")
    users = len(np.unique(ids))
    if users != n:
        raise ValueError(f"a user-level run's n is the number of users: user_ids holds {users} distinct users, "
                         f"n={n}; pass n={users}")
    return ids, int(records_per_user)


class UserRecords:
    """Which records each user holds, and each step's rows: up to k records per sampled user, in groups of k."""

    def __init__(self, user_ids: np.ndarray, k: int):
        order = np.argsort(user_ids, kind="stable")
        _, starts = np.unique(user_ids[order], return_index=True)
        self.records = np.split(order, starts[1:])  # per user, its record indices in the data's order
        self.k, self.n = int(k), len(self.records)
        self.n_records = len(user_ids)
        self.largest = max(len(r) for r in self.records)
        self._cycle = (0, np.zeros(self.n, np.int64))  # (the next step, times each user was sampled before it)

    def _counts(self, step: int, q: float, key, partitions=None) -> np.ndarray:
        start, counts = self._cycle
        if start != step:  # another stream position: recount from the key
            counts = np.zeros(self.n, np.int64)
            for t in range(step):
                counts[sample_units(self.n, q, key, t, partitions)] += 1
        return counts.copy()

    def rows(self, q: float, key, step: int, partitions=None) -> tuple[np.ndarray, np.ndarray]:
        """``(record index per row, 1/0 real per row)`` of step ``step``: k rows per sampled user (``partitions``:
        BandMF's cyclic partitions of the users, :mod:`.cyclic_poisson`)."""
        counts = self._counts(step, q, key, partitions)
        users = sample_units(self.n, q, key, step, partitions)
        index = np.zeros(len(users) * self.k, np.int64)
        real = np.zeros(len(users) * self.k, np.float32)
        for g, u in enumerate(users):
            records = self.records[u]
            take = min(self.k, len(records))
            start = counts[u] * take  # the next records of its cycle
            index[g * self.k:g * self.k + take] = records[(start + np.arange(take)) % len(records)]
            real[g * self.k:g * self.k + take] = 1.0
        counts[users] += 1
        self._cycle = (step + 1, counts)
        return index, real

    def batch(self, x, y, q: float, padded: int, key, step: int, weights=None, partitions=None):
        """``(x, y, mask)`` of step ``step``: the sampled users' rows, padded to a multiple of ``padded`` users."""
        index, real = self.rows(q, key, step, partitions)
        groups = len(index) // self.k
        rows = self.k * padded * max(1, -(-groups // padded))
        mask = np.zeros(rows, np.float32)
        mask[:len(index)] = real if weights is None else real * weights[index]
        return take_rows(x, index, rows), take_rows(y, index, rows), mask
