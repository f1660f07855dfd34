"""Record weights under DP-SGD: Keras's ``sample_weight`` and ``class_weight``, and ``validation_split``.

A record's weight ``w_i`` scales its loss **before** its gradient is clipped: the step adds
``clip_C(∇θ (w_i ℓ_i))``, so one record's contribution stays at most C whatever its weight (a weight of
1e4 makes a record's gradient reach C sooner; it never lets it past C) and the accounting is unchanged. The
weight is part of the record: it travels with the record through the Poisson sampler (the batch's mask
holds ``w_i`` for a sampled record, 0 for a padding row), so a step reads the weights of its sampled
records only. ``class_weight`` is the ``sample_weight`` it implies (Keras's rule: the class of a one-hot
label is its argmax, of a single column its rounded value).

``validation_split`` is Keras's rule: the last ``floor(n · split)`` records (before any sampling) are held
out for validation; the run trains on, samples from and accounts for the others only.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .records import is_structure, record_count

__all__ = ["check_sample_weight", "class_weight_to_sample_weight", "split_for_validation"]


def check_sample_weight(sample_weight, n: int) -> np.ndarray:
    """``sample_weight`` as a float32 array of finite weights ``>= 0``: one per record, ``(n,)``, or one per
    position of a record's labels, ``(n, T, ...)`` (:mod:`.position_weights`).

    Raises:
        TypeError: not numeric. ValueError: not n rows (shape ``(n,)``, ``(n, 1)`` or ``(n, T, ...)``), or a
        negative, NaN or infinite weight (the message names the first).
    """
    try:
        weights = np.asarray(sample_weight)
    except Exception as exc:  # pylint: disable=broad-except  (anything numpy cannot read)
        raise TypeError(f"sample_weight must be an array of one weight per record, got {type(sample_weight).__name__}"
                        ) from exc
    if weights.dtype == object or not (np.issubdtype(weights.dtype, np.number) or weights.dtype == bool) \
            or np.iscomplexobj(weights):
        raise TypeError(f"sample_weight must hold real numbers, got dtype {weights.dtype}; pass e.g. "
                        "np.ones(len(x), np.float32)")
    if weights.ndim == 2 and weights.shape[1] == 1:
        weights = weights[:, 0]
    if weights.ndim == 0 or weights.shape[0] != n:
        raise ValueError(f"sample_weight must hold one weight per training record, shape ({n},), or one per position "
                         f"of a record's labels, shape ({n}, T) (keras-hub's padding mask); got shape {weights.shape}")
    weights = weights.astype(np.float64)
    bad = np.argwhere(~np.isfinite(weights) | (weights < 0))
    if bad.size:
        i = tuple(int(j) for j in bad[0])
        where = str(i[0]) if len(i) == 1 else ", ".join(map(str, i))
        raise ValueError(f"sample_weight[{where}] = {float(weights[i])!r}: every weight must be finite and >= 0 (a "
                         f"record's weight scales its loss before clipping); {len(bad)} weight(s) are not")
    return weights.astype(np.float32)


def _classes(y) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim >= 2 and y.shape[-1] > 1:
        return np.argmax(y.reshape(len(y), -1), axis=1)
    return np.rint(y.reshape(len(y))).astype(np.int64)


def class_weight_to_sample_weight(class_weight, y) -> np.ndarray:
    """The sample weights ``class_weight`` gives the records with labels ``y`` (one label array).

    Raises:
        TypeError: not a dict of int classes to numbers; ``y`` several outputs. ValueError: a weight that is
        negative, NaN or infinite, or a label whose class ``class_weight`` does not name.
    """
    if not isinstance(class_weight, dict) or not class_weight:
        raise TypeError(f"class_weight must be a non-empty dict {{class id: weight}}, got {class_weight!r}")
    if is_structure(y):
        raise TypeError("class_weight applies to a model with one output (one label array), as in Keras; for "
                        "several outputs pass sample_weight")
    table = {}
    for key, value in class_weight.items():
        if isinstance(key, (bool, np.bool_)) or not isinstance(key, numbers.Integral):
            raise TypeError(f"class_weight's keys must be int class ids, got {key!r} ({type(key).__name__})")
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
                or value < 0:
            raise ValueError(f"class_weight[{key}] = {value!r}: each weight must be a finite number >= 0")
        table[int(key)] = float(value)
    classes = _classes(y)
    missing = sorted(set(np.unique(classes).tolist()) - set(table))
    if missing:
        raise ValueError(f"class_weight has no weight for class(es) {missing[:10]} found in y; give every class a "
                         "weight (1.0 leaves a class as it is)")
    lookup = np.vectorize(table.__getitem__, otypes=[np.float32])
    return lookup(classes).astype(np.float32)


def split_for_validation(x, y, sample_weight, validation_split):
    """``(x_train, y_train, w_train, (x_val, y_val, w_val))``: Keras's split, the last ``floor(n·split)`` records
    held out; each part a view of the given arrays (nothing copied).

    Raises:
        TypeError / ValueError: ``validation_split`` not a number in [0, 1), or one that leaves no record to
        train on or none to validate on.
    """
    if isinstance(validation_split, (bool, np.bool_)) or not isinstance(validation_split, numbers.Real):
        raise TypeError(f"validation_split must be a float in [0, 1), got {validation_split!r}")
    if not 0.0 <= float(validation_split) < 1.0:
        raise ValueError(f"validation_split must be in [0, 1), got {validation_split!r}; e.g. validation_split=0.2")
    n = record_count(x)
    split_at = int(math.floor(n * (1.0 - float(validation_split))))  # Keras's rule
    if split_at < 1 or split_at == n and validation_split > 0:
        raise ValueError(f"validation_split={validation_split} of {n} records leaves {split_at} to train on and "
                         f"{n - split_at} to validate on; each part needs at least one record")

    def part(value, rows):
        if value is None:
            return None
        return (type(value)(part(v, rows) for v in value) if isinstance(value, (list, tuple)) else
                {k: part(v, rows) for k, v in value.items()} if isinstance(value, dict) else value[rows])

    train, held = slice(0, split_at), slice(split_at, n)
    return (part(x, train), part(y, train), part(sample_weight, train),
            (part(x, held), part(y, held), part(sample_weight, held)))
