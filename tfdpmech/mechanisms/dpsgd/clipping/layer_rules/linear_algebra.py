"""The per-record squared norm of a linear map's weight gradient, shared by the linear layer rules.

For ``z = a W`` over T positions, record i's kernel gradient is ``a_iᵀ g_i`` (``a_i`` (T, d_in), ``g_i``
(T, d_out)); its squared Frobenius norm is ``⟨a_i a_iᵀ, g_i g_iᵀ⟩`` (the ghost norm, cost T²·(d_in+d_out))
or ``‖a_iᵀ g_i‖²`` materialised (cost T·d_in·d_out), whichever is cheaper; T = 1 gives
``‖a_i‖²‖g_i‖²`` (Goodfellow 2015; Li et al. 2022 for sequences). A bias's gradient is ``Σ_t g_it``.
"""

from __future__ import annotations

import tensorflow as tf

from .groups import merge_rows

__all__ = ["flatten_positions", "linear_sq_norms", "bias_sq_norms", "trains"]


def flatten_positions(t):
    """``(B, T, d)`` from ``(B, ..., d)`` (T = 1 for rank 2)."""
    if t.shape.rank == 2:
        return t[:, None, :]
    return tf.reshape(t, (tf.shape(t)[0], -1, tf.shape(t)[-1]))


def linear_sq_norms(a, g, d_in: int, d_out: int):
    """``‖a_iᵀ g_i‖²_F`` per record for ``a`` (B, T, d_in), ``g`` (B, T, d_out): ghost or materialised (per
    clipping unit: a group's rows are its positions, :mod:`.groups`)."""
    a, g = merge_rows(a), merge_rows(g)
    positions = a.shape[1]
    if positions == 1:
        return tf.reduce_sum(tf.square(a[:, 0]), 1) * tf.reduce_sum(tf.square(g[:, 0]), 1)
    if positions is not None and positions * (d_in + d_out) <= d_in * d_out:
        return tf.reduce_sum(tf.matmul(a, a, transpose_b=True) * tf.matmul(g, g, transpose_b=True), axis=[1, 2])
    return tf.reduce_sum(tf.square(tf.einsum("bti,bto->bio", a, g)), axis=[1, 2])


def bias_sq_norms(g3):
    """``‖Σ_t g_it‖²`` per record (per clipping unit) for ``g3`` (B, T, d)."""
    g3 = merge_rows(g3)
    return tf.reduce_sum(tf.square(tf.reduce_sum(g3, axis=1)), axis=1)


def trains(layer, variable) -> bool:
    """Whether ``variable`` (possibly None) is one of the layer's trainable weights."""
    return variable is not None and any(v is variable for v in layer.trainable_variables)
