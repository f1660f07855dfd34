"""The functional head's statistics past one array: a ``tf.data`` stream, several devices, several workers.

The head's private data enter only through ``S1 = Σ_i p_i(½·1 − y_i)ᵀ`` and ``S2 = Σ_i p_i p_iᵀ``
(:mod:`tfdpmech.mechanisms.functional_head.functional`; AdLM Eq. 25, Zhang et al. PVLDB 2012 §5). Both are sums over the
records, so they can be accumulated batch by batch, in float64, with memory ``O(d² + d·C)``
whatever the number of records n, and summed across devices and machines before the release.

Three ways to compute them, all ending in the **one** release of
:meth:`~tfdpmech.mechanisms.functional_head.FunctionalHead.fit` (noise drawn once, after the whole pass):

* :func:`stream_statistics` on one process: every batch of a ``tf.data.Dataset`` of ``(x, y)``
  batches is checked record by record (the checks of the array path: finite values, labels, record
  shape, records shared with the extractor's public data, feature bounds) and added to the running
  sums. A record that breaks a check stops the pass with an error naming its index (its position
  in the stream, from 0); nothing has been released then.
* :func:`distributed_statistics` under ``tf.distribute.MirroredStrategy`` (several devices) or
  ``MultiWorkerMirroredStrategy`` (several workers): the stream carries each record's index, the
  record checks run in every worker's input pipeline, each replica sums its shard on its device,
  the sums are all-reduced (``ReduceOp.SUM``), and the release happens on the chief only (one
  noise draw for the whole cluster); the other workers receive the released (noisy) statistics
  through one more all-reduce, post-processing, and record no release of their own.
* the array path of :meth:`~tfdpmech.mechanisms.functional_head.FunctionalHead.fit` (one matrix product).

The number of records n is public under replace-one DP (it sets the ridge floor and is recorded
with the release); for a stream it is counted during the pass, and the release comes after the
pass. A dataset that cannot end is refused before anything is read, and any other stops with an error
past ``max_records`` records (:mod:`tfdpmech.mechanisms.functional_head.stream_end`); nothing is released then.
"""

from __future__ import annotations

import hashlib
import math
import time

import numpy as np
import tensorflow as tf

from ...distribute import SUPPORTED_STRATEGIES, check_strategy, is_chief
from ...validation import check_array
from .feature_map import feature_map
from .stream_end import DEFAULT_MAX_RECORDS, check_finite_dataset, check_record_count

__all__ = ["check_finite_dataset", "check_strategy", "stream_statistics", "distributed_statistics", "fit_stream", "is_chief",
           "SUPPORTED_STRATEGIES", "DEFAULT_RECORDS_PER_REPLICA", "DEFAULT_MAX_RECORDS", "check_record_count"]

DEFAULT_RECORDS_PER_REPLICA = 4096  # records per replica per step of the distributed pass (no effect on privacy)


# --------------------------------------------------------------------------------------------
# Per-record checks (host), shared by the stream and by the distributed input pipeline
# --------------------------------------------------------------------------------------------
def _first(bad) -> int:
    return int(np.flatnonzero(bad)[0])


def _labels_one_hot(y, num_classes: int, offset: int) -> np.ndarray:
    """One-hot float64 labels of a batch, or a ValueError naming the first bad record."""
    y = np.asarray(y)
    if y.dtype == object or not (np.issubdtype(y.dtype, np.number) or y.dtype == bool):
        raise TypeError(f"y must hold numeric labels, got dtype {y.dtype}")
    if y.ndim == 2:
        if y.shape[1] != num_classes:
            raise ValueError(f"y has {y.shape[1]} classes at record {offset}, expected num_classes={num_classes}")
        bad = ~(np.all((y == 0) | (y == 1), axis=1) & (np.sum(y, axis=1) == 1))
        if bad.any():
            raise ValueError(
                f"record {offset + _first(bad)} of the stream has label {y[_first(bad)].tolist()}, not one-hot "
                "(entries 0/1, exactly one 1); fix or drop that record (integer labels are accepted too)"
            )
        return y.astype(np.float64)
    if y.ndim != 1:
        raise ValueError(f"y must be integer class ids (batch,) or one-hot (batch, {num_classes}), got shape {y.shape}")
    bad = ~np.isfinite(y.astype(np.float64)) | (y != np.round(y)) | (y < 0) | (y >= num_classes)
    if bad.any():
        raise ValueError(
            f"record {offset + _first(bad)} of the stream has label {y[_first(bad)].item()!r}, not an integer in "
            f"[0, {num_classes - 1}]; fix or drop that record (or check num_classes)"
        )
    return np.eye(num_classes)[y.astype(np.int64)]


def check_records(x, y, *, num_classes: int, offset: int, record_shape=None, public_hashes=None):
    """Check one batch record by record; return ``(x float, y one-hot float64)``.

    Args:
        x, y: the batch (numpy). offset: the stream index of its first record.
        record_shape: the shape every record must have (None: any).
        public_hashes: SHA-1 digests of the extractor's public records (see
            :func:`tfdpmech.features.public_data.record_hashes`), or None.

    Raises:
        ValueError / TypeError: naming the stream index of the first record that breaks a check.
    """
    x = np.asarray(x)
    if x.dtype == object or not (np.issubdtype(x.dtype, np.number) or x.dtype == bool) \
            or np.issubdtype(x.dtype, np.complexfloating):
        raise TypeError(f"x must hold real numeric records, got dtype {x.dtype}")
    if x.ndim < 2:
        raise ValueError(
            f"x must come in batches of records (rank >= 2), got a batch of shape {x.shape} at record {offset}; "
            "batch the dataset, e.g. tf.data.Dataset.from_tensor_slices((x, y)).batch(1024)"
        )
    if record_shape is not None and tuple(x.shape[1:]) != tuple(record_shape):
        raise ValueError(f"record {offset} of the stream has shape {tuple(x.shape[1:])}, the records before it "
                         f"{tuple(record_shape)}; every record must have the same shape")
    if len(x) != len(y):
        raise ValueError(f"a batch starting at record {offset} has {len(x)} records but {len(y)} labels; pass one "
                         "label per record")
    bad = ~np.all(np.isfinite(x.reshape(len(x), -1)), axis=1)
    if bad.any():
        raise ValueError(f"record {offset + _first(bad)} of the stream holds NaN or inf; remove or impute it before "
                         "the head's pass (nothing has been released)")
    y1 = _labels_one_hot(y, num_classes, offset)
    if public_hashes is not None:
        rows = np.ascontiguousarray(x, dtype=np.float32).reshape(len(x), -1)
        for i, row in enumerate(rows):
            if hashlib.sha1(row).hexdigest() in public_hashes:
                raise ValueError(
                    f"record {offset + i} of the stream equals a record the feature extractor was trained on "
                    "(trained_on): the features are then not independent of the private data. Take the public "
                    "records from a disjoint part (tfdpmech.features.split_public) or from another source"
                )
    return x, y1


def _bounds_for(head):
    """``(low, high, why)`` every real feature must obey for the head's sensitivity (host and device)."""
    low, high = -math.inf, math.inf
    why = []
    if head.features is not None:
        low, high = head.features.bounds
        why.append(f"extractor {head.features.name!r} declares bounds {list(head.features.bounds)}")
    if head.mechanism == "laplace":
        low, high = max(low, 0.0), min(high, 1.0)
        why.append("mechanism='laplace' needs every feature in [0, 1] (use bounded features or mechanism='gaussian')")
    elif head.nonnegative:
        low = max(low, 0.0)
        why.append("nonnegative=True (pass nonnegative=False for the larger Δ₂)")
    return low, high, "; ".join(why)


def _check_feature_bounds(f, low, high, why, offset):
    bad = np.any((f < low) | (f > high), axis=1)
    if bad.any():
        i = _first(bad)
        raise ValueError(
            f"record {offset + i} of the stream has features in [{f[i].min():g}, {f[i].max():g}], outside "
            f"[{low:g}, {high:g}] ({why}); features are never clipped silently, and nothing has been released"
        )


# --------------------------------------------------------------------------------------------
# One process
# --------------------------------------------------------------------------------------------
def _batches(dataset):
    for element in dataset.as_numpy_iterator():
        if not isinstance(element, tuple) or len(element) != 2:
            raise ValueError("the dataset must yield (x, y) batches, e.g. tf.data.Dataset.from_tensor_slices((x, y))"
                             ".batch(1024); sample weights are not accepted (every record counts once)")
        yield element


def stream_statistics(head, dataset, *, max_records: int = DEFAULT_MAX_RECORDS):
    """``(S1, S2, n, d')`` of a stream of ``(x, y)`` batches, float64, in one pass (memory independent of n).

    Args:
        head: the :class:`~tfdpmech.mechanisms.functional_head.FunctionalHead` (its features, mechanism, classes).
        dataset: a finite ``tf.data.Dataset`` yielding ``(x, y)`` batches.
        max_records: the pass stops with an error past this many records.

    Raises:
        ValueError / TypeError: an endless dataset (before anything is read), an empty one, more than
            ``max_records`` records, or the first record that breaks a check (named by its index in the stream).
    """
    check_finite_dataset(dataset)
    low, high, why = _bounds_for(head)
    public = getattr(head.features, "_public_hashes", None) if head.features is not None else None
    record_shape = None if head.features is None else tuple(head.features.frozen.inputs[0].shape[1:])
    s1 = s2 = None
    n = 0
    for x, y in _batches(dataset):
        if len(x) == 0:
            continue
        x, y1 = check_records(x, y, num_classes=head.num_classes, offset=n, record_shape=record_shape,
                              public_hashes=public)
        record_shape = tuple(x.shape[1:])
        if head.features is None:
            f = x.reshape(len(x), -1).astype(np.float64)
        else:
            try:
                f = head.features(x, batch_size=head.batch_size, name=f"x (records {n}…{n + len(x) - 1} of the stream)")
            except ValueError as exc:
                raise ValueError(f"records {n}…{n + len(x) - 1} of the stream: {exc}") from exc
        _check_feature_bounds(f, low, high, why, n)
        p = feature_map(f, clip_norm=head.mechanism == "gaussian")
        b1, b2 = p.T @ (0.5 - y1), p.T @ p
        s1, s2 = (b1, b2) if s1 is None else (s1 + b1, s2 + b2)
        n += len(x)
        check_record_count(n, max_records)
    if n == 0:
        raise ValueError("the dataset holds no record; pass the private records (nothing has been released)")
    return s1, s2, n, s2.shape[0] - 1


# --------------------------------------------------------------------------------------------
# Several devices / workers
# --------------------------------------------------------------------------------------------
def _indexed(dataset, head, global_batch: int):
    """Unbatch, number every record (its stream index), check it on the host, rebatch to the global batch."""
    low_rank = None if head.features is None else len(head.features.frozen.inputs[0].shape) - 1
    public = getattr(head.features, "_public_hashes", None) if head.features is not None else None
    num_classes = head.num_classes
    x_dtype = tf.float64 if head.features is None else tf.float32  # feature arrays keep their precision
    spec = dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) != 2:
        raise ValueError("the dataset must yield (x, y) batches, e.g. tf.data.Dataset.from_tensor_slices((x, y))"
                         ".batch(1024)")
    if spec[0].shape.rank is not None and spec[0].shape.rank < 2:
        raise ValueError("x must come in batches of records (rank >= 2); batch the dataset, e.g. "
                         "tf.data.Dataset.from_tensor_slices((x, y)).batch(1024)")
    if low_rank is not None and spec[0].shape.rank is not None and spec[0].shape.rank - 1 != low_rank:
        raise ValueError(f"x has records of rank {spec[0].shape.rank - 1}, the extractor takes rank {low_rank}")

    def host_check(first_index, x, y):
        check_records(x, y, num_classes=num_classes, offset=int(first_index), public_hashes=public)
        return x, y

    def checked(i, x, y):
        # the records flow through the check (a data dependency: it cannot be pruned or reordered away)
        xc, yc = tf.numpy_function(host_check, [i[0], x, y], [x.dtype, y.dtype], stateful=True)
        xc.set_shape(x.shape)
        yc.set_shape(y.shape)
        yc = tf.cast(yc, tf.float64)
        if y.shape.rank == 1:  # integer ids (checked above): one-hot
            yc = tf.one_hot(tf.cast(yc, tf.int32), num_classes, dtype=tf.float64)
        return i, tf.cast(xc, x_dtype), yc

    ds = dataset.unbatch().enumerate().batch(global_batch)
    ds = ds.map(lambda i, xy: (i, xy[0], xy[1]))
    # every worker reads the whole stream and keeps its share of each global batch (not whole files)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return ds.map(checked).with_options(options)


def _replica_sums(head, low: float, high: float):
    """The per-replica step: features, feature map and (S1, S2, n) of the replica's shard, float64."""
    clip = head.mechanism == "gaussian"
    features = head.features
    big = tf.constant(np.iinfo(np.int64).max, tf.int64)

    def step(i, x, y):
        rows = tf.shape(x)[0]
        if features is None:
            f = tf.reshape(tf.cast(x, tf.float64), (rows, -1))
            mixes = tf.constant(False)
        else:
            f32 = tf.reshape(features.frozen(x, training=False), (rows, -1))
            alone = tf.reshape(features.frozen(x[:1], training=False), (-1, f32.shape[-1] or tf.shape(f32)[-1]))
            # a record's features must not depend on the other records of its batch (as on one process)
            mixes = tf.logical_and(rows > 1, tf.reduce_any(
                tf.abs(alone - f32[:1]) > 1e-5 + 1e-4 * tf.abs(f32[:1])))
            f = tf.cast(f32, tf.float64)
        ok_rows = tf.reduce_all(tf.math.is_finite(f), axis=1) & tf.reduce_all((f >= low) & (f <= high), axis=1)
        first_bad = tf.reduce_min(tf.where(ok_rows, big, i))
        q = tf.concat([f, tf.ones_like(f[:, :1])], axis=1)
        if clip:
            q = q / tf.maximum(tf.constant(1.0, tf.float64), tf.norm(q, axis=1, keepdims=True))
        s1 = tf.matmul(q, 0.5 - y, transpose_a=True)
        s2 = tf.matmul(q, q, transpose_a=True)
        return s1, s2, tf.cast(rows, tf.float64), tf.reshape(first_bad, (1,)), tf.reshape(tf.cast(mixes, tf.int64), (1,))

    return step


def distributed_statistics(head, dataset, strategy, *, records_per_replica: int | None = None,
                           max_records: int = DEFAULT_MAX_RECORDS):
    """``(S1, S2, n, d')`` summed over every replica of ``strategy`` (all-reduce SUM), float64.

    Every task runs this; every task gets the same sums (the release that follows happens on the
    chief only: see :meth:`~tfdpmech.mechanisms.functional_head.FunctionalHead.fit`).

    Args:
        head: the :class:`~tfdpmech.mechanisms.functional_head.FunctionalHead`.
        dataset: a finite ``tf.data.Dataset`` of ``(x, y)`` batches holding all private records, the same
            on every worker (each worker keeps its share of every global batch).
        strategy: a supported ``tf.distribute`` strategy (:func:`check_strategy`).
        records_per_replica: records per replica per step (None: the head's ``batch_size`` or 4096).
        max_records: the pass stops with an error past this many records (on every worker alike).

    Raises:
        ValueError: endless dataset (before anything is read), no record, more than ``max_records``, a record that breaks a check
            (named by its stream index), or a collective that failed (a worker lost: nothing released).
    """
    check_finite_dataset(dataset)
    low, high, why = _bounds_for(head)
    per_replica = records_per_replica or head.batch_size or DEFAULT_RECORDS_PER_REPLICA
    global_batch = int(per_replica) * strategy.num_replicas_in_sync
    dist = strategy.experimental_distribute_dataset(_indexed(dataset, head, global_batch))
    replica_step = _replica_sums(head, float(low), float(high))

    @tf.function
    def step(element):
        s1, s2, n, first_bad, mixes = strategy.run(replica_step, args=element)
        sum_ = tf.distribute.ReduceOp.SUM
        return (strategy.reduce(sum_, s1, axis=None), strategy.reduce(sum_, s2, axis=None),
                strategy.reduce(sum_, n, axis=None), strategy.gather(first_bad, axis=0),
                strategy.reduce(sum_, mixes, axis=None))

    s1 = s2 = None
    n = 0
    try:
        for element in dist:
            b1, b2, bn, bad, mixes = step(element)
            bad = int(np.min(bad.numpy()))
            if bad != np.iinfo(np.int64).max:
                raise ValueError(
                    f"record {bad} of the stream has non-finite features or features outside [{low:g}, {high:g}] "
                    f"({why or 'finite features needed'}); nothing has been released")
            if int(np.sum(mixes.numpy())):
                raise ValueError(
                    f"feature extractor {head.features.name!r}: a record's features change with the other records of "
                    "its batch, so no per-record sensitivity would hold; use per-record layers only")
            b1, b2 = b1.numpy(), b2.numpy()
            s1, s2 = (b1, b2) if s1 is None else (s1 + b1, s2 + b2)
            n += int(round(float(bn.numpy())))
            check_record_count(n, max_records)
    except (tf.errors.InvalidArgumentError, tf.errors.UnknownError) as exc:
        message = getattr(exc, "message", str(exc))
        if "record " in message and "of the stream" in message:  # a host check in the input pipeline
            start = message.find("record ")
            raise ValueError(message[start:].split("\n")[0].strip()) from None
        raise
    if n == 0:
        raise ValueError("the dataset holds no record; pass the private records (nothing has been released)")
    return s1, s2, n, s2.shape[0] - 1


def broadcast_from_chief(strategy, arrays, chief: bool):
    """Every task receives the chief's arrays (one SUM all-reduce; the other tasks contribute zeros).

    Used for the released (noisy) statistics only: post-processing of the release.
    """
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):  # one process holds every replica
        return arrays
    out = []
    for a in arrays:
        a = np.asarray(a, np.float64)
        value = a if chief else np.zeros_like(a)

        def fn(ctx, value=value):
            first_local = ctx.replica_id_in_sync_group == 0 if chief else False
            return tf.constant(value if first_local else np.zeros_like(value))

        per_replica = strategy.experimental_distribute_values_from_function(fn)
        out.append(strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None).numpy())
    return out


def fit_stream(head, x, y, strategy, max_records: int):
    """:meth:`~tfdpmech.mechanisms.functional_head.FunctionalHead.fit` of ``head`` on a ``tf.data.Dataset`` and/or under a
    ``tf.distribute`` strategy: the statistics of the whole pass, then the one release (on the chief)."""
    if isinstance(x, tf.data.Dataset):
        if y is not None:
            raise ValueError("y must be None when x is a tf.data.Dataset: the dataset yields (x, y) batches; pass "
                             "tf.data.Dataset.from_tensor_slices((x, y)).batch(1024) alone")
        dataset = x
    else:  # arrays under a strategy: the same distributed pass (one release, on the chief)
        if y is None:
            raise ValueError("y (the labels) is required when x is an array")
        x_arr = check_array(x, "x", ndim_min=2)
        y_arr = check_array(y, "y")
        if len(x_arr) != len(y_arr):
            raise ValueError(f"x has {len(x_arr)} records but y has {len(y_arr)}; pass one label per record")
        dataset = tf.data.Dataset.from_tensor_slices((x_arr, y_arr)).batch(DEFAULT_RECORDS_PER_REPLICA)
    started = time.perf_counter()
    if strategy is None:
        s1, s2, n, d_real = stream_statistics(head, dataset, max_records=max_records)
        return head._release_and_solve(s1, s2, n, d_real, started, time.perf_counter())
    s1, s2, n, d_real = distributed_statistics(head, dataset, strategy, max_records=max_records)
    done = time.perf_counter()
    if is_chief(strategy):
        head._release_and_solve(s1, s2, n, d_real, started, done, finish=False)
        broadcast_from_chief(strategy, [head._s1_bar, head._s2_bar], True)
    else:  # no noise drawn, nothing recorded here: receive the chief's release (post-processing)
        del s1, s2
        d = d_real + 1
        head._s1_bar, head._s2_bar = broadcast_from_chief(
            strategy, [np.zeros((d, head.num_classes)), np.zeros((d, d))], False)
        _, _, noise_std, _ = head._calibration(d_real)
        head.n, head.num_features = n, d
        head.ridge = head._ridge_for(noise_std, d, n)
        head.received_release = True
    return head._solve_and_build(started, done)
