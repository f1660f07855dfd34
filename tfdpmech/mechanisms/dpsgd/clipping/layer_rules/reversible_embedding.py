"""ReversibleEmbedding (Keras 3, keras-hub): a token lookup, and the output projection through the same table.

A causal language model calls its token embedding twice per forward pass: ``embedding(ids)`` (a lookup,
as :mod:`.embedding`) and ``embedding(h, reverse=True)``, the logits ``z = h Eᵀ`` through the same table
E when ``tie_weights`` (else through a weight of its own, ``reverse_embeddings``, ``z = h R``). For the
reverse call record i's gradient of E is ``Σ_t g_t ⊗ h_t`` (``g_t`` the logits' gradient, width V;
``h_t`` the hidden state): the tap is z (before the optional ``logit_soft_cap``), the norm is a linear
layer's (:func:`.linear_algebra.linear_sq_norms`). With tied weights the table's per-record gradient is
the sum of both calls', and its norm needs their cross term (:mod:`.shared_uses`: the logits' gradient
gathered at the record's token ids).

The products are computed in float32 (the layer's ``reverse_dtype``, or a float16 / bfloat16 policy,
sets the output's dtype only): the taps and the book-keeping sum stay exact.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from .groups import unit_zeros
from .embedding import lookup, lookup_parts, lookup_sq_norms
from .linear_algebra import flatten_positions, linear_sq_norms, trains
from .registry import (LayerRule, Tapped, compute_dtype, exact_dtype, register_layer_rule, register_layer_rule_by_name,
                       select_rows)
from .shared_uses import Outer

__all__ = ["ReversibleEmbeddingRule"]


def _reverse(args, kwargs) -> bool:
    value = kwargs.get("reverse", args[0] if args else False)
    if isinstance(value, (tf.Tensor, tf.Variable)):
        raise ValueError("ReversibleEmbedding's reverse must be a Python bool in the model's call, got a tensor")
    return bool(value)


def _projection(layer):
    """``(kernel (d, V), the trainable weight it comes from, whether that weight is E, transposed)``."""
    if layer.tie_weights:
        return tf.transpose(tf.convert_to_tensor(layer.embeddings)), layer.embeddings, True
    return tf.convert_to_tensor(layer.reverse_embeddings), layer.reverse_embeddings, False


class ReversibleEmbeddingRule(LayerRule):
    """``keras.layers.ReversibleEmbedding`` and keras-hub's (see the module docstring)."""

    groups = True  # its norms reduce per clipping unit (.groups)

    family = "reversible_embedding"

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        if not _reverse(args, kwargs):
            tapped = lookup(layer, inputs, keep)
            tapped.saved["reverse"] = False
            return tapped
        dtype = exact_dtype(layer)
        h = select_rows(keep, tf.cast(inputs, dtype))
        kernel, weight, _ = _projection(layer)
        z = tf.tensordot(h, tf.cast(kernel, dtype), [[h.shape.rank - 1], [0]])
        out = tf.cast(z, layer.reverse_dtype or compute_dtype(layer))
        if layer.logit_soft_cap is not None:
            cap = tf.cast(layer.logit_soft_cap, out.dtype)
            out = tf.tanh(out / cap) * cap
        return Tapped(out, [(z, [weight] if trains(layer, weight) else [])], {"reverse": True, "h": h})

    def sq_norms(self, layer, saved, tap_grads):
        if not saved["reverse"]:
            return lookup_sq_norms(saved, tap_grads, int(layer.embeddings.shape[0]))
        h3, g3 = flatten_positions(saved["h"]), flatten_positions(tf.cast(tap_grads[0], tf.float32))
        _, weight, _ = _projection(layer)
        if not trains(layer, weight):
            return unit_zeros(g3)
        return linear_sq_norms(h3, g3, int(h3.shape[-1]), int(g3.shape[-1]))

    def parts(self, layer, saved, tap_grads):
        if not saved["reverse"]:
            return lookup_parts(layer, saved, tap_grads)
        _, weight, transposed = _projection(layer)
        if not trains(layer, weight):
            return {}
        h3, g3 = flatten_positions(tf.cast(saved["h"], tf.float32)), flatten_positions(tf.cast(tap_grads[0], tf.float32))
        # E (V, d): Σ_t g_t ⊗ h_t; R (d, V): Σ_t h_t ⊗ g_t
        return {id(weight): Outer(h3, left=g3) if transposed else Outer(g3, left=h3)}


_RULE = ReversibleEmbeddingRule()
if hasattr(keras.layers, "ReversibleEmbedding"):
    register_layer_rule(keras.layers.ReversibleEmbedding, _RULE)
# keras-hub's subclass (it adds nothing), registered by name: tfdpmech does not import keras-hub itself
register_layer_rule_by_name("keras_hub.src.layers.modeling.reversible_embedding.ReversibleEmbedding", _RULE)
