"""Random-access sources larger than memory: each Poisson step reads only its sampled records.

Poisson sampling needs random access, not the data in memory: the batch of step t is a set of record
indices, so a source that can read one record (or a sorted set of rows) by index is sampled where it lies.
Two kinds are taken by a DP-SGD ``fit``:

* an **array-like** ``x`` that is not a NumPy array: anything with ``shape``, ``dtype``, ``__len__`` and
  ``__getitem__`` over a sorted index array (an ``h5py`` dataset, a ``zarr`` array), passed as
  ``fit(x, y)``;
* a **record source** passed alone, ``fit(source)``: anything with ``__len__`` and ``__getitem__(i)``
  returning one record ``(x, y)`` or ``(x, y, w)`` (a ``tensorflow_datasets`` random-access data source
  adapted to tuples, ArrayRecord files through :mod:`.array_records`, a ``keras.utils.PyDataset``-like object of
  single records), read with ``__getitems__(indices)`` where it has one.

Both become :class:`LazyRows`: the sampler's view of ``x``, read row by row for the sampled indices of each
step (in the ``tf.data`` pipeline's background thread, which prefetches the next batches while the current
one trains); the labels and weights, small, are read once into arrays. Before anything is released every
record is read once, one at a time, and checked (numeric, finite, one shape): a bad record is refused
naming its index, and memory stays bounded by one record, never n. Nothing is dropped, repeated or
reordered: the run's n is the source's length.
"""

from __future__ import annotations

import numbers

import numpy as np
import tensorflow as tf

__all__ = ["LazyRows", "is_array_like", "is_record_source", "records_from_source"]


def _excluded(value) -> bool:
    return isinstance(value, (np.ndarray, list, tuple, dict, str, bytes, tf.data.Dataset, tf.Tensor))


def is_array_like(value) -> bool:
    """An array that is not a NumPy array and is indexed by rows (h5py, zarr): shape, dtype, len, getitem."""
    return (not _excluded(value) and not isinstance(value, LazyRows) and all(
        hasattr(value, name) for name in ("shape", "dtype", "__len__", "__getitem__")))


def is_record_source(value) -> bool:
    """A source of single records by index: ``__len__`` and ``__getitem__``, not an array or a dataset."""
    return (not _excluded(value) and not isinstance(value, LazyRows) and not is_array_like(value)
            and hasattr(value, "__len__") and hasattr(value, "__getitem__"))


def _as_float32(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) if np.issubdtype(a.dtype, np.floating) and a.dtype != np.float32 else a


def _check_record(value, name: str, shape, dtype) -> np.ndarray:
    a = np.asarray(value)
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool) or np.iscomplexobj(a):
        raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
    if shape is not None and (a.shape != shape or a.dtype != dtype):
        raise ValueError(f"{name} has shape {a.shape} and dtype {a.dtype}, the first record {shape} and {dtype}: "
                         "Poisson batches stack records of one shape and dtype; pad or crop every record alike")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} holds NaN or infinite values; remove or impute them before the private step")
    return a


class LazyRows:
    """The sampler's view of records that stay where they are: ``rows[indices]`` reads those rows only.

    Args:
        read: ``read(indices) -> array`` of those rows (sorted, unique indices).
        n: the number of records. shape, dtype: of one record.
    """

    def __init__(self, read, n: int, shape: tuple, dtype):
        self._read, self._n = read, int(n)
        self.dtype = np.dtype(dtype)
        self.shape = (self._n, *shape)
        self.ndim = len(self.shape)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, indices):
        indices = np.asarray(indices)
        if indices.ndim != 1 or not np.issubdtype(indices.dtype, np.integer):
            raise TypeError("LazyRows are read by a 1-D array of row indices")
        if len(indices) == 0:
            return np.zeros((0, *self.shape[1:]), self.dtype)
        return _as_float32(np.asarray(self._read(indices))).astype(self.dtype, copy=False)


def lazy_array(x, name: str = "x") -> LazyRows:
    """An array-like ``x`` (h5py, zarr) as :class:`LazyRows`, every row checked once, one at a time."""
    n = len(x)
    if n == 0:
        raise ValueError(f"{name} is empty; pass at least one record")
    first = _check_record(x[0], f"{name}[0]", None, None)
    for i in range(1, n):
        _check_record(x[i], f"{name}[{i}]", first.shape, first.dtype)
    return LazyRows(lambda indices: x[indices], n, first.shape, _as_float32(first).dtype)


def _parts(record, i: int):
    if not isinstance(record, (tuple, list)) or len(record) not in (2, 3):
        raise TypeError(f"source[{i}] must be one record (x, y) or (x, y, w), got {type(record).__name__}"
                        + (f" of {len(record)}" if isinstance(record, (tuple, list)) else "")
                        + "; adapt the source so that it returns such a tuple (e.g. a dict's image and label)")
    return record


def records_from_source(source):
    """``(x as LazyRows, y, sample_weight or None)`` of a record source, every record checked once.

    Raises:
        TypeError / ValueError: an empty source, a record that is not ``(x, y)`` / ``(x, y, w)``, records of
        differing shapes, kinds or dtypes, a non-finite value or weight, a negative weight (each named by index).
    """
    n = len(source)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"the record source has length {n!r}; it must hold at least one record")
    try:
        first = _parts(source[0], 0)
    except (KeyError, IndexError, ValueError) as exc:
        raise TypeError(f"fit(source) reads record i as source[i], (x, y) or (x, y, w); source[0] raised "
                        f"{type(exc).__name__}: {exc}") from exc
    x0 = _check_record(first[0], "source[0] x", None, None)
    y0 = _check_record(first[1], "source[0] y", None, None)
    ys = np.empty((n, *y0.shape), y0.dtype)
    ws = np.empty((n,), np.float32) if len(first) == 3 else None
    for i in range(n):
        record = first if i == 0 else _parts(source[i], i)
        if len(record) != len(first):
            raise ValueError(f"source[{i}] has {len(record)} parts, source[0] {len(first)}: every record is (x, y) "
                             "or every record is (x, y, w)")
        if i:
            _check_record(record[0], f"source[{i}] x", x0.shape, x0.dtype)
        ys[i] = _check_record(record[1], f"source[{i}] y", y0.shape, y0.dtype)
        if ws is not None:
            w = float(np.asarray(record[2]))
            if not np.isfinite(w) or w < 0:
                raise ValueError(f"source[{i}]'s weight is {w!r}: every weight must be finite and >= 0")
            ws[i] = w

    many = getattr(source, "__getitems__", None)  # batched reads where the source has them (ArrayRecord)

    def read(indices):
        indices = [int(i) for i in indices]
        records = many(indices) if many is not None else [source[i] for i in indices]
        return np.stack([np.asarray(record[0]) for record in records])

    return LazyRows(read, n, x0.shape, _as_float32(x0).dtype), ys, ws
