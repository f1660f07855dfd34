"""Convolutions: Conv1D/2D/3D and their transposes, as linear maps on unfolded patches.

A convolution is ``z_p = P_p(a) W + b`` at every output position p, where ``P_p(a)`` is the patch of the
input it reads (Rochette et al. 2019). Record i's kernel gradient is ``Σ_p P_p(a_i)ᵀ g_ip``: the linear
rule of :mod:`.linear_algebra` over the positions, with the patches as inputs. The patches come from
``tf.image.extract_patches`` (1-D as a 2-D image of height 1), ``tf.extract_volume_patches`` (3-D), or a
convolution with the identity kernel (undilated images and volumes with few channels, dilated volumes), all with the
layer's own strides, padding and dilation (``"causal"``: left padding, then ``"valid"``).

A transposed convolution is the adjoint of a convolution with the same kernel: ``⟨g, convᵀ(a, W)⟩ =
⟨conv(g, W), a⟩``, so its kernel gradient is ``Σ_q P_q(g)ᵀ a_q`` over the input positions q, the patches
taken from the output gradient. Its forward pass is the layer's own (activation applied after the tap).

Handled here: channels-last data, one group, and (transposes) no ``output_padding``; anything else is
handled alone (:mod:`.alone`).
"""

from __future__ import annotations

import contextlib
import math

import keras
import tensorflow as tf

from .groups import unit_zeros
from .linear_algebra import bias_sq_norms, flatten_positions, linear_sq_norms, trains
from .registry import LayerRule, Tapped, compute_dtype, exact_dtype, register_layer_rule, select_rows

__all__ = ["patches", "ConvolutionRule", "TransposedConvolutionRule", "pre_activation"]

_CHANNELS_LAST = {1: "NWC", 2: "NHWC", 3: "NDHWC"}  # named: Conv3D's eager gradient fails on data_format=None
_FEW_CHANNELS = 4  # extract_(volume_)patches copy one channel vector at a time: the identity kernel is faster up to this


def _tuple(value, rank: int) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (int(value),) * rank


def _identity_kernel(kernel_size: tuple, channels: int, dtype):
    size = math.prod(kernel_size) * channels
    return tf.reshape(tf.eye(size, dtype=dtype), (*kernel_size, channels, size))


def patches(a, kernel_size, strides, dilation, padding: str):
    """The ``(B, *out_spatial, prod(kernel_size)·C)`` patches a channels-last convolution with this geometry
    multiplies by its kernel (flattened in the kernel's own order: spatial offsets, then channels)."""
    rank = a.shape.rank - 2
    kernel_size, strides, dilation = _tuple(kernel_size, rank), _tuple(strides, rank), _tuple(dilation, rank)
    padding = padding.upper()
    channels = int(a.shape[-1])
    if rank == 1:
        out = patches(a[:, None], (1, *kernel_size), (1, *strides), (1, *dilation), padding)
        return out[:, 0]
    dilated = any(d != 1 for d in dilation)
    if rank == 2 and (channels > _FEW_CHANNELS or dilated):
        return tf.image.extract_patches(a, sizes=[1, *kernel_size, 1], strides=[1, *strides, 1],
                                        rates=[1, *dilation, 1], padding=padding)
    if rank == 3 and channels > _FEW_CHANNELS and not dilated:
        return tf.extract_volume_patches(a, ksizes=[1, *kernel_size, 1], strides=[1, *strides, 1], padding=padding)
    return tf.nn.convolution(a, _identity_kernel(kernel_size, channels, a.dtype), strides=strides, padding=padding,
                             dilations=dilation, data_format=_CHANNELS_LAST[rank])


def _causal(layer, a):
    """``a`` padded as a causal Conv1D pads it, and the padding its convolution then uses."""
    if layer.padding != "causal":
        return a, layer.padding
    left = layer.dilation_rate[0] * (layer.kernel_size[0] - 1)
    return tf.pad(a, [[0, 0], [left, 0], [0, 0]]), "valid"


def _kernel_sq_norms(p, g, kernel_in: int, filters: int):
    return linear_sq_norms(flatten_positions(p), flatten_positions(g), kernel_in, filters)


class ConvolutionRule(LayerRule):
    """``Conv1D``, ``Conv2D``, ``Conv3D`` (channels last, one group; any strides, dilation and padding)."""

    groups = True  # its norms reduce per clipping unit (.groups)

    family = "convolution"

    def applies(self, layer) -> bool:
        return getattr(layer, "data_format", "channels_last") == "channels_last" and getattr(layer, "groups", 1) == 1

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        dtype = exact_dtype(layer)
        a, padding = _causal(layer, select_rows(keep, tf.cast(inputs, dtype)))
        kernel = tf.cast(tf.convert_to_tensor(layer.kernel), dtype)
        z = tf.nn.convolution(a, kernel, strides=list(layer.strides), padding=padding.upper(),
                              dilations=list(layer.dilation_rate), data_format=_CHANNELS_LAST[a.shape.rank - 2])
        if getattr(layer, "bias", None) is not None:
            z = z + tf.cast(tf.convert_to_tensor(layer.bias), dtype)
        activation = layer.activation if layer.activation is not None else (lambda t: t)
        return Tapped(activation(tf.cast(z, compute_dtype(layer))), [(z, list(layer.trainable_variables))],
                      {"a": a, "padding": padding})

    def sq_norms(self, layer, saved, tap_grads):
        g = tf.cast(tap_grads[0], tf.float32)
        total = unit_zeros(g)
        if trains(layer, layer.kernel):
            p = patches(tf.cast(saved["a"], tf.float32), layer.kernel_size, layer.strides, layer.dilation_rate,
                        saved["padding"])
            total += _kernel_sq_norms(p, g, int(p.shape[-1]), int(g.shape[-1]))
        if trains(layer, getattr(layer, "bias", None)):
            total += bias_sq_norms(flatten_positions(g))
        return total


@contextlib.contextmanager
def _no_activation(layer):
    activation = layer.activation
    object.__setattr__(layer, "activation", None)  # the layer's own call then returns z
    try:
        yield
    finally:
        object.__setattr__(layer, "activation", activation)


def pre_activation(layer, inputs, keep):
    """``(a, z, output)``: the layer's own call on ``a`` (padding rows selected out; float32 under a mixed-precision
    policy, as its weights: :func:`.registry.full_precision_weights`) without its activation, then the
    activation applied to ``z`` and the output cast to the layer's compute dtype."""
    a = select_rows(keep, tf.cast(inputs, exact_dtype(layer)))
    with _no_activation(layer):
        z = type(layer).call(layer, a)
    activation = layer.activation if layer.activation is not None else (lambda t: t)
    return a, z, tf.cast(activation(z), compute_dtype(layer))


class TransposedConvolutionRule(LayerRule):
    """``Conv1DTranspose``, ``Conv2DTranspose``, ``Conv3DTranspose`` (channels last, no ``output_padding``)."""

    groups = True  # its norms reduce per clipping unit (.groups)

    family = "transposed_convolution"

    def applies(self, layer) -> bool:
        return (getattr(layer, "data_format", "channels_last") == "channels_last"
                and getattr(layer, "output_padding", None) is None)

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        a, z, out = pre_activation(layer, inputs, keep)
        return Tapped(out, [(z, list(layer.trainable_variables))], {"a": a})

    def sq_norms(self, layer, saved, tap_grads):
        g = tf.cast(tap_grads[0], tf.float32)
        a = tf.cast(saved["a"], tf.float32)
        total = unit_zeros(g)
        if trains(layer, layer.kernel):
            p = patches(g, layer.kernel_size, layer.strides, layer.dilation_rate, layer.padding)
            total += _kernel_sq_norms(p, a, int(p.shape[-1]), int(a.shape[-1]))
        if trains(layer, getattr(layer, "bias", None)):
            total += bias_sq_norms(flatten_positions(g))
        return total


for _cls in (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D):
    register_layer_rule(_cls, ConvolutionRule())
for _cls in (getattr(keras.layers, "Conv1DTranspose", None), keras.layers.Conv2DTranspose,
             keras.layers.Conv3DTranspose):
    if _cls is not None:
        register_layer_rule(_cls, TransposedConvolutionRule())
