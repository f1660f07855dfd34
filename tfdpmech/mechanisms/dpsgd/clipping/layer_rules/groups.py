"""Clipping units of k rows: the per-unit reductions every registered rule computes its norms with.

A rule's ``sq_norms`` returns one squared norm per clipping unit. A unit is one row, or a group of k
consecutive rows (the K views of a record, a user's k records; rows ``[g·k, (g+1)·k)`` form group g) whose
gradients are summed before the unit is clipped. Inside :func:`row_groups` (the engine sets it around a
grouped run's norms) the reductions below give one value per group, by two exact identities:

* **rows as positions** (:func:`merge_rows`): where a row's weight gradient is ``Σ_t x_t ⊗ g_t`` over its
  positions, a group's is the same sum over the k·T positions of its rows, so ``(B, T, d)`` becomes
  ``(B/k, k·T, d)`` and the row formula applies (Dense, convolutions from patches, recurrent steps,
  biases, an Embedding's ids);
* **sum of materialised rows** (:func:`unit_sq_norms`): a rule that materialises each row's weight gradient
  (EinsumDense, depthwise kernels, normalisation γ and β, the alone rule) sums each group's rows, then squares.

Outside :func:`row_groups` (k = 1) both are the row computations themselves.
"""

from __future__ import annotations

import contextlib
import threading

import tensorflow as tf

__all__ = ["row_groups", "group_size", "merge_rows", "sum_rows", "unit_sq_norms", "unit_zeros"]

_STATE = threading.local()


@contextlib.contextmanager
def row_groups(k: int):
    """Inside this context the reductions of this module treat every k consecutive rows as one clipping unit."""
    before = group_size()
    _STATE.k = int(k)
    try:
        yield
    finally:
        _STATE.k = before


def group_size() -> int:
    return getattr(_STATE, "k", 1)


def merge_rows(t):
    """``(B, T, ...)`` as ``(B/k, k·T, ...)``: each group's rows as the positions of one unit."""
    k = group_size()
    if k == 1:
        return t
    positions = None if t.shape[1] is None else k * int(t.shape[1])
    rest = [int(d) if d is not None else -1 for d in t.shape[2:]]
    if any(d == -1 for d in rest):
        shape = tf.concat([[-1, positions if positions is not None else k * tf.shape(t)[1]], tf.shape(t)[2:]], 0)
        return tf.reshape(t, shape)
    return tf.reshape(t, [-1, positions if positions is not None else k * tf.shape(t)[1], *rest])


def sum_rows(t):
    """``(B, ...)`` as ``(B/k, ...)``: each group's rows summed."""
    k = group_size()
    if k == 1:
        return t
    return tf.reduce_sum(tf.reshape(t, tf.concat([[-1, k], tf.shape(t)[1:]], 0)), axis=1)


def unit_sq_norms(per_row):
    """Each unit's squared norm of a materialised per-row gradient ``(B, ...)``: its rows summed, then squared."""
    t = sum_rows(per_row)
    return tf.reduce_sum(tf.reshape(tf.square(t), (tf.shape(t)[0], -1)), axis=1)


def unit_zeros(per_row):
    """``(B/k,)`` zeros: the start of a sum of squared norms, one per unit."""
    return tf.zeros([tf.shape(per_row)[0] // group_size()], tf.float32)
