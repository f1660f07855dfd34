"""keras-hub's PositionEmbedding: a lookup of the position table at the positions of a record's tokens.

``PositionEmbedding(sequence_length)`` returns the table's rows ``start_index, ..., start_index + T − 1`` (or
the rows at ``positions``), broadcast to the input's shape. It is an embedding lookup whose ids are the
positions, shared by every record: they are broadcast to one copy per record (as :mod:`.embedding` does with
shared ids), so each record's output and gradient are its own, and record i's table gradient puts ``g_it`` in
row ``p_t``: squared norm ``Σ_{s,t} [p_s = p_t] ⟨g_s, g_t⟩`` (distinct positions: ``‖g_i‖²``).
"""

from __future__ import annotations

import tensorflow as tf

from .embedding import lookup_parts, lookup_sq_norms
from .linear_algebra import trains
from .registry import LayerRule, Tapped, compute_dtype, is_per_record, register_layer_rule_by_name

__all__ = ["PositionEmbeddingRule"]


class _Table:
    """The lookup helpers' view of the layer: its table is ``embeddings``."""

    def __init__(self, layer):
        self.embeddings = layer.position_embeddings
        self.trainable_variables = layer.trainable_variables


class PositionEmbeddingRule(LayerRule):
    """``keras_hub.layers.PositionEmbedding`` over ``(B, T, d)`` inputs."""

    groups = True  # its norms reduce per clipping unit (.groups)
    family = "position_embedding"

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        start = kwargs.get("start_index", args[0] if args else 0)
        positions = kwargs.get("positions", args[1] if len(args) > 1 else None)
        if inputs.shape.rank != 3:
            raise ValueError(f"layer {layer.name!r}: the position-embedding rule takes (batch, positions, features) "
                             f"inputs, got rank {inputs.shape.rank}; use path='vectorized'")
        shape = tf.shape(inputs)
        if positions is None:
            ids = tf.cast(start, tf.int32) + tf.range(shape[1])
        else:
            ids = tf.cast(positions, tf.int32)
        if not is_per_record(ids, keep) or ids.shape.rank == 1:  # shared positions: one copy per record
            ids = tf.broadcast_to(tf.reshape(ids, [-1, shape[1]])[:1], shape[:2])
        table = layer.position_embeddings
        z = tf.gather(tf.convert_to_tensor(table), ids)
        return Tapped(tf.cast(z, compute_dtype(layer)), [(z, [table] if trains(layer, table) else [])], {"ids": ids})

    def sq_norms(self, layer, saved, tap_grads):
        return lookup_sq_norms(saved, tap_grads, int(layer.position_embeddings.shape[0]))

    def parts(self, layer, saved, tap_grads):
        return lookup_parts(_Table(layer), saved, tap_grads)


register_layer_rule_by_name("keras_hub.src.layers.modeling.position_embedding.PositionEmbedding", PositionEmbeddingRule())
