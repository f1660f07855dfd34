"""Embedding: ids from the data, or ids shared by every record (positions from ``arange``).

Record i's table gradient puts ``g_it`` in row ``id_it`` for every position t, so its squared norm is
``Σ_{s,t} [id_s = id_t] ⟨g_s, g_t⟩``. Ids without a batch dimension (a position embedding looked up at
``arange(T)`` and added to every record) are broadcast to one copy per record first, so each record's
output, and with it its gradient, is its own; the layer's output then carries the batch dimension too
(``x + position`` broadcasts the same).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from .groups import merge_rows
from .registry import LayerRule, Tapped, compute_dtype, is_per_record, register_layer_rule, select_rows

__all__ = ["EmbeddingRule"]


class EmbeddingRule(LayerRule):
    """``keras.layers.Embedding`` (its table is the one trainable weight)."""

    groups = True  # its norms reduce per clipping unit (.groups)

    family = "embedding"

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        ids = tf.cast(inputs, tf.int32)
        if not is_per_record(ids, keep):  # shared ids: one copy per record
            ids = tf.broadcast_to(ids[None], tf.concat([tf.shape(keep)[:1], tf.shape(ids)], axis=0))
        ids = select_rows(keep, ids)
        z = tf.gather(tf.convert_to_tensor(layer.embeddings), ids)
        return Tapped(tf.cast(z, compute_dtype(layer)), [(z, list(layer.trainable_variables))], {"ids": ids})

    def sq_norms(self, layer, saved, tap_grads):
        ids = merge_rows(tf.reshape(saved["ids"], (tf.shape(saved["ids"])[0], -1)))
        g = tf.cast(tap_grads[0], tf.float32)
        gs = merge_rows(tf.reshape(g, (tf.shape(g)[0], -1, g.shape[-1])))
        same = tf.cast(tf.equal(ids[:, :, None], ids[:, None, :]), tf.float32)
        return tf.reduce_sum(same * tf.matmul(gs, gs, transpose_b=True), axis=[1, 2])


register_layer_rule(keras.layers.Embedding, EmbeddingRule())
