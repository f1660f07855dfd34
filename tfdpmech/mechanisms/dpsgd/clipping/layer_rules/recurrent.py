"""Recurrent layers (SimpleRNN, LSTM, GRU): a cell's weights are shared over time like a Dense over positions.

At step t a cell computes a pre-activation from the step's input, ``x_t W (+ b)``, and from the previous
state, ``h_{t−1} U (+ b_r)``. Record i's kernel gradient is ``Σ_t x_itᵀ g_it`` and its recurrent kernel's
``Σ_t h_i,t−1ᵀ r_it``, with ``g``, ``r`` the gradients of the loss at those two products: the linear rule of
:mod:`.linear_algebra` over the T steps, with no per-record backward pass. The rule runs the recurrence
itself (``tf.scan`` over the steps, in float32 under a mixed-precision policy) with two taps: the input
products of every step at once, and a zero tensor added to every step's recurrent product, whose gradient
at step t is ``r_t`` (for SimpleRNN and LSTM both products enter one sum, so ``r = g``). The clipped sum is
computed from the same quantities, ``Σ_i c_i Σ_t x_itᵀ g_it`` and so on.

Handled: Keras's cells with their own activations, any number of units, ``use_bias``, ``go_backwards``,
``return_sequences``; GRU with ``reset_after=True`` (Keras's default). A layer with a dropout rate, a
state kept across batches, ``return_state``, an initial state or a mask at call time is handled alone.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from .alone import ALONE
from .groups import unit_zeros
from .linear_algebra import bias_sq_norms, linear_sq_norms
from .registry import LayerRule, Tapped, compute_dtype, exact_dtype, register_layer_rule, select_rows, watched

__all__ = ["RecurrentRule"]


def _cell(layer):
    return layer.cell


def _weights(layer, dtype):
    cell = _cell(layer)
    bias = tf.cast(tf.convert_to_tensor(cell.bias), dtype) if getattr(cell, "bias", None) is not None else None
    return (tf.cast(tf.convert_to_tensor(cell.kernel), dtype), tf.cast(tf.convert_to_tensor(cell.recurrent_kernel), dtype),
            bias)


def _simple_step(cell, u):
    act = cell.activation

    def step(carry, elems):
        a_t, tap_t = elems
        return (act(a_t + tf.matmul(carry[0], u) + tap_t),)
    return step


def _lstm_step(cell, u):
    act, rec = cell.activation, cell.recurrent_activation

    def step(carry, elems):
        h, c = carry
        a_t, tap_t = elems
        i, f, g, o = tf.split(a_t + tf.matmul(h, u) + tap_t, 4, axis=-1)
        c = rec(f) * c + rec(i) * act(g)
        return rec(o) * act(c), c
    return step


def _gru_step(cell, u, recurrent_bias):
    act, rec = cell.activation, cell.recurrent_activation

    def step(carry, elems):
        h = carry[0]
        a_t, tap_t = elems
        x_z, x_r, x_h = tf.split(a_t, 3, axis=-1)
        inner = tf.matmul(h, u) + tap_t
        if recurrent_bias is not None:
            inner = inner + recurrent_bias
        r_z, r_r, r_h = tf.split(inner, 3, axis=-1)
        z, r = rec(x_z + r_z), rec(x_r + r_r)
        return (z * h + (1.0 - z) * act(x_h + r * r_h),)
    return step


class RecurrentRule(LayerRule):
    """``SimpleRNN``, ``LSTM`` and ``GRU`` (see the module docstring); ``kind`` names the cell."""

    groups = True  # its norms reduce per clipping unit (.groups)

    family = "recurrent"

    def __init__(self, kind: str):
        self.kind = kind

    def applies(self, layer) -> bool:
        cell = _cell(layer)
        return (not getattr(layer, "stateful", False) and not getattr(layer, "return_state", False)
                and not getattr(layer, "unroll", False) and not float(getattr(cell, "dropout", 0) or 0)
                and not float(getattr(cell, "recurrent_dropout", 0) or 0)
                and (self.kind != "gru" or getattr(cell, "reset_after", False)))

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        if args or kwargs.get("mask") is not None or kwargs.get("initial_state") is not None:
            tapped = ALONE.forward(layer, inputs, keep, args, kwargs)
            tapped.saved["alone"] = True
            return tapped
        dtype = exact_dtype(layer)
        cell = _cell(layer)
        x = select_rows(keep, tf.cast(inputs, dtype))
        if layer.go_backwards:
            x = tf.reverse(x, axis=[1])
        w, u, bias = _weights(layer, dtype)
        recurrent_bias = None
        if bias is not None and self.kind == "gru":
            bias, recurrent_bias = bias[0], bias[1]
        a = tf.einsum("bti,ig->btg", x, w)
        if bias is not None:
            a = a + bias
        tap = watched(tf.zeros_like(a))  # its gradient at step t: the loss's gradient at the recurrent product
        rows, units = tf.shape(x)[0], int(cell.units)
        zeros = tf.zeros(tf.stack([rows, units]), dtype)
        step = {"simple": lambda: _simple_step(cell, u), "lstm": lambda: _lstm_step(cell, u),
                "gru": lambda: _gru_step(cell, u, recurrent_bias)}[self.kind]()
        carry = (zeros, zeros) if self.kind == "lstm" else (zeros,)
        time_major = (tf.transpose(a, [1, 0, 2]), tf.transpose(tap, [1, 0, 2]))
        states = tf.scan(step, time_major, initializer=carry)
        h = tf.transpose(states[0], [1, 0, 2])  # (B, T, units)
        h_prev = tf.concat([zeros[:, None], h[:, :-1]], axis=1)
        out = h if layer.return_sequences else h[:, -1]
        taps = [(a, []), (tap, [])] if self.kind == "gru" else [(tap, [])]
        return Tapped(tf.cast(out, compute_dtype(layer)), taps, {"x": x, "h_prev": h_prev})

    def _grads(self, saved, tap_grads):
        """``(g, r)``: the gradients at the input and at the recurrent products, (B, T, gates)."""
        return (tap_grads[0], tap_grads[1]) if self.kind == "gru" else (tap_grads[0], tap_grads[0])

    def _parts(self, layer):
        cell = _cell(layer)
        trainable = {id(v) for v in layer.trainable_variables}
        bias = getattr(cell, "bias", None)
        return (id(cell.kernel) in trainable, id(cell.recurrent_kernel) in trainable,
                bias is not None and id(bias) in trainable)

    def sq_norms(self, layer, saved, tap_grads):
        if saved.get("alone"):
            return ALONE.sq_norms(layer, saved, tap_grads)
        g, r = self._grads(saved, tap_grads)
        x, h_prev = tf.cast(saved["x"], tf.float32), tf.cast(saved["h_prev"], tf.float32)
        kernel, recurrent, bias = self._parts(layer)
        gates = int(g.shape[-1])
        total = unit_zeros(g)
        if kernel:
            total += linear_sq_norms(x, g, int(x.shape[-1]), gates)
        if recurrent:
            total += linear_sq_norms(h_prev, r, int(h_prev.shape[-1]), gates)
        if bias:
            total += bias_sq_norms(g) + (bias_sq_norms(r) if self.kind == "gru" else 0.0)
        return total

    def clipped_sum(self, layer, saved, tap_grads, factors):
        if saved.get("alone"):
            return ALONE.clipped_sum(layer, saved, tap_grads, factors)
        g, r = (t * factors[:, None, None] for t in self._grads(saved, tap_grads))
        x, h_prev = tf.cast(saved["x"], tf.float32), tf.cast(saved["h_prev"], tf.float32)
        cell = _cell(layer)
        bias = tf.reduce_sum(g, axis=[0, 1])
        if self.kind == "gru":
            bias = tf.stack([bias, tf.reduce_sum(r, axis=[0, 1])])
        by_variable = {id(cell.kernel): tf.einsum("bti,btg->ig", x, g),
                       id(cell.recurrent_kernel): tf.einsum("btu,btg->ug", h_prev, r)}
        if getattr(cell, "bias", None) is not None:
            by_variable[id(cell.bias)] = bias
        return [by_variable[id(v)] for v in layer.trainable_variables]


for _name, _kind in (("SimpleRNN", "simple"), ("LSTM", "lstm"), ("GRU", "gru")):
    register_layer_rule(getattr(keras.layers, _name), RecurrentRule(_kind))
