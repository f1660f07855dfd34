"""Record files read by index: ArrayRecord (and any source of serialized records) as a DP-SGD ``fit`` source.

An ArrayRecord file (``array_record``, the format of ``tensorflow_datasets``' random-access data sources and of
Grain) holds serialized records that can be read by index, so Poisson DP-SGD samples it where it lies: each
step reads its sampled records only (:mod:`.record_sources`). :class:`ParsedSource` turns any source of
serialized or structured records (``len`` and ``source[i]``; an ``ArrayRecordDataSource``, a
``tfds.data_source`` split whose records are dicts) into the ``(x, y)`` / ``(x, y, w)`` records ``fit`` takes,
with the user's ``parse``; :func:`array_record_source` opens ArrayRecord files that way. Batched reads
(``__getitems__``, which ArrayRecord implements with parallel I/O) are used when the source has them.

Example, TFRecord files written once as ArrayRecord (the serialized ``tf.train.Example`` bytes as they are)::

    from array_record.python.array_record_module import ArrayRecordWriter
    writer = ArrayRecordWriter("train.array_record", "group_size:1")  # group_size 1: fast reads by index
    for serialized in tf.data.TFRecordDataset(files).as_numpy_iterator():
        writer.write(serialized)
    writer.close()

    def parse(serialized):  # one tf.train.Example -> (x, y)
        example = tf.io.parse_single_example(serialized, features)
        return example["image"].numpy(), example["label"].numpy()

    model.fit(array_record_source(["train.array_record"], parse))

``array_record`` is the optional extra ``tfdpmech[arrayrecord]`` (pinned; ``make test`` installs it).
"""

from __future__ import annotations

__all__ = ["ParsedSource", "array_record_source"]


class ParsedSource:
    """``source`` whose record i is ``parse(source[i])``: a record source for ``fit(source)``.

    Args:
        source: anything with ``len`` and ``source[i]`` (and optionally ``source.__getitems__(indices)``).
        parse: one stored record -> ``(x, y)`` or ``(x, y, w)`` (arrays or numbers).
    """

    def __init__(self, source, parse):
        if not (hasattr(source, "__len__") and hasattr(source, "__getitem__")):
            raise TypeError(f"source must have len() and source[i] (random access by index), got "
                            f"{type(source).__name__}; a sequential reader (tf.data.TFRecordDataset) must first be "
                            "written into a file read by index, e.g. ArrayRecord (see array_records' docstring)")
        if not callable(parse):
            raise TypeError(f"parse must be a function of one stored record, got {type(parse).__name__}")
        self.source, self.parse = source, parse

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, i):
        return self.parse(self.source[i])

    def __getitems__(self, indices):
        many = getattr(self.source, "__getitems__", None)
        stored = many(list(indices)) if many is not None else [self.source[i] for i in indices]
        return [self.parse(record) for record in stored]


def array_record_source(paths, parse) -> ParsedSource:
    """ArrayRecord files as one record source, record i parsed by ``parse`` (bytes -> ``(x, y)`` / ``(x, y, w)``).

    Args:
        paths: a path or a list of paths of ArrayRecord files (their records in order, file after file).
        parse: one serialized record -> ``(x, y)`` or ``(x, y, w)``.

    Raises:
        ImportError: ``array_record`` is not installed (``pip install "tfdpmech[arrayrecord]"``).
    """
    try:
        from array_record.python.array_record_data_source import ArrayRecordDataSource  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - the extra is installed by make test
        raise ImportError('ArrayRecord files need the array_record package: pip install "tfdpmech[arrayrecord]"'
                          ) from exc
    paths = [paths] if isinstance(paths, str) else [str(p) for p in paths]
    return ParsedSource(ArrayRecordDataSource(paths), parse)
