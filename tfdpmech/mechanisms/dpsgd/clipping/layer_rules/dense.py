"""Dense and EinsumDense: ``z = a W + b`` over any number of positions (:mod:`.linear_algebra`).

The forward pass computes ``z`` itself (in float32 under a mixed-precision policy, then the output is
cast back), so ``z`` is the tap and ``a`` the input the norms read. EinsumDense: any equation of the form
``"<batch><in>,<kernel>-><batch><out>"`` without ellipsis whose batch letter is not in the kernel; the
per-record kernel gradient is ``einsum("<in>,<out>-><batch><kernel>", a, g)``, materialised.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from .groups import unit_sq_norms, unit_zeros
from .linear_algebra import bias_sq_norms, flatten_positions, linear_sq_norms, trains
from .registry import LayerRule, Tapped, compute_dtype, exact_dtype, register_layer_rule, select_rows
from .shared_uses import Outer, Rows

__all__ = ["DenseRule", "EinsumDenseRule", "einsum_parts"]


def einsum_parts(equation: str):
    """``(input, kernel, output)`` subscripts of ``"ab,bc->ac"``, or None for an unsupported form."""
    try:
        lhs, out = equation.replace(" ", "").split("->")
        inp, ker = lhs.split(",")
    except ValueError:
        return None
    if not inp or not out or inp[0] != out[0] or inp[0] in ker:
        return None
    return inp, ker, out


def _activation(layer):
    act = getattr(layer, "activation", None)
    return act if act is not None else (lambda t: t)


def _linear(layer, inputs, keep, product) -> Tapped:
    dtype = exact_dtype(layer)
    a = select_rows(keep, tf.cast(inputs, dtype))
    z = product(a, tf.cast(tf.convert_to_tensor(layer.kernel), dtype))
    bias = getattr(layer, "bias", None)
    if bias is not None:
        z = z + tf.cast(tf.convert_to_tensor(bias), dtype)
    out = _activation(layer)(tf.cast(z, compute_dtype(layer)))
    return Tapped(out, [(z, list(layer.trainable_variables))], {"a": a})


class DenseRule(LayerRule):
    """``keras.layers.Dense`` over ``(B, d)`` or ``(B, ..., d)`` inputs."""

    groups = True  # its norms reduce per clipping unit (.groups)

    family = "dense"

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        def product(a, kernel):
            return tf.matmul(a, kernel) if a.shape.rank == 2 else tf.tensordot(a, kernel, [[a.shape.rank - 1], [0]])
        return _linear(layer, inputs, keep, product)

    def sq_norms(self, layer, saved, tap_grads):
        g3 = flatten_positions(tf.cast(tap_grads[0], tf.float32))
        a3 = flatten_positions(tf.cast(saved["a"], tf.float32))
        total = unit_zeros(g3)
        if trains(layer, layer.kernel):
            total += linear_sq_norms(a3, g3, int(saved["a"].shape[-1]), int(tap_grads[0].shape[-1]))
        if trains(layer, getattr(layer, "bias", None)):
            total += bias_sq_norms(g3)
        return total

    def parts(self, layer, saved, tap_grads):
        g3 = flatten_positions(tf.cast(tap_grads[0], tf.float32))
        parts = {}
        if trains(layer, layer.kernel):
            parts[id(layer.kernel)] = Outer(g3, left=flatten_positions(tf.cast(saved["a"], tf.float32)))
        if trains(layer, getattr(layer, "bias", None)):
            parts[id(layer.bias)] = Rows(tf.reduce_sum(g3, axis=1))
        return parts


class EinsumDenseRule(LayerRule):
    """``keras.layers.EinsumDense`` (the projections of ``MultiHeadAttention`` among them)."""

    groups = True  # its norms reduce per clipping unit (.groups)

    family = "einsum_dense"

    def applies(self, layer) -> bool:
        return "..." not in layer.equation and einsum_parts(layer.equation) is not None

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        return _linear(layer, inputs, keep, lambda a, kernel: tf.einsum(layer.equation, a, kernel))

    def sq_norms(self, layer, saved, tap_grads):
        inp, ker, out = einsum_parts(layer.equation)
        a, g = tf.cast(saved["a"], tf.float32), tf.cast(tap_grads[0], tf.float32)
        total = unit_zeros(g)
        if trains(layer, layer.kernel):
            total += unit_sq_norms(tf.einsum(f"{inp},{out}->{inp[0]}{ker}", a, g))
        bias_axes = getattr(layer, "bias_axes", None)
        if bias_axes and trains(layer, getattr(layer, "bias", None)):
            total += unit_sq_norms(tf.einsum(f"{out}->{out[0]}{bias_axes}", g))
        return total

    def parts(self, layer, saved, tap_grads):
        inp, ker, out = einsum_parts(layer.equation)
        a, g = tf.cast(saved["a"], tf.float32), tf.cast(tap_grads[0], tf.float32)
        parts = {}
        if trains(layer, layer.kernel):
            parts[id(layer.kernel)] = Rows(tf.einsum(f"{inp},{out}->{inp[0]}{ker}", a, g))
        bias_axes = getattr(layer, "bias_axes", None)
        if bias_axes and trains(layer, getattr(layer, "bias", None)):
            parts[id(layer.bias)] = Rows(tf.einsum(f"{out}->{out[0]}{bias_axes}", g))
        return parts


register_layer_rule(keras.layers.Dense, DenseRule())
register_layer_rule(keras.layers.EinsumDense, EinsumDenseRule())
