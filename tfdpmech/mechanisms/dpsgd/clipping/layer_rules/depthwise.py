"""Depthwise and separable convolutions.

A depthwise convolution filters each input channel c with its own ``M`` kernels: ``z_p[c·M + m] =
Σ_k P_p(a)[k, c] W[k, c, m]``. Record i's kernel gradient ``Σ_p P_p(a_i)[k, c] g_ip[c·M + m]`` is small
(kernel size × channels × M), so it is materialised per record: with the records folded into the channels
(``(1, H, W, B·C)``), it is one depthwise kernel gradient of TensorFlow's own (each folded channel is one
record's channel); dilated or unequally strided kernels, which that op does not take on CPU, from the
patches (:func:`.convolution.patches`).

A ``Conv1D`` or ``Conv2D`` with one input channel per group (``groups`` = input channels, as ConvNeXt's 7×7
convolutions) is the same depthwise convolution written as a grouped one: its kernel ``(k, 1, C·M)`` holds the
depthwise kernel's numbers in the same order (output channel ``c·M + m`` reads input channel c), so its norms are
the depthwise ones (:class:`GroupedConvolutionRule`; other groupings are handled alone).

A separable convolution is a depthwise convolution (strides, padding, dilation) followed by a pointwise
(1×1) one: the rule computes the two steps itself and taps both, the depthwise output ``d`` for the
depthwise kernel and ``z`` for the pointwise kernel and the bias (a Dense over the positions of ``d``).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from .convolution import ConvolutionRule, patches, pre_activation
from .groups import unit_sq_norms, unit_zeros
from .linear_algebra import bias_sq_norms, flatten_positions, linear_sq_norms, trains
from .registry import KERAS_3, LayerRule, Tapped, compute_dtype, exact_dtype, register_layer_rule, select_rows

__all__ = ["DepthwiseConvolutionRule", "SeparableConvolutionRule", "GroupedConvolutionRule"]


def _depthwise_sq_norms(layer_geometry, a, g, multiplier: int):
    """Per-record squared norm of a depthwise kernel's gradient: ``a`` the input, ``g`` (B, ..., C·M) the output's."""
    kernel_size, strides, dilation, padding = layer_geometry
    channels = int(a.shape[-1])
    if all(d == 1 for d in dilation) and len(set(strides)) == 1 and padding in ("same", "valid"):
        return _folded_sq_norms(a, g, tuple(kernel_size), strides[0], padding, multiplier)
    p = flatten_positions(patches(a, kernel_size, strides, dilation, padding))  # (B, P, K·C)
    p = tf.reshape(p, (tf.shape(p)[0], tf.shape(p)[1], -1, channels))
    g = tf.reshape(flatten_positions(g), (tf.shape(p)[0], tf.shape(p)[1], channels, multiplier))
    return unit_sq_norms(tf.einsum("bpkc,bpcm->bkcm", p, g))


def _folded_sq_norms(a, g, kernel_size: tuple, stride: int, padding: str, multiplier: int):
    """:func:`_depthwise_sq_norms` with the records folded into the channels: one depthwise kernel gradient."""
    if a.shape.rank == 3:  # 1-D: an image of height 1
        a, g, kernel_size = a[:, None], g[:, None], (1, *kernel_size)
    channels = int(a.shape[-1])
    batch = tf.shape(a)[0]

    def folded(t):  # (B, H, W, K) -> (1, H, W, B·K)
        shape = tf.shape(t)
        return tf.reshape(tf.transpose(t, [1, 2, 0, 3]), tf.stack([1, shape[1], shape[2], batch * int(t.shape[-1])]))

    kernel = tf.compat.v1.nn.depthwise_conv2d_native_backprop_filter(
        folded(a), tf.stack([*kernel_size, batch * channels, multiplier]), folded(g),
        strides=[1, stride, stride, 1], padding=padding.upper())
    per_record = tf.reshape(kernel, tf.stack([-1, batch, channels * multiplier]))  # (kh·kw, B, C·M)
    return unit_sq_norms(tf.transpose(per_record, [1, 0, 2]))


def _geometry(layer):
    return layer.kernel_size, layer.strides, layer.dilation_rate, layer.padding


def _channels_last(layer) -> bool:
    return getattr(layer, "data_format", "channels_last") == "channels_last"


class DepthwiseConvolutionRule(LayerRule):
    """``DepthwiseConv1D`` and ``DepthwiseConv2D`` (channels last)."""

    groups = True  # its norms reduce per clipping unit (.groups)

    family = "depthwise_convolution"

    def applies(self, layer) -> bool:
        return _channels_last(layer)

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        a, z, out = pre_activation(layer, inputs, keep)
        return Tapped(out, [(z, list(layer.trainable_variables))], {"a": a})

    def sq_norms(self, layer, saved, tap_grads):
        kernel = layer.depthwise_kernel if hasattr(layer, "depthwise_kernel") else layer.kernel  # Keras 2.15 / 3
        g = tf.cast(tap_grads[0], tf.float32)
        total = unit_zeros(g)
        if trains(layer, kernel):
            total += _depthwise_sq_norms(_geometry(layer), tf.cast(saved["a"], tf.float32), g,
                                         int(layer.depth_multiplier))
        if trains(layer, getattr(layer, "bias", None)):
            total += bias_sq_norms(flatten_positions(g))
        return total


class SeparableConvolutionRule(LayerRule):
    """``SeparableConv1D`` and ``SeparableConv2D`` (Keras 3, channels last)."""

    groups = True  # its norms reduce per clipping unit (.groups)

    family = "separable_convolution"

    def applies(self, layer) -> bool:
        return KERAS_3 and _channels_last(layer)

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        dtype = exact_dtype(layer)
        a = select_rows(keep, tf.cast(inputs, dtype))
        depthwise = tf.cast(tf.convert_to_tensor(layer.depthwise_kernel), dtype)
        pointwise = tf.cast(tf.convert_to_tensor(layer.pointwise_kernel), dtype)
        d = keras.ops.depthwise_conv(a, depthwise, strides=layer.strides, padding=layer.padding,
                                     dilation_rate=layer.dilation_rate, data_format="channels_last")
        z = keras.ops.conv(d, pointwise, strides=1, padding="valid", data_format="channels_last")
        if getattr(layer, "bias", None) is not None:
            z = z + tf.cast(tf.convert_to_tensor(layer.bias), dtype)
        activation = layer.activation if layer.activation is not None else (lambda t: t)
        point_vars = [v for v in layer.trainable_variables if v is not layer.depthwise_kernel]
        depth_vars = [v for v in layer.trainable_variables if v is layer.depthwise_kernel]
        return Tapped(activation(tf.cast(z, compute_dtype(layer))), [(d, depth_vars), (z, point_vars)],
                      {"a": a, "d": d})

    def sq_norms(self, layer, saved, tap_grads):
        g_d, g_z = (tf.cast(g, tf.float32) for g in tap_grads)
        total = unit_zeros(g_z)
        if trains(layer, layer.depthwise_kernel):
            total += _depthwise_sq_norms(_geometry(layer), tf.cast(saved["a"], tf.float32), g_d,
                                         int(layer.depth_multiplier))
        d3, z3 = flatten_positions(tf.cast(saved["d"], tf.float32)), flatten_positions(g_z)
        if trains(layer, layer.pointwise_kernel):
            total += linear_sq_norms(d3, z3, int(saved["d"].shape[-1]), int(g_z.shape[-1]))
        if trains(layer, getattr(layer, "bias", None)):
            total += bias_sq_norms(z3)
        return total


def _one_channel_per_group(layer) -> bool:
    kernel = getattr(layer, "kernel", None)
    return (kernel is not None and int(kernel.shape[-2]) == 1 and len(layer.kernel_size) <= 2
            and layer.padding in ("same", "valid") and _channels_last(layer))


class GroupedConvolutionRule(ConvolutionRule):
    """``Conv1D``, ``Conv2D``, ``Conv3D`` as :class:`.convolution.ConvolutionRule` with one group, and a ``Conv1D`` or
    ``Conv2D`` with one input channel per group (channels last, padding same or valid) by the depthwise norms."""

    def applies(self, layer) -> bool:
        return super().applies(layer) if getattr(layer, "groups", 1) == 1 else _one_channel_per_group(layer)

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        if getattr(layer, "groups", 1) == 1:
            return super().forward(layer, inputs, keep, args, kwargs)
        a, z, out = pre_activation(layer, inputs, keep)  # Keras's own grouped convolution
        return Tapped(out, [(z, list(layer.trainable_variables))], {"a": a})

    def sq_norms(self, layer, saved, tap_grads):
        if getattr(layer, "groups", 1) == 1:
            return super().sq_norms(layer, saved, tap_grads)
        g = tf.cast(tap_grads[0], tf.float32)
        total = unit_zeros(g)
        if trains(layer, layer.kernel):
            total += _depthwise_sq_norms(_geometry(layer), tf.cast(saved["a"], tf.float32), g,
                                         int(layer.filters) // int(layer.groups))
        if trains(layer, getattr(layer, "bias", None)):
            total += bias_sq_norms(flatten_positions(g))
        return total


for _name in ("DepthwiseConv1D", "DepthwiseConv2D"):
    if hasattr(keras.layers, _name):
        register_layer_rule(getattr(keras.layers, _name), DepthwiseConvolutionRule())
for _name in ("SeparableConv1D", "SeparableConv2D"):
    if hasattr(keras.layers, _name):
        register_layer_rule(getattr(keras.layers, _name), SeparableConvolutionRule())
for _cls in (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D):  # after .convolution's, in its place
    register_layer_rule(_cls, GroupedConvolutionRule())
