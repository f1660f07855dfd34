"""Poisson batches: every step each of the n records joins independently with probability q.

Steps 1 and 2 of Poisson DP-SGD (:mod:`tfdpmech.dpsgd.poisson`): :class:`PoissonSampler` draws
``B_t = {i : U_i < q}``; :func:`pad_batch` pads it with masked all-zero rows to the fixed shape
:func:`padded_batch_size` (never cutting a record); :func:`poisson_dataset` is the ``tf.data``
pipeline of those batches ``(x, y, mask)``.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from ..accounting.dpsgd import check_sampling_probability
from ..validation import check_positive_int

__all__ = ["PoissonSampler", "padded_batch_size", "pad_batch", "poisson_dataset", "PAD_SDS"]

PAD_SDS = 6.0  # padded shape: expected size + 6 standard deviations (overflow ~1e-9 per step)


def padded_batch_size(n: int, q: float) -> int:
    """Fixed padded batch shape for Poisson batches: ``ceil(q·n + 6·sqrt(n·q·(1−q)))`` rounded up to 8, <= n.

    A batch larger than this (probability about 1e-9 per step) is padded to the next multiple of
    it instead of being cut.
    """
    n = check_positive_int(n, "n")
    q = check_sampling_probability(q, "q")
    mean, sd = n * q, math.sqrt(n * q * (1.0 - q))
    size = int(math.ceil(mean + PAD_SDS * sd))
    size = 8 * int(math.ceil(size / 8))
    return max(1, min(n, size))


class PoissonSampler:
    """Draws Poisson batches: each of the n records joins independently with probability q.

    Args:
        n: number of records.
        q: sampling probability in (0, 1].
        seed: an int, a ``numpy.random.Generator`` or None (OS entropy). Keep a fixed seed secret:
            amplification by sampling assumes the adversary does not know which records were drawn.
    """

    def __init__(self, n: int, q: float, seed=None):
        self.n = check_positive_int(n, "n")
        self.q = check_sampling_probability(q, "q")
        self._rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)

    def sample(self) -> np.ndarray:
        """One step's batch: the sorted indices of the records drawn (possibly empty)."""
        return np.flatnonzero(self._rng.random(self.n) < self.q)

    def masks(self, steps: int) -> np.ndarray:
        """``steps × n`` boolean membership matrix of ``steps`` independent draws."""
        steps = check_positive_int(steps, "steps")
        return self._rng.random((steps, self.n)) < self.q


def pad_batch(x: np.ndarray, y: np.ndarray, indices: np.ndarray, size: int):
    """Gather ``x[indices], y[indices]`` into zero-padded arrays with a 0/1 mask.

    The padded shape is ``size``, or the smallest multiple of ``size`` that holds every index
    (never truncated).

    Returns:
        ``(x_batch, y_batch, mask)`` with ``mask[i] = 1`` for real rows and 0 for padding.
    """
    k = len(indices)
    rows = size * max(1, -(-k // size))
    xb = np.zeros((rows,) + x.shape[1:], dtype=x.dtype)
    yb = np.zeros((rows,) + y.shape[1:], dtype=y.dtype)
    mask = np.zeros((rows,), dtype=np.float32)
    xb[:k], yb[:k], mask[:k] = x[indices], y[indices], 1.0
    return xb, yb, mask


def poisson_dataset(x, y, q: float, steps_per_epoch: int, *, seed=None, padded_size: int | None = None
                    ) -> tf.data.Dataset:
    """A ``tf.data`` pipeline of ``steps_per_epoch`` padded Poisson batches ``(x, y, mask)`` per pass.

    Every pass (every Keras epoch) draws fresh batches from one sampler stream.

    Args:
        x, y: the n records and labels (numpy arrays, same length).
        q: sampling probability in (0, 1].
        steps_per_epoch: batches per pass.
        seed: sampler seed (see :class:`PoissonSampler`).
        padded_size: the padded shape; :func:`padded_batch_size` if None.
    """
    x, y = np.asarray(x), np.asarray(y)
    if len(x) != len(y):
        raise ValueError(f"x and y must have the same number of records, got {len(x)} and {len(y)}")
    if x.dtype != np.float32 and np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float32)
    sampler = PoissonSampler(len(x), q, seed)
    steps_per_epoch = check_positive_int(steps_per_epoch, "steps_per_epoch")
    size = padded_batch_size(len(x), sampler.q) if padded_size is None else check_positive_int(padded_size,
                                                                                            "padded_size")

    def generate():
        for _ in range(steps_per_epoch):
            yield pad_batch(x, y, sampler.sample(), size)

    signature = (
        tf.TensorSpec((None,) + x.shape[1:], tf.as_dtype(x.dtype)),
        tf.TensorSpec((None,) + y.shape[1:], tf.as_dtype(y.dtype)),
        tf.TensorSpec((None,), tf.float32),
    )
    ds = tf.data.Dataset.from_generator(generate, output_signature=signature)
    return ds.apply(tf.data.experimental.assert_cardinality(steps_per_epoch)).prefetch(2)
