"""A weight used by more than one call of its layer in one forward pass: the cross terms between its uses.

Record i's gradient of a weight W that calls u = 1..U of its layer use (a layer called twice, one layer's
weights shared across depth as in ALBERT, tied input and output embeddings) is the sum of the uses'
gradients, ``G_i = Σ_u G_i^u``, so

    ‖G_i‖² = Σ_u ‖G_i^u‖² + 2 Σ_{u<v} ⟨G_i^u, G_i^v⟩:

each use's own ghost norm is not enough; the cross terms between uses are needed. A rule that supports
shared uses (:meth:`.registry.LayerRule.parts`) gives, for one call, each trainable weight's per-record
gradient in one of two forms:

* :class:`Outer`: ``G_i = Σ_t left_it ⊗ right_it`` over the call's positions. A Dense kernel: left = the
  input, right = the output gradient; an embedding lookup: left = the one-hot row of the token id (given
  as ``ids``), right = the output gradient; the tied output projection ``logits = h Eᵀ``: left = the
  logits' gradient, right = ``h``.
* :class:`Rows`: ``G_i`` materialised, ``(B, *shape)`` (a normalisation's γ, a layer handled alone).

When every use of a weight is an :class:`Outer`, the sum over uses is a sum over positions: the uses'
positions are concatenated and the formula of one call applies, ``‖Σ_t l_t ⊗ r_t‖² = Σ_{s,t} ⟨l_s, l_t⟩
⟨r_s, r_t⟩`` (the ghost norm), or the sum is materialised, whichever costs less (Li et al. 2022's rule,
as :func:`.linear_algebra.linear_sq_norms`). The Gram matrix of the lefts is built by blocks: ids
against ids ``[id_s = id'_t]``; ids against a dense left, that left gathered at the ids (for tied
embeddings: the output projection's logit gradient gathered at the record's token ids); dense against
dense, a product. Otherwise each use is materialised and the uses summed. A group of k rows clipped as one
unit (:mod:`.groups`) concatenates its rows' positions the same way.

Peers: Opacus's ghost clipping refuses tied parameters ("Parameter tying is not supported with Ghost
Clipping"); private-transformers and fast-differential-privacy untie the output layer and copy the
weights, which changes the model. The cross terms above keep the model as it is.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from .groups import merge_rows, unit_sq_norms, unit_zeros
from .registry import LayerRule

__all__ = ["Outer", "Rows", "shared_sq_norms", "materialise", "MaterialisedRule"]


@dataclasses.dataclass
class Outer:
    """``G_i = Σ_t left_it ⊗ right_it``, reshaped to the weight's shape.

    Attributes:
        right: ``(B, T, n)``.
        left: ``(B, T, m)``, or None when ``ids`` give one-hot lefts.
        ids: ``(B, T)`` int: the lefts are the one-hot rows ``e_{id}`` of width ``width``.
        width: m (the one-hot width: the vocabulary).
    """

    right: tf.Tensor
    left: tf.Tensor | None = None
    ids: tf.Tensor | None = None
    width: int | None = None

    @property
    def m(self) -> int:
        return int(self.width) if self.ids is not None else int(self.left.shape[-1])

    @property
    def n(self) -> int:
        return int(self.right.shape[-1])

    def merged(self) -> "Outer":
        """The same, each clipping unit's rows as its positions (:func:`.groups.merge_rows`)."""
        return Outer(merge_rows(self.right), None if self.left is None else merge_rows(self.left),
                     None if self.ids is None else merge_rows(self.ids), self.width)


@dataclasses.dataclass
class Rows:
    """``G_i`` materialised: ``(B, *shape)``."""

    per_record: tf.Tensor


def materialise(part, shape) -> tf.Tensor:
    """``(B, *shape)``: each record's gradient from a part."""
    if isinstance(part, Rows):
        return tf.reshape(tf.cast(part.per_record, tf.float32), tf.concat([[-1], shape], 0))
    right = tf.cast(part.right, tf.float32)
    if part.ids is None:
        per_record = tf.einsum("btm,btn->bmn", tf.cast(part.left, tf.float32), right)
    else:  # a scatter of the right rows into the rows of their ids, record by record
        rows, m = tf.shape(part.ids)[0], part.m
        segments = part.ids + m * tf.range(rows)[:, None]
        per_record = tf.reshape(tf.math.unsorted_segment_sum(right, segments, rows * m), (rows, m, part.n))
    return tf.reshape(per_record, tf.concat([[-1], shape], 0))


def _left_gram(a: Outer, b: Outer) -> tf.Tensor:
    """``(B, Ta, Tb)``: ``⟨left_a,s, left_b,t⟩`` for every pair of positions."""
    if a.ids is not None and b.ids is not None:
        return tf.cast(tf.equal(a.ids[:, :, None], b.ids[:, None, :]), tf.float32)
    if a.ids is not None:  # left_b gathered at a's ids: (B, Tb, Ta), transposed
        return tf.transpose(tf.gather(tf.cast(b.left, tf.float32), a.ids, axis=2, batch_dims=1), (0, 2, 1))
    if b.ids is not None:
        return tf.gather(tf.cast(a.left, tf.float32), b.ids, axis=2, batch_dims=1)
    return tf.matmul(tf.cast(a.left, tf.float32), tf.cast(b.left, tf.float32), transpose_b=True)


def _ghost(parts: list[Outer]) -> tf.Tensor:
    """``Σ_{u,v} Σ_{s,t} ⟨l_u,s, l_v,t⟩ ⟨r_u,s, r_v,t⟩``, by blocks (the cross blocks counted twice)."""
    total = None
    for u, a in enumerate(parts):
        for v in range(u, len(parts)):
            b = parts[v]
            right = tf.matmul(tf.cast(a.right, tf.float32), tf.cast(b.right, tf.float32), transpose_b=True)
            term = tf.reduce_sum(_left_gram(a, b) * right, axis=[1, 2]) * (1.0 if u == v else 2.0)
            total = term if total is None else total + term
    return total


def _positions(parts: list[Outer]) -> int | None:
    counts = [p.right.shape[1] for p in parts]
    return None if any(c is None for c in counts) else sum(int(c) for c in counts)


def shared_sq_norms(parts: list, shape) -> tuple:
    """``((B/k,) squared norms, per-record gradients or None)``: each clipping unit's squared norm of ``Σ_u G^u``
    for the parts of a weight's uses, and, where it was materialised to get them, ``(B, *shape)`` each record's
    ``Σ_u G_i^u`` (the clipped sum is then ``Σ_i c_i G_i``, no book-keeping pass)."""
    if all(isinstance(p, Outer) for p in parts) and len({(p.m, p.n) for p in parts}) == 1:
        merged = [p.merged() for p in parts]
        m, n, positions = merged[0].m, merged[0].n, _positions(merged)
        if positions is not None and positions * (m + n) <= m * n:
            return _ghost(merged), None
    per_record = tf.add_n([materialise(p, shape) for p in parts])
    return unit_sq_norms(per_record), per_record  # each unit's rows summed, squared


class MaterialisedRule(LayerRule):
    """A rule that materialises each record's gradient of every trainable weight (``_per_record``: ``{id(weight):
    (B, ...)}``, kept in ``saved``): its norms, its parts for a shared layer and its clipped sum come from them."""

    def _per_record(self, layer, saved: dict, tap_grads: list) -> dict:
        raise NotImplementedError

    def sq_norms(self, layer, saved, tap_grads):
        per_record = self._per_record(layer, saved, tap_grads).values()
        return tf.add_n([unit_sq_norms(t) for t in per_record]) if per_record else unit_zeros(tap_grads[0])

    def parts(self, layer, saved, tap_grads):
        return {key: Rows(t) for key, t in self._per_record(layer, saved, tap_grads).items()}

    def clipped_sum(self, layer, saved, tap_grads, factors):
        per_record = self._per_record(layer, saved, tap_grads)
        return [tf.reshape(tf.tensordot(factors, per_record[id(v)], axes=1), v.shape)
                for v in layer.trainable_variables]
