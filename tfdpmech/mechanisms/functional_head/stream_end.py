"""Where a stream of private records ends: what is refused before it is read, and the stated cap.

The functional head counts n in one pass over a ``tf.data.Dataset`` and releases after it
(:mod:`tfdpmech.mechanisms.functional_head.streaming`), so a pass that cannot end must be refused before anything is read:
an **infinite** cardinality (``dataset.cardinality() == tf.data.INFINITE_CARDINALITY``, e.g. after
``.repeat()``), or an unknown one whose graph holds a ``repeat()`` without a count
(``ds.repeat().filter(...)``). Any other unknown cardinality (a ``filter`` of a finite dataset, a
generator) is read up to a stated cap, ``max_records`` (:data:`DEFAULT_MAX_RECORDS` unless given): a
stream that passes it stops with an error, and nothing is released.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["DEFAULT_MAX_RECORDS", "check_finite_dataset", "check_record_count"]

DEFAULT_MAX_RECORDS = 10**8  # a stream of more records stops with an error unless fit(max_records=...) says more


def _repeats_forever(dataset) -> bool:
    """Whether the dataset's graph (its functions included) holds a ``repeat`` whose count is -1 or unknown."""
    try:
        graph = tf.compat.v1.GraphDef()
        graph.ParseFromString(dataset._as_serialized_graph(  # pylint: disable=protected-access
            external_state_policy=tf.data.experimental.ExternalStatePolicy.IGNORE).numpy())
    except (tf.errors.OpError, ValueError, TypeError, AttributeError):  # not serialisable: the record cap applies
        return False
    for nodes in [graph.node, *(f.node_def for f in graph.library.function)]:
        by_name = {n.name: n for n in nodes}
        for node in nodes:
            if node.op == "RepeatDataset":
                count = by_name.get(node.input[1].split(":")[0])
                if count is None or count.op != "Const" or int(tf.make_ndarray(count.attr["value"].tensor)) < 0:
                    return True
    return False


def check_finite_dataset(dataset, name: str = "x") -> None:
    """Refuse a ``tf.data.Dataset`` whose pass cannot end: infinite cardinality, or an unknown one over a
    ``repeat()`` without a count.

    Raises:
        ValueError: ``dataset.cardinality() == tf.data.INFINITE_CARDINALITY``, or an endless ``repeat``.
    """
    cardinality = int(dataset.cardinality())
    endless = cardinality == int(tf.data.INFINITE_CARDINALITY) or (
        cardinality == int(tf.data.UNKNOWN_CARDINALITY) and _repeats_forever(dataset))
    if endless:
        raise ValueError(
            f"{name} is a tf.data.Dataset of infinite cardinality (a .repeat() without a count, perhaps below a "
            ".filter()): the head's accounting needs the number of records n, which is counted in one pass before "
            "the release, and that pass would never end. Pass a finite dataset (drop the .repeat(), or .take(k) "
            "batches) of all the private records, each once"
        )


def check_record_count(n: int, max_records: int) -> None:
    """Stop a stream that has passed ``max_records`` records (nothing has been released then)."""
    if n > max_records:
        raise ValueError(
            f"the dataset has yielded more than max_records={max_records} records and is still going (an endless "
            "generator?); nothing has been released. Pass a finite dataset of all the private records, each once, "
            "or fit(..., max_records=N) with the number it holds"
        )
