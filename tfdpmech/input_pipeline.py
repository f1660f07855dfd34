"""The options of the ``tf.data`` pipelines tfdpmech builds for ``fit``."""

from __future__ import annotations

import tensorflow as tf

__all__ = ["without_autotune"]


def without_autotune(ds: tf.data.Dataset) -> tf.data.Dataset:
    """``ds`` with tf.data's autotuning off: for pipelines whose buffers are fixed (nothing to tune).

    With autotuning on, an iterator runs a tuning thread that sleeps 10 ms, 20 ms, 40 ms, ... (doubling), and the
    iterator's teardown at the end of ``fit`` can wait for its next wake-up, 10 ms · (2ᵏ − 1) after the iterator
    began (docs/results/fit_teardown: a fit whose steps took 2.77 s returned after 5.17 s). Off, ``fit`` returns
    when its last step ends.

    Raises:
        TypeError: ``ds`` is not a ``tf.data.Dataset``.
    """
    if not isinstance(ds, tf.data.Dataset):
        raise TypeError(f"ds must be a tf.data.Dataset, got {type(ds).__name__}: build the pipeline with tf.data first")
    options = tf.data.Options()
    options.autotune.enabled = False
    return ds.with_options(options)
