"""A ``tf.data.Dataset`` of single records as the records of a DP-SGD fit.

Poisson sampling needs random access: the batch of step t is a set of record indices drawn from the secret
key and t. A dataset of single records ``(x, y)`` or ``(x, y, w)`` (``w``: the record's weight,
:mod:`.record_weights`) with a finite, known cardinality is therefore read once, in order, into arrays
(the random-access form the sampler draws from) when its records fit in :data:`MEMORY_BUDGET_BYTES`; the
run then samples those arrays exactly as it samples arrays given to ``fit``. Nothing is dropped, repeated,
reordered or cut: the arrays hold every element the dataset yields, in its order, and their number must
be its cardinality.

Refused, before any release, each with the reason and the way out: a dataset of batches (its elements have
the model's batch dimension: the run draws its own batches, and a dataset's batching has no Poisson ε), an
unknown or infinite cardinality (``dataset.apply(tf.data.experimental.assert_cardinality(n))`` states it),
records of differing shapes, and records larger than the budget (a NumPy memmap, ``np.load(path,
mmap_mode="r")``, is sampled without loading it).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

__all__ = ["MEMORY_BUDGET_BYTES", "is_dataset", "records_from_dataset", "refuse_batches"]

MEMORY_BUDGET_BYTES = 2 * 1024 ** 3  # the most a record dataset is read into (2 GiB); larger: a memmap
_READ_BATCH = 1024


def is_dataset(value) -> bool:
    return isinstance(value, tf.data.Dataset)


def _model_ranks(model) -> list | None:
    inputs = getattr(model, "inputs", None)
    return [t.shape.rank if hasattr(t.shape, "rank") else len(t.shape) for t in inputs] if inputs else None


def refuse_batches(record_shapes, model, what: str = "dataset") -> None:
    """Refuse records whose shapes (one per model input, without the batch axis) have the model's batch
    dimension: a source of batches, not of single records (checked before any release)."""
    ranks = _model_ranks(model)
    shapes = [tf.TensorShape(s) for s in record_shapes]
    if ranks is None or len(ranks) != len(shapes):
        return
    if any(s.rank is not None and s.rank == rank for s, rank in zip(shapes, ranks)):
        raise ValueError(
            f"fit takes a {what} of single records (x, y) or (x, y, sample_weight), each with the shape of one "
            f"model input; this {what}'s elements have the model's batch dimension ({shapes[0]}): a {what} of "
            "batches (shuffled or not) does not have the Poisson ε the ledger records, and the run draws its own batches. Give it "
            "single records (dataset.unbatch()), or pass the arrays fit(x, y)")


def _record_bytes(spec) -> int:
    total = 0
    for leaf in tf.nest.flatten(spec):
        if not leaf.shape.is_fully_defined():
            raise ValueError(
                f"a record of this dataset has the shape {leaf.shape}, not fixed: Poisson batches stack records of "
                "one shape; pad or crop every record to one shape (e.g. dataset.map(...)) before fit")
        total += int(np.prod(leaf.shape.as_list(), dtype=np.int64)) * leaf.dtype.size
    return total


def records_from_dataset(dataset, model, *, budget_bytes: int | None = None):
    """``(x, y, sample_weight or None)``: every record of ``dataset``, in order, as arrays.

    Args:
        dataset: a ``tf.data.Dataset`` of single records ``(x, y)`` or ``(x, y, w)``, finite and of known
            cardinality (``x`` and ``y`` may be tuples or dicts: several inputs or outputs).
        model: the model it trains (its input ranks tell records from batches).
        budget_bytes: the most the records may take in memory (default :data:`MEMORY_BUDGET_BYTES`).

    Raises:
        ValueError: see the module docstring (each message names the reason and the way out).
    """
    spec = dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) not in (2, 3):
        raise ValueError(f"fit takes a dataset of records (x, y) or (x, y, sample_weight); its elements are {spec}")
    refuse_batches([leaf.shape for leaf in tf.nest.flatten(spec[0])], model)
    n = int(dataset.cardinality())
    if n < 0:
        kind = "infinite" if n == int(tf.data.INFINITE_CARDINALITY) else "unknown"
        raise ValueError(
            f"this dataset's cardinality is {kind}: the run's n (and its ε) needs the number of records before "
            "anything is released; state it with dataset.apply(tf.data.experimental.assert_cardinality(n)) (a "
            "finite dataset), or pass the records as arrays")
    if n == 0:
        raise ValueError("this dataset holds no record")
    per_record = _record_bytes(spec)
    budget = MEMORY_BUDGET_BYTES if budget_bytes is None else int(budget_bytes)
    if n * per_record > budget:
        raise ValueError(
            f"this dataset's {n:,} records take {n * per_record / 2 ** 30:.2f} GiB, more than the "
            f"{budget / 2 ** 30:.2f} GiB a record dataset is read into (Poisson sampling needs random access); "
            "write the records to a NumPy file once and pass np.load(path, mmap_mode='r'), which is sampled "
            "without loading it")
    arrays = tf.nest.map_structure(lambda leaf: np.empty([n, *leaf.shape.as_list()], leaf.dtype.as_numpy_dtype), spec)
    filled = 0
    for chunk in dataset.batch(_READ_BATCH).as_numpy_iterator():
        rows = len(tf.nest.flatten(chunk)[0])
        if filled + rows > n:
            raise ValueError(f"this dataset yielded more records than its cardinality {n}; fix the cardinality it "
                             "states (assert_cardinality)")
        for target, values in zip(tf.nest.flatten(arrays), tf.nest.flatten(chunk)):
            target[filled:filled + rows] = values
        filled += rows
    if filled != n:
        raise ValueError(f"this dataset yielded {filled} records, not its cardinality {n}; fix the cardinality it "
                         "states (assert_cardinality)")
    x, y = arrays[0], arrays[1]
    return x, y, (arrays[2] if len(arrays) == 3 else None)
