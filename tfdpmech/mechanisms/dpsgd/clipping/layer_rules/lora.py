"""Dense and EinsumDense with LoRA (``layer.enable_lora(rank)``, keras-hub's ``backbone.enable_lora``).

LoRA freezes the kernel ``K₀`` and trains two factors: the layer computes with ``K = K₀ + s·A B`` (``s = α/r``;
``A`` of shape ``K.shape[:-1] + (r,)``, ``B`` of shape ``(r, K.shape[-1])``). Record i's gradient of the kernel
``G_i`` (materialised as the linear rules compute it: :mod:`.dense`) gives the factors' gradients by the chain
rule, ``∂A_i = s · G_i Bᵀ`` (contracting the output axis) and ``∂B_i = s · Aᵀ G_i`` (contracting the others), so
each record's gradient of every trainable weight (the factors and a trainable bias) is materialised from one
product of its input and output gradient: no per-record pass. The clipped sum is ``Σ_i c_i ∂A_i`` and so on.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from .dense import einsum_parts
from .linear_algebra import flatten_positions
from .registry import Tapped, compute_dtype, exact_dtype, register_flag_rule, select_rows
from .shared_uses import MaterialisedRule

__all__ = ["LoraRule", "LORA"]


def _activation(layer):
    act = getattr(layer, "activation", None)
    return act if act is not None else (lambda t: t)


class LoraRule(MaterialisedRule):
    """A LoRA-enabled ``keras.layers.Dense`` or ``keras.layers.EinsumDense`` (see the module docstring)."""

    groups = True  # its norms reduce per clipping unit (.groups)
    family = "lora"

    def applies(self, layer) -> bool:
        if type(layer) not in (keras.layers.Dense, keras.layers.EinsumDense) or not getattr(layer, "lora_enabled", False):
            return False
        if getattr(layer, "quantization_mode", None):
            return False
        if isinstance(layer, keras.layers.EinsumDense) and ("..." in layer.equation
                                                           or einsum_parts(layer.equation) is None):
            return False
        known = {id(layer.lora_kernel_a), id(layer.lora_kernel_b), id(getattr(layer, "bias", None))}
        return all(id(v) in known for v in layer.trainable_variables)

    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        dtype = exact_dtype(layer)
        a = select_rows(keep, tf.cast(inputs, dtype))
        kernel = tf.cast(tf.convert_to_tensor(layer.kernel), dtype)  # K₀ + s·A B
        if isinstance(layer, keras.layers.EinsumDense):
            z = tf.einsum(layer.equation, a, kernel)
        else:
            z = tf.matmul(a, kernel) if a.shape.rank == 2 else tf.tensordot(a, kernel, [[a.shape.rank - 1], [0]])
        if getattr(layer, "bias", None) is not None:
            z = z + tf.cast(tf.convert_to_tensor(layer.bias), dtype)
        out = _activation(layer)(tf.cast(z, compute_dtype(layer)))
        return Tapped(out, [(z, [])], {"a": a})  # the clipped sum is this rule's own

    def _per_record(self, layer, saved, tap_grads) -> dict:
        """``{id(weight): (B, *weight.shape)}``: each record's gradient of each trainable weight."""
        if "per_record" in saved:
            return saved["per_record"]
        a, g = tf.cast(saved["a"], tf.float32), tf.cast(tap_grads[0], tf.float32)
        if isinstance(layer, keras.layers.EinsumDense):
            inp, ker, out = einsum_parts(layer.equation)
            kernel = tf.einsum(f"{inp},{out}->{inp[0]}{ker}", a, g)  # (B, *K.shape)
            bias_axes = getattr(layer, "bias_axes", None)
            bias = tf.einsum(f"{out}->{out[0]}{bias_axes}", g) if bias_axes else None
        else:
            a3, g3 = flatten_positions(a), flatten_positions(g)
            kernel = tf.einsum("bti,bto->bio", a3, g3)
            bias = tf.reduce_sum(g3, axis=1)
        scale = float(layer.lora_alpha) / float(layer.lora_rank)
        factor_a = tf.cast(tf.convert_to_tensor(layer.lora_kernel_a), tf.float32)
        factor_b = tf.cast(tf.convert_to_tensor(layer.lora_kernel_b), tf.float32)
        rows, outputs = tf.shape(kernel)[0], int(kernel.shape[-1])
        flat = tf.reshape(kernel, (rows, -1, outputs))  # (B, prod(K.shape[:-1]), out)
        rank = int(factor_b.shape[0])
        grad_a = scale * tf.einsum("bko,ro->bkr", flat, factor_b)
        grad_b = scale * tf.einsum("bko,kr->bro", flat, tf.reshape(factor_a, (-1, rank)))
        per_record = {id(layer.lora_kernel_a): tf.reshape(grad_a, tf.concat([[rows], factor_a.shape], 0)),
                      id(layer.lora_kernel_b): grad_b}
        if bias is not None and getattr(layer, "bias", None) is not None:
            per_record[id(layer.bias)] = bias
        saved["per_record"] = {k: v for k, v in per_record.items()
                               if any(id(w) == k for w in layer.trainable_variables)}
        return saved["per_record"]



LORA = LoraRule()
register_flag_rule("lora_enabled", LORA)
