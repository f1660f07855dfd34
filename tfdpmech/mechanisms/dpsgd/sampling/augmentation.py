"""Augmentation multiplicity (De et al. 2022, "Unlocking high-accuracy differentially private image
classification through scale", §3): each sampled record is augmented K times, and its K views are one
clipping unit.

The step adds ``clip_C((1/K) Σ_v ∇θ ℓ(view_v))`` per sampled record: the views' gradients are averaged, then
clipped once (:mod:`tfdpmech.mechanisms.dpsgd.clipping.layer_rules.groups`), so a record still moves the sum by at most
C and the accounting is the record-level one, unchanged; the augmentation's gradient noise falls with K. In a run's
batch the K views of a record are K consecutive rows, each with the record's weight divided by K.

The augmentation is a Keras layer (called on the batch with ``training=True``: Keras's own random stream) or
a function ``fn(record, seed) -> record`` of one record and a ``(2,)`` int32 stateless seed: the seed of row r
at step t comes from the run's secret sampling key, t and r, so every view and every step draws its own, and a
rerun draws the same. Ready functions: :func:`random_crop` (reflect padding, then a random crop back to the
record's size) and :func:`random_flip` (left-right; for data sets where a mirrored image is the same class),
and :func:`compose`. Before any release the augmentation runs on a few records and is refused if it changes a
record's shape or dtype or returns NaN or inf.
"""

from __future__ import annotations

import inspect
import numbers

import keras
import numpy as np
import tensorflow as tf

__all__ = ["random_crop", "random_flip", "compose", "check_multiplicity", "check_augmentation", "augment_batch",
           "repeat_views"]


def random_crop(padding: int = 4):
    """``fn(record, seed)``: reflect-pad an ``(H, W, C)`` record by ``padding`` pixels, then crop a random
    ``(H, W)`` window (the standard CIFAR / De et al. crop)."""
    if isinstance(padding, bool) or not isinstance(padding, numbers.Integral) or padding < 1:
        raise ValueError(f"padding must be an int >= 1, got {padding!r}")

    def crop(record, seed):
        padded = tf.pad(record, [[padding, padding], [padding, padding], [0, 0]], mode="REFLECT")
        return tf.image.stateless_random_crop(padded, tf.shape(record), seed=seed)

    return crop


def random_flip():
    """``fn(record, seed)``: flip an ``(H, W, C)`` record left-right with probability 1/2."""
    def flip(record, seed):
        return tf.image.stateless_random_flip_left_right(record, seed=seed)

    return flip


def compose(*fns):
    """``fn(record, seed)`` applying each of ``fns`` in turn, each with its own seed derived from ``seed``."""
    def composed(record, seed):
        for i, fn in enumerate(fns):
            record = fn(record, tf.random.experimental.stateless_fold_in(seed, i))
        return record

    return composed


def check_multiplicity(augmentation, multiplicity) -> int:
    """``multiplicity`` as an int K >= 1; K > 1 needs an augmentation (K identical views add nothing)."""
    if isinstance(multiplicity, (bool, np.bool_)) or not isinstance(multiplicity, numbers.Integral):
        raise TypeError(f"augmentation_multiplicity must be an int K >= 1, got {multiplicity!r}")
    if multiplicity < 1:
        raise ValueError(f"augmentation_multiplicity must be >= 1, got {multiplicity}; pass e.g. 4")
    if augmentation is not None and not callable(augmentation):
        raise TypeError(f"augmentation must be a Keras layer or a function fn(record, seed), got "
                        f"{type(augmentation).__name__}")
    if augmentation is not None and not isinstance(augmentation, keras.layers.Layer):
        _check_signature(augmentation)
    if multiplicity > 1 and augmentation is None:
        raise ValueError(f"augmentation_multiplicity={multiplicity} needs an augmentation (K identical views would "
                         "average to the record's own gradient); pass e.g. "
                         "augmentation=tfdpmech.mechanisms.dpsgd.sampling.augmentation.random_crop(4)")
    return int(multiplicity)


def _check_signature(fn) -> None:
    """Refuse a function that cannot be called as ``fn(record, seed)`` (a callable whose signature Python cannot
    read is left to :func:`check_augmentation`, which calls it)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(None, None)
    except TypeError:
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
        raise TypeError(f"augmentation must be called as fn(record, seed) (one record and a (2,) int32 stateless "
                        f"seed) and return the record augmented; got {name}{signature}. Take the seed as a second "
                        "argument (e.g. lambda record, seed: tf.image.stateless_random_flip_left_right(record, seed)"
                        "), use tfdpmech.mechanisms.dpsgd.sampling.augmentation.random_crop(4), or pass a Keras "
                        "layer") from None


def _seeds(key, steps, rows):
    """One stateless seed per row: from the run's key, the row's step and its position in the batch."""
    base = tf.constant([key[0] & 0x7FFFFFFF, key[1] & 0x7FFFFFFF], tf.int64)
    per_step = tf.map_fn(lambda t: tf.random.experimental.stateless_fold_in(base, t), tf.cast(steps, tf.int64),
                         fn_output_signature=tf.TensorSpec((2,), tf.int64))
    return tf.map_fn(lambda a: tf.random.experimental.stateless_fold_in(a[0], a[1]),
                     (per_step, tf.cast(tf.range(rows), tf.int64)), fn_output_signature=tf.TensorSpec((2,), tf.int64))


def augment_batch(augmentation, x, steps, key):
    """``x`` (one array of rows) with ``augmentation`` applied to every row (see the module docstring)."""
    if isinstance(augmentation, keras.layers.Layer):
        return tf.cast(augmentation(x, training=True), x.dtype)
    seeds = tf.cast(_seeds(key, steps, tf.shape(x)[0]), tf.int32)
    return tf.map_fn(lambda a: tf.cast(augmentation(a[0], a[1]), x.dtype), (x, seeds),
                     fn_output_signature=tf.TensorSpec(x.shape[1:], x.dtype))


def check_augmentation(augmentation, x, key) -> None:
    """Run ``augmentation`` on the first records of ``x`` (at most 4); refuse a changed shape or dtype, or NaN/inf.

    Raises:
        TypeError: ``x`` is several arrays (an augmentation takes one input). ValueError: see above.
    """
    if isinstance(x, (list, tuple, dict)):
        raise TypeError("augmentation applies to a model with one input array; got x as a "
                        f"{type(x).__name__} of arrays")
    sample = tf.constant(np.asarray(x[:min(4, len(x))]))
    try:
        if isinstance(augmentation, keras.layers.Layer):
            out = augmentation(sample, training=True)
        else:  # one record at a time, as the run applies it
            out = tf.stack([augmentation(sample[i], tf.constant([i, 0], tf.int32)) for i in range(len(sample))])
    except Exception as exc:  # pylint: disable=broad-except  (the user's function: its error, named)
        called = "augmentation(records, training=True)" if isinstance(augmentation, keras.layers.Layer) else (
            "fn(record, seed) on one record and a (2,) int32 seed")
        raise ValueError(f"augmentation failed on records of x, called as {called} ({type(exc).__name__}: "
                         f"{exc})") from exc
    out = tf.convert_to_tensor(out)
    if tuple(out.shape) != tuple(sample.shape) or out.dtype != sample.dtype:
        raise ValueError(f"augmentation must keep a record's shape and dtype: records {tuple(sample.shape[1:])} "
                         f"{sample.dtype.name} came back {tuple(out.shape[1:])} {out.dtype.name}")
    if not bool(tf.reduce_all(tf.math.is_finite(tf.cast(out, tf.float32)))):
        raise ValueError("augmentation returned NaN or inf on records of x")


def repeat_views(xb, yb, mask, ticket, k: int):
    """A padded Poisson batch with each row repeated k times (consecutive: one group per record), its weight / k."""
    if k == 1:
        return xb, yb, mask, ticket
    repeat = lambda a: np.repeat(a, k, axis=0)  # noqa: E731
    return (tf.nest.map_structure(repeat, xb), tf.nest.map_structure(repeat, yb), repeat(mask) / np.float32(k),
            repeat(ticket))
