"""Records of any Keras model signature: one array, or a list, tuple or dict of arrays (several inputs or
outputs), every array with one row per record.

A Poisson batch takes the same rows of every array (:func:`take_rows`); the checks name the array that
fails (``x['ids']``, ``y[1]``) and run before anything is released.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from ....array_checks import check_array
from .record_sources import LazyRows

__all__ = ["is_structure", "check_records", "take_rows", "records_spec", "record_count"]


def is_structure(value) -> bool:
    """Whether ``value`` is a list, tuple or dict of arrays (not one array)."""
    return isinstance(value, (list, tuple, dict))


def _leaf_names(value, name: str):
    if isinstance(value, dict):
        return {key: f"{name}[{key!r}]" for key in value}
    return [f"{name}[{i}]" for i in range(len(value))]


def check_records(value, name: str):
    """``value`` with every array checked (numeric, real, finite, non-empty) and of one length.

    Raises:
        TypeError / ValueError: an empty structure, a non-string dict key, a nested structure, an array that
            fails :func:`~tfdpmech.array_checks.check_array`, or arrays of different lengths (each named).
    """
    if isinstance(value, LazyRows):  # records read by index, each checked once already (.record_sources)
        return value
    if not is_structure(value):
        return check_array(value, name)
    if not value:
        raise ValueError(f"{name} is an empty {type(value).__name__}; pass one array per model input (or output)")
    if isinstance(value, dict) and not all(isinstance(k, str) for k in value):
        raise TypeError(f"{name} is a dict whose keys are not all strings ({list(value)!r}); key it by the model's "
                        "input (or output) names")
    names = _leaf_names(value, name)
    items = value.items() if isinstance(value, dict) else enumerate(value)
    checked = {}
    for key, leaf in items:
        if is_structure(leaf):
            raise TypeError(f"{names[key]} is a {type(leaf).__name__}; pass one array per model input (or output), "
                            "not nested structures")
        checked[key] = check_array(leaf, names[key])
    lengths = {names[k]: len(a) for k, a in checked.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"the arrays of {name} must hold one row per record, got lengths {lengths}")
    if isinstance(value, dict):
        return checked
    return type(value)(checked[i] for i in range(len(value))) if isinstance(value, tuple) else list(checked.values())


def record_count(value) -> int:
    """The number of records (rows of the first array)."""
    return len(tf.nest.flatten(value)[0])


def take_rows(value, indices: np.ndarray, rows: int):
    """The given rows of every array, zero-padded to ``rows`` rows (a Poisson batch: padding rows last)."""
    def take(a):
        out = np.zeros((rows,) + a.shape[1:], dtype=a.dtype)
        out[:len(indices)] = a[indices]
        return out
    return tf.nest.map_structure(take, value)


def records_spec(value):
    """The ``tf.TensorSpec`` structure of a batch of records like ``value`` (first dimension None)."""
    return tf.nest.map_structure(lambda a: tf.TensorSpec((None,) + a.shape[1:], tf.as_dtype(a.dtype)), value)
