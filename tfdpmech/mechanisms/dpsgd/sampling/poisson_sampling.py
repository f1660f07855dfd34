"""Poisson batches: every step each of the n records joins independently with probability q.

Steps 1 and 2 of Poisson DP-SGD (:mod:`tfdpmech.mechanisms.dpsgd.runs.poisson`): :class:`PoissonSampler` draws
``B_t = {i : U_i < q}``; :func:`pad_batch` pads it with masked all-zero rows to the fixed shape
:func:`padded_batch_size` (never cutting a record); :func:`poisson_dataset` is the ``tf.data``
pipeline of those batches ``(x, y, mask)``.

The batch of global step ``t`` is a pure function of a secret sampling key and ``t``
(:func:`poisson_batch`): the draws of different steps are independent, a step's draw can be
recomputed on any worker, and a stream that continues from the step count never repeats a draw
(:func:`run_dataset`, the batches of one :class:`~tfdpmech.mechanisms.dpsgd.DPSGD` run, each tagged
with the run and the step it was drawn for).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import tensorflow as tf

from ....accounting.poisson_dpsgd import check_sampling_probability
from ....input_pipeline import without_autotune
from ....validation import check_positive_int
from .augmentation import repeat_views
from .record_sources import LazyRows
from .records import is_structure, record_count, records_spec, take_rows

__all__ = ["PoissonSampler", "padded_batch_size", "pad_batch", "poisson_dataset", "PAD_SDS", "ROW_MULTIPLE", "row_multiple",
           "check_seed", "check_expected_batch_size", "sampling_key", "step_rng", "poisson_batch",
           "tagged_poisson_batch", "run_element", "run_signature", "run_dataset", "is_run_dataset", "record_spec"]

PAD_SDS = 6.0  # padded shape: expected size + 6 standard deviations (overflow ~1e-9 per step)
ROW_MULTIPLE = 8  # tfdpmech's engine on one device pads a batch to the next multiple of row_multiple(L) <= this


def check_expected_batch_size(expected_batch_size, n: int) -> int:
    """``expected_batch_size`` as a positive int at most n (so that q = L/n <= 1)."""
    expected_batch_size = check_positive_int(expected_batch_size, "expected_batch_size")
    if expected_batch_size > n:
        raise ValueError(
            f"expected_batch_size={expected_batch_size} exceeds the number of training records n={n}, so "
            f"q = expected_batch_size / n = {expected_batch_size / n:.4g} > 1; pass expected_batch_size <= {n} "
            "(expected_batch_size = n samples every record at every step)"
        )
    return expected_batch_size


def row_multiple(expected_batch_size: int) -> int:
    """The multiple a Poisson batch of expected size L is padded to on tfdpmech's engine on one device:
    ``min(8, max(1, L // 8))``. Its traced step takes a batch of any size (one trace), so padding only rounds the
    rows: at most ``m − 1`` rows a step, about ``(m − 1) / 2`` on average, under 1/16 of L (a batch of expected 32
    computes on 1.5 padding rows on average, at most 3)."""
    return min(ROW_MULTIPLE, max(1, int(expected_batch_size) // 8))


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


def pad_batch(x, y, indices: np.ndarray, size: int, weights: np.ndarray | None = None):
    """Gather ``x[indices], y[indices]`` into zero-padded arrays with a mask (``x`` and ``y`` may be lists,
    tuples or dicts of arrays: several inputs or outputs, :mod:`.records`).

    The padded shape is ``size``, or the smallest multiple of ``size`` that holds every index
    (never truncated).

    Returns:
        ``(x_batch, y_batch, mask)`` with ``mask[i]`` the record's weight (1 without ``weights``; see
        :mod:`.record_weights`) for real rows and 0 for padding.
    """
    k = len(indices)
    rows = size * max(1, -(-k // size))
    mask = np.zeros((rows,), dtype=np.float32)
    mask[:k] = 1.0 if weights is None else weights[indices]
    return take_rows(x, indices, rows), take_rows(y, indices, rows), mask


def check_seed(seed, name: str = "seed"):
    """``seed`` as given when it is None, a non-negative int or a ``numpy.random.SeedSequence``.

    Raises:
        TypeError: any other type (a string, a float, a bool), naming ``name``.
        ValueError: a negative int.
    """
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{name} must be None (OS entropy) or a non-negative int, got {seed!r} "
                        f"({type(seed).__name__}); e.g. {name}=1234, kept secret outside experiments")
    if seed < 0:
        raise ValueError(f"{name} must be a non-negative int or None, got {seed}; e.g. {name}=1234")
    return int(seed)


def sampling_key(seed=None) -> tuple:
    """The secret sampling key: four 32-bit words from ``seed`` (see :func:`check_seed`), OS entropy for None."""
    seed = check_seed(seed)
    sequence = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return tuple(int(w) for w in sequence.generate_state(4))


def step_rng(key, step: int) -> np.random.Generator:
    """The generator of step ``step`` under ``key``: independent streams for different steps."""
    return np.random.default_rng(np.random.SeedSequence(list(key), spawn_key=(int(step),)))


def poisson_batch(x, y, q: float, padded: int, key, step: int, weights: np.ndarray | None = None, partitions=None):
    """The batch of global step ``step``: each of the n records joins independently with probability q.

    A pure function of the secret ``key`` (:func:`sampling_key`) and ``step``; ``(x, y, mask)`` padded to
    ``padded`` rows (or the next multiple, never cut), as :func:`pad_batch` (the mask holds the sampled
    records' ``weights``, when given). ``partitions``: a :class:`~.cyclic_poisson.CyclicPartitions` (BandMF):
    only the records of step t's partition may join, each with probability q.
    """
    if partitions is not None:
        return pad_batch(x, y, partitions.sample(q, key, step), padded, weights)
    return pad_batch(x, y, PoissonSampler(record_count(x), q, step_rng(key, step)).sample(), padded, weights)


def _arrays(x, y):
    """``x`` and ``y`` as arrays (or tuples and dicts of arrays: tf.data takes no lists), floats as float32."""
    def arrays(value):
        if is_structure(value):
            value = tf.nest.map_structure(np.asarray, tuple(value) if isinstance(value, list) else value)
            return tf.nest.map_structure(_float32, value)
        return _float32(value if isinstance(value, LazyRows) else np.asarray(value))
    x, y = arrays(x), arrays(y)
    if record_count(x) != record_count(y):
        raise ValueError(f"x and y must have the same number of records, got {record_count(x)} and {record_count(y)}")
    return x, y


def _float32(a: np.ndarray) -> np.ndarray:
    if isinstance(a, LazyRows):  # read by index, its rows cast as they are read
        return a
    return a.astype(np.float32) if a.dtype != np.float32 and np.issubdtype(a.dtype, np.floating) else a


def record_spec(a: np.ndarray) -> tf.TensorSpec:
    """The ``tf.TensorSpec`` of a batch of records like ``a`` (first dimension None)."""
    return tf.TensorSpec((None,) + a.shape[1:], tf.as_dtype(a.dtype))


def _stream(generate, signature, steps_per_epoch: int) -> tf.data.Dataset:
    ds = tf.data.Dataset.from_generator(generate, output_signature=signature)
    return without_autotune(ds.apply(tf.data.experimental.assert_cardinality(steps_per_epoch)).prefetch(2))


def poisson_dataset(x, y, q: float, steps_per_epoch: int, *, seed=None, padded_size: int | None = None
                    ) -> tf.data.Dataset:
    """A ``tf.data`` pipeline of ``steps_per_epoch`` padded Poisson batches ``(x, y, mask)`` per pass.

    Every pass (every Keras epoch) continues the step count of the previous one: pass k draws the
    batches of steps ``k·steps_per_epoch ...`` from one secret key, so no draw is repeated.

    Args:
        x, y: the n records and labels (numpy arrays, same length).
        q: sampling probability in (0, 1].
        steps_per_epoch: batches per pass.
        seed: sampling seed (see :func:`check_seed`; None: OS entropy). Keep a fixed one secret.
        padded_size: the padded shape; :func:`padded_batch_size` if None.
    """
    x, y = _arrays(x, y)
    q = check_sampling_probability(q, "q")
    n = check_positive_int(record_count(x), "n")
    steps_per_epoch = check_positive_int(steps_per_epoch, "steps_per_epoch")
    size = padded_batch_size(n, q) if padded_size is None else check_positive_int(padded_size, "padded_size")
    key = sampling_key(seed)
    passes = [0]

    def generate():
        first = passes[0] * steps_per_epoch
        passes[0] += 1
        for step in range(first, first + steps_per_epoch):
            yield poisson_batch(x, y, q, size, key, step)

    signature = (records_spec(x), records_spec(y), tf.TensorSpec((None,), tf.float32))
    return _stream(generate, signature, steps_per_epoch)


def tagged_poisson_batch(x, y, q: float, padded: int, key, step: int, run_id: int, weights=None, partitions=None):
    """:func:`poisson_batch` plus its ticket: ``(x, y, mask, ticket)``, ``ticket`` = ``(run_id, step)`` on every row."""
    xb, yb, mask = poisson_batch(x, y, q, padded, key, step, weights, partitions)
    return xb, yb, mask, np.tile(np.array([run_id, step], np.int64), (len(mask), 1))


def run_element(parts):
    """``(x, y, mask, ticket)`` as the element a run's train step takes: ``(x, y, (mask, ticket))``."""
    x, y, mask, ticket = parts
    return x, y, (mask, ticket)


def run_signature(x: np.ndarray, y: np.ndarray):
    """The ``tf.TensorSpec`` structure of :func:`run_element` for records like ``x`` and labels like ``y``."""
    return records_spec(x), records_spec(y), (tf.TensorSpec((None,), tf.float32), tf.TensorSpec((None, 2), tf.int64))


def is_run_dataset(data) -> bool:
    """Whether ``data`` yields the elements of :func:`run_dataset` (the train step then checks each ticket)."""
    spec = getattr(data, "element_spec", None)
    if not (isinstance(spec, tuple) and len(spec) == 3 and isinstance(spec[2], tuple) and len(spec[2]) == 2):
        return False
    ticket = spec[2][1]
    return isinstance(ticket, tf.TensorSpec) and ticket.dtype == tf.int64 and ticket.shape.as_list() == [None, 2]


def run_dataset(x, y, q: float, steps_per_epoch: int, *, key, padded_size: int, first_step, run_id: int,
                weights: np.ndarray | None = None, views: int = 1, augment=None, users=None,
                partitions=None) -> tf.data.Dataset:
    """The Poisson batches of one run: ``(x, y, (mask, ticket))``, ``steps_per_epoch`` per pass.

    Each new iterator (each Keras epoch, each ``fit``) starts at ``first_step()``, the run's global step
    count, and draws the batches of the steps from there: batch t is :func:`poisson_batch` of
    ``(key, t)``. ``ticket`` holds ``(run_id, t)`` on every row (rows travel with their slice of the batch
    across replicas), so the run's train step can refuse a batch it did not draw, or one drawn for
    another step. ``weights``: each record's weight (:mod:`.record_weights`), carried in the mask. ``views``:
    each row repeated that many times, consecutively, its weight divided by it, and ``augment(x, steps)``
    applied to the batch's rows (augmentation multiplicity, :mod:`.augmentation`). ``users``: a
    :class:`~.user_sampling.UserRecords`: users are sampled, each in k rows (user-level DP-SGD). ``partitions``: a
    :class:`~.cyclic_poisson.CyclicPartitions` (BandMF): step t samples only the units of its partition.
    """
    x, y = _arrays(x, y)
    steps_per_epoch = check_positive_int(steps_per_epoch, "steps_per_epoch")

    def generate():
        start = int(first_step())
        for step in range(start, start + steps_per_epoch):
            if users is not None:
                xb, yb, mask = users.batch(x, y, q, padded_size, key, step, weights, partitions)
                yield run_element((xb, yb, mask, np.tile(np.array([run_id, step], np.int64), (len(mask), 1))))
                continue
            yield run_element(repeat_views(*tagged_poisson_batch(x, y, q, padded_size, key, step, run_id, weights,
                                                                 partitions), views))

    ds = tf.data.Dataset.from_generator(generate, output_signature=run_signature(x, y))
    if augment is not None:
        ds = ds.map(lambda xb, yb, tagged: (augment(xb, tagged[1][:, 1]), yb, tagged))
    return without_autotune(ds.apply(tf.data.experimental.assert_cardinality(steps_per_epoch)).prefetch(2))
