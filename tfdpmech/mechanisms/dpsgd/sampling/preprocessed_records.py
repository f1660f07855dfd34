"""Records a keras-hub task model preprocesses itself: raw strings in, the model's own inputs out.

keras-hub's task models (``TextClassifier``, ``CausalLM``: ``PipelineModel`` subclasses) carry a
preprocessor, and their users fit them on raw text, ``fit(texts, labels)`` or ``fit(texts)`` for a causal
LM (lists, arrays or a ``tf.data.Dataset`` of strings). Under DP-SGD the preprocessor runs once over the
records before anything is sampled or released (:func:`preprocess_records`): it maps each record alone to
its model inputs (tokenizing, packing to the sequence length, and for a causal LM the next-token labels and
their padding mask as per-position weights, :mod:`.position_weights`), so string i is row i of the arrays
and the neighbour relation, one string more or less, is unchanged. The arrays then train as any numeric
records; the task's own ``fit``, which would preprocess the sampled batches a second time, is bypassed for
Keras's.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

__all__ = ["is_pipeline_model", "needs_preprocessing", "preprocess_records", "keras_fit_of"]

_BATCH = 256  # the records preprocessed at once


def is_pipeline_model(model) -> bool:
    """Whether ``model`` is a keras-hub ``PipelineModel`` (its ``fit`` runs its preprocessor on the data)."""
    return any(cls.__name__ == "PipelineModel" and cls.__module__.startswith("keras_hub")
               for cls in type(model).__mro__)


def needs_preprocessing(model) -> bool:
    """Whether ``fit`` must run ``model``'s preprocessor over the records first (keras-hub's ``fit`` does)."""
    return is_pipeline_model(model) and getattr(model, "preprocessor", None) is not None


def keras_fit_of(model):
    """The ``fit`` that trains on the model's own inputs: Keras's for a keras-hub task (its ``fit`` would run the
    preprocessor again), else the model class's."""
    return keras.Model.fit if is_pipeline_model(model) else type(model).fit


def _dataset(x, y, sample_weight) -> tf.data.Dataset:
    if isinstance(x, tf.data.Dataset):
        if y is not None or sample_weight is not None:
            raise ValueError("fit takes a dataset of records (texts, or (texts, labels)) without y or sample_weight "
                             "beside it, as keras-hub's fit")
        return x
    if isinstance(x, np.ndarray) and x.dtype.kind not in "USO":
        raise ValueError(f"x of dtype {x.dtype}: a keras-hub task with a preprocessor takes raw records (strings), as "
                         "its own fit; for token ids, set model.preprocessor = None first")
    parts = tuple(p for p in (x, y, sample_weight) if p is not None)
    return tf.data.Dataset.from_tensor_slices(parts if len(parts) > 1 else parts[0])


def preprocess_records(model, x, y=None, sample_weight=None):
    """``(x, y, sample_weight)``: every record run through ``model``'s preprocessor, as NumPy arrays (see the
    module docstring); ``y`` and ``sample_weight`` None where the preprocessor gives none.

    Raises:
        ValueError: a dataset with y or sample_weight beside it, numeric records (already tokenized), no record,
            or a preprocessor that does not give one row per record.
    """
    ds = _dataset(x, y, sample_weight)
    batched = ds.batch(_BATCH).map(lambda *e: (tf.shape(tf.nest.flatten(e)[0])[0], model.preprocess_samples(*e)),
                                   num_parallel_calls=tf.data.AUTOTUNE)
    counts, parts = [], []
    for count, element in batched.as_numpy_iterator():
        counts.append(int(count))
        parts.append(keras.utils.unpack_x_y_sample_weight(element))
    if not parts:
        raise ValueError("fit was given no record")
    xs, ys, ws = zip(*parts)

    def concat(values):
        if values[0] is None:
            return None
        return tf.nest.map_structure(lambda *leaves: np.concatenate(leaves, axis=0), *values)

    x_out, y_out, w_out = concat(xs), concat(ys), concat(ws)
    given = sum(counts)
    rows = {int(np.shape(leaf)[0]) for leaf in tf.nest.flatten((x_out, y_out, w_out)) if leaf is not None}
    if rows != {given}:
        raise ValueError(f"model {model.name!r}'s preprocessor gave {sorted(rows)} rows for {given} records; DP-SGD "
                         "needs one row per record (the unit its ε protects)")
    return x_out, y_out, w_out
