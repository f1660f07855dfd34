"""Embedding: ids from the data, or ids shared by every record (positions from ``arange``).

Record i's table gradient puts ``g_it`` in row ``id_it`` for every position t, so its squared norm is
``Σ_{s,t} [id_s = id_t] ⟨g_s, g_t⟩`` (or, where the T² pairs cost more than the table, the norm of the table
gradient materialised per record). Ids without a batch dimension (a position embedding looked up at
``arange(T)`` and added to every record) are broadcast to one copy per record first, so each record's
output, and with it its gradient, is its own; the layer's output then carries the batch dimension too
(``x + position`` broadcasts the same).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from .groups import merge_rows
from .linear_algebra import trains
from .registry import LayerRule, Tapped, compute_dtype, is_per_record, register_layer_rule, select_rows
from .shared_uses import Outer

__all__ = ["EmbeddingRule", "lookup", "lookup_sq_norms", "lookup_parts"]


def lookup(layer, inputs, keep) -> Tapped:
    """The rows of ``layer.embeddings`` at ``inputs`` (ids per record, or shared ids broadcast per record)."""
    ids = tf.cast(inputs, tf.int32)
    if not is_per_record(ids, keep):  # shared ids: one copy per record
        ids = tf.broadcast_to(ids[None], tf.concat([tf.shape(keep)[:1], tf.shape(ids)], axis=0))
    ids = select_rows(keep, ids)
    z = tf.gather(tf.convert_to_tensor(layer.embeddings), ids)
    return Tapped(tf.cast(z, compute_dtype(layer)), [(z, [layer.embeddings] if trains(layer, layer.embeddings) else [])],
                  {"ids": ids})


def _flat(saved, tap_grads):
    """``((B, T) ids, (B, T, d) output gradients)``."""
    g = tf.cast(tap_grads[0], tf.float32)
    return (tf.reshape(saved["ids"], (tf.shape(saved["ids"])[0], -1)),
            tf.reshape(g, (tf.shape(g)[0], -1, g.shape[-1])))


def lookup_sq_norms(saved, tap_grads, width: int | None = None):
    """``Σ_{s,t} [id_s = id_t] ⟨g_s, g_t⟩`` per clipping unit over its P positions (the ghost norm, cost P²·d), or,
    for a table of ``width`` rows with ``P² > width``, the squared norm of the table gradient materialised per unit
    (each position's gradient added into its id's row: cost P·d + width·d; a long sequence, a small table)."""
    ids, gs = (merge_rows(t) for t in _flat(saved, tap_grads))
    positions = ids.shape[1]
    if width is not None and positions is not None and positions * positions > width:
        units = tf.shape(gs)[0]
        summed = tf.math.unsorted_segment_sum(gs, ids + width * tf.range(units)[:, None], units * width)
        return tf.reduce_sum(tf.reshape(tf.square(summed), (units, -1)), axis=1)
    same = tf.cast(tf.equal(ids[:, :, None], ids[:, None, :]), tf.float32)
    return tf.reduce_sum(same * tf.matmul(gs, gs, transpose_b=True), axis=[1, 2])


def lookup_parts(layer, saved, tap_grads) -> dict:
    """The table's per-record gradient as an outer product: one-hot rows at the ids ⊗ the output gradients."""
    if not trains(layer, layer.embeddings):
        return {}
    ids, gs = _flat(saved, tap_grads)
    return {id(layer.embeddings): Outer(gs, ids=ids, width=int(layer.embeddings.shape[0]))}


class EmbeddingRule(LayerRule):
    """``keras.layers.Embedding`` (its table is the one trainable weight)."""

    groups = True  # its norms reduce per clipping unit (.groups)

    family = "embedding"
    shared_inputs = True  # shared ids are broadcast to one copy per record

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        return lookup(layer, inputs, keep)

    def sq_norms(self, layer, saved, tap_grads):
        return lookup_sq_norms(saved, tap_grads, int(layer.embeddings.shape[0]))

    def parts(self, layer, saved, tap_grads):
        return lookup_parts(layer, saved, tap_grads)


register_layer_rule(keras.layers.Embedding, EmbeddingRule())
