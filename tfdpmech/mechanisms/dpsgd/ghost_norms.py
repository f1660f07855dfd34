"""Ghost norms: per-example clipped gradient sums from one backward pass (``path="fast_clipping"``).

The method of :mod:`tfdpmech.mechanisms.dpsgd.clipping` for models whose trainable layers are all Dense,
EinsumDense, Embedding or Conv2D (:data:`GHOST_LAYERS`), each called once per forward pass
(Goodfellow 2015; Li et al. 2022; Bu et al. 2023 "book-keeping"; Rochette et al. 2019 for
convolutions). The steps are described in :mod:`tfdpmech.mechanisms.dpsgd.clipping`.

Rows whose weight ``w_i`` is 0 (the padding rows of a Poisson batch) are **selected out**, never
multiplied by 0: every recorded layer sees a zero input for them and their loss is replaced by 0, and
their output gradients are set to 0, so a row whose forward pass gives NaN or inf (for instance an
all-padding sequence through a masked average, 0/0) contributes exactly 0 and no NaN.
"""

from __future__ import annotations

import contextlib
import dataclasses

import tensorflow as tf

__all__ = ["GHOST_LAYERS", "leaf_layers", "ghost_kind", "ghost_unsupported_layers", "gradients", "clip_factors",
           "select_rows", "ghost_clipped_sum"]

GHOST_LAYERS = ("Dense", "EinsumDense", "Embedding", "Conv2D")
_TINY = 1e-12


# --------------------------------------------------------------------------------------------
# Which layers ghost norms can see
# --------------------------------------------------------------------------------------------
def leaf_layers(model):
    """Every layer of ``model`` that holds variables itself (nested models and wrappers opened)."""
    out = []
    for layer in model._flatten_layers(include_self=False, recursive=True):  # both Keras 2.15 and 3
        if not list(layer._flatten_layers(include_self=False, recursive=False)):
            out.append(layer)
    return out


def ghost_kind(layer) -> str | None:
    """The ghost-norm rule for ``layer`` (exact class match), or None when there is none."""
    name = type(layer).__name__
    if name not in GHOST_LAYERS or type(layer).__module__.split(".")[0] not in ("keras", "tf_keras"):
        return None
    if getattr(layer, "lora_enabled", False) or getattr(layer, "quantization_mode", None):
        return None
    if name == "Conv2D" and (getattr(layer, "data_format", "channels_last") != "channels_last"
                             or getattr(layer, "groups", 1) != 1):
        return None
    if name == "EinsumDense" and ("..." in layer.equation or not _einsum_parts(layer.equation)):
        return None
    return name


def ghost_unsupported_layers(model) -> list[str]:
    """Names of the trainable layers ghost norms cannot handle (empty: ``"fast_clipping"`` applies)."""
    covered = set()
    unsupported = []
    for layer in leaf_layers(model):
        if not layer.trainable_variables:
            continue
        if ghost_kind(layer) is None:
            unsupported.append(f"{layer.name} ({type(layer).__name__})")
        else:
            covered.update(id(v) for v in layer.trainable_variables)
    missing = [v for v in model.trainable_variables if id(v) not in covered]
    if missing and not unsupported:  # weights owned by the model itself (a subclassed model's add_weight)
        unsupported.append(f"{model.name} ({type(model).__name__}: weights of its own)")
    return unsupported


def gradients(tape, target, variables, output_gradients=None):
    """``tape.gradient`` as dense tensors, zeros for variables ``target`` does not reach.

    (``unconnected_gradients=ZERO`` fails on Keras 3 variables, whose ``dtype`` is a string.)
    """
    grads = tape.gradient(target, variables, output_gradients=output_gradients)
    return [tf.zeros(v.shape, tf.as_dtype(v.dtype)) if g is None else tf.convert_to_tensor(g)
            for v, g in zip(variables, grads)]


# --------------------------------------------------------------------------------------------
# Recording the linear layers during the forward pass
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Record:
    layer: object
    kind: str
    inputs: tf.Tensor
    z: tf.Tensor


def _activation(layer):
    act = getattr(layer, "activation", None)
    return act if act is not None else (lambda t: t)


def _einsum_parts(equation: str):
    """``(input, kernel, output)`` subscripts of ``"ab,bc->ac"``, or None for an unsupported form."""
    try:
        lhs, out = equation.replace(" ", "").split("->")
        inp, ker = lhs.split(",")
    except ValueError:
        return None
    if not inp or not out or inp[0] != out[0] or inp[0] in ker:
        return None
    return inp, ker, out


def select_rows(keep, t):
    """``t`` with the rows where ``keep`` (B,) is False replaced by 0 (a select: NaN or inf there is dropped)."""
    keep = tf.reshape(keep, [-1] + [1] * (t.shape.rank - 1))
    return tf.where(keep, t, tf.zeros_like(t))


_LOW_PRECISION = (tf.float16, tf.bfloat16)


def _compute_dtype(layer) -> tf.DType:
    return tf.as_dtype(layer.compute_dtype if hasattr(layer, "compute_dtype") else layer.dtype)


def backward_loss_scale(layers) -> float:
    """The fixed loss scale of the DP step's backward pass: ``2**8`` when a layer computes in float16 (its
    small output gradients would underflow), else 1. Fixed, not dynamic: a scale that moved with whether a
    batch overflowed would carry information about the records into later steps."""
    return 2.0 ** 8 if any(_compute_dtype(layer) == tf.float16 for layer in layers) else 1.0


def _linear_forward(layer, kind: str, inputs, keep):
    """The layer's output computed as ``activation(z)`` with its pre-activation ``z`` exposed.

    The input rows of records that do not count (``keep`` False: padding) are set to 0 first. Under a
    mixed-precision policy (float16 or bfloat16 compute) the product runs in float32, so ``z``, the
    per-record norms and the clipped sums are float32; the output is cast back to the layer's dtype.
    """
    dtype = _compute_dtype(layer)
    out_dtype, dtype = dtype, (tf.float32 if dtype in _LOW_PRECISION else dtype)
    if kind == "Embedding":
        ids = select_rows(keep, tf.cast(inputs, "int32"))
        z = tf.gather(tf.convert_to_tensor(layer.embeddings), ids)
        return ids, z, tf.cast(z, out_dtype)
    a = select_rows(keep, tf.cast(inputs, dtype))
    kernel = tf.cast(tf.convert_to_tensor(layer.kernel), dtype)
    if kind == "Dense":
        z = tf.matmul(a, kernel) if a.shape.rank == 2 else tf.tensordot(a, kernel, [[a.shape.rank - 1], [0]])
    elif kind == "Conv2D":
        z = tf.nn.convolution(a, kernel, strides=layer.strides, padding=layer.padding.upper(),
                              dilations=layer.dilation_rate)
    else:  # EinsumDense
        z = tf.einsum(layer.equation, a, kernel)
    bias = getattr(layer, "bias", None)
    if bias is not None:
        z = z + tf.cast(tf.convert_to_tensor(bias), dtype)
    return a, z, _activation(layer)(tf.cast(z, out_dtype))


@contextlib.contextmanager
def _recording(layers_and_kinds, tape, keep):
    """Run the given layers through :func:`_linear_forward` and keep ``(input, z)``; restore on exit."""
    records: list[_Record] = []
    saved = []

    def make_call(layer, kind):
        def call(inputs, *args, **kwargs):
            if any(r.layer is layer for r in records):
                raise ValueError(
                    f"layer {layer.name!r} is called more than once per forward pass (shared weights), so its "
                    "per-example gradient is a sum ghost norms do not see; use path='vectorized'"
                )
            rows, records_in_batch = inputs.shape[0], keep.shape[0]
            if rows is not None and records_in_batch is not None and rows != records_in_batch:
                raise ValueError(
                    f"layer {layer.name!r} sees {rows} rows for a batch of {records_in_batch} records (a wrapper such "
                    "as TimeDistributed reshapes the records), so ghost norms cannot tell the records apart; use "
                    "path='vectorized'"
                )
            a, z, out = _linear_forward(layer, kind, inputs, keep)
            tape.watch(z)
            records.append(_Record(layer, kind, a, z))
            return out
        return call

    try:
        for layer, kind in layers_and_kinds:
            saved.append((layer, layer.__dict__.get("call")))
            object.__setattr__(layer, "call", make_call(layer, kind))
        yield records
    finally:
        for layer, original in saved:
            if original is None:
                object.__delattr__(layer, "call")
            else:
                object.__setattr__(layer, "call", original)


def _flatten_positions(t):
    """``(B, T, d)`` from ``(B, ..., d)`` (T = 1 for rank 2)."""
    if t.shape.rank == 2:
        return t[:, None, :]
    return tf.reshape(t, (tf.shape(t)[0], -1, tf.shape(t)[-1]))


def _linear_sq_norms(a, g, d_in: int, d_out: int):
    """``‖a_iᵀ g_i‖²_F`` per record for ``a`` (B, T, d_in), ``g`` (B, T, d_out): ghost or materialised."""
    positions = a.shape[1]
    if positions == 1:
        return tf.reduce_sum(tf.square(a[:, 0]), 1) * tf.reduce_sum(tf.square(g[:, 0]), 1)
    # ghost ⟨a aᵀ, g gᵀ⟩ costs T²·(d_in + d_out) per record, materialising a_iᵀ g_i costs T·d_in·d_out
    if positions is not None and positions * (d_in + d_out) <= d_in * d_out:
        return tf.reduce_sum(tf.matmul(a, a, transpose_b=True) * tf.matmul(g, g, transpose_b=True), axis=[1, 2])
    return tf.reduce_sum(tf.square(tf.einsum("bti,bto->bio", a, g)), axis=[1, 2])


# extract_patches copies one channel vector at a time: with few input channels (an image's first
# layer) a convolution with the identity kernel gathers the same patches several times faster
_FEW_CHANNELS = 4


def _patches(a, kh: int, kw: int, strides, dilations, padding: str):
    """The ``(B, H', W', kh·kw·c)`` patches a Conv2D multiplies by its kernel (``extract_patches``' order)."""
    channels = int(a.shape[-1])
    if channels <= _FEW_CHANNELS and tuple(dilations) == (1, 1):
        identity = tf.reshape(tf.eye(kh * kw * channels, dtype=a.dtype), (kh, kw, channels, kh * kw * channels))
        return tf.nn.conv2d(a, identity, strides=[1, *strides, 1], padding=padding)
    return tf.image.extract_patches(a, sizes=[1, kh, kw, 1], strides=[1, *strides, 1], rates=[1, *dilations, 1],
                                    padding=padding)


def _record_sq_norms(record: _Record, g):
    """Per-record squared norm of the gradient of every trainable weight of one recorded layer."""
    layer, kind, a = record.layer, record.kind, record.inputs
    g = tf.cast(g, tf.float32)
    if kind == "Embedding":
        ids = tf.reshape(a, (tf.shape(a)[0], -1))
        gs = tf.reshape(g, (tf.shape(g)[0], -1, tf.shape(g)[-1]))
        same = tf.cast(tf.equal(ids[:, :, None], ids[:, None, :]), tf.float32)
        return tf.reduce_sum(same * tf.matmul(gs, gs, transpose_b=True), axis=[1, 2])
    a = tf.cast(a, tf.float32)
    trains_kernel = any(v is layer.kernel for v in layer.trainable_variables)
    trains_bias = getattr(layer, "bias", None) is not None and any(v is layer.bias for v in layer.trainable_variables)
    total = tf.zeros(tf.shape(g)[:1], tf.float32)
    if kind == "EinsumDense":
        inp, ker, out = _einsum_parts(layer.equation)
        if trains_kernel:
            per_record = tf.einsum(f"{inp},{out}->{inp[0]}{ker}", a, g)
            total += tf.reduce_sum(tf.reshape(tf.square(per_record), (tf.shape(per_record)[0], -1)), axis=1)
        bias_axes = getattr(layer, "bias_axes", None)
        if trains_bias and bias_axes:
            per_record = tf.einsum(f"{out}->{out[0]}{bias_axes}", g)
            total += tf.reduce_sum(tf.reshape(tf.square(per_record), (tf.shape(per_record)[0], -1)), axis=1)
        return total
    if kind == "Conv2D":
        kh, kw = layer.kernel_size
        sh, sw = layer.strides
        dh, dw = layer.dilation_rate
        a = _patches(a, kh, kw, (sh, sw), (dh, dw), layer.padding.upper())
    a3, g3 = _flatten_positions(a), _flatten_positions(g)
    if trains_kernel:
        total += _linear_sq_norms(a3, g3, int(a.shape[-1]), int(g.shape[-1]))
    if trains_bias:
        total += tf.reduce_sum(tf.square(tf.reduce_sum(g3, axis=1)), axis=1)
    return total


# --------------------------------------------------------------------------------------------
# The clipped sum
# --------------------------------------------------------------------------------------------
def clip_factors(sq_norms, l2_norm_clip: float):
    """``(min(1, C/‖g_i‖), ‖g_i‖)`` from the squared norms (Abadi et al. 2016, Algorithm 1, "clip gradient")."""
    norms = tf.sqrt(tf.maximum(sq_norms, 0.0))
    return tf.minimum(1.0, l2_norm_clip / tf.maximum(norms, _TINY)), norms


def ghost_clipped_sum(model, loss_fn, x, y, weights, l2_norm_clip, training):
    """``(Σ_i w_i clip_C(∇θ ℓ_i), y_pred, ‖∇θ ℓ_i‖)`` by ghost norms (see :func:`tfdpmech.mechanisms.dpsgd.clipping.clipped_gradient_sum`).

    Raises:
        ValueError: a recorded layer is called twice in one forward pass (its gradient is a sum over calls).
    """
    layers = leaf_layers(model)
    records_for = [(layer, ghost_kind(layer)) for layer in layers if layer.trainable_variables]
    scale = backward_loss_scale(layers)
    weights = tf.cast(weights, tf.float32)
    keep = weights > 0
    with tf.GradientTape(persistent=True) as tape:
        with _recording(records_for, tape, keep) as records:
            y_pred = model(x, training=training)
        losses = loss_fn(y, y_pred)
        total = tf.reduce_sum(select_rows(keep, losses * tf.cast(weights, losses.dtype))) * scale
    # the one backward pass through the network: every recorded layer's per-record output gradients
    output_grads = tape.gradient(total, [r.z for r in records], unconnected_gradients=tf.UnconnectedGradients.ZERO)
    output_grads = [select_rows(keep, g) / tf.cast(scale, g.dtype) for g in output_grads]
    sq_norms = tf.add_n([_record_sq_norms(r, g) for r, g in zip(records, output_grads)])
    factors, norms = clip_factors(sq_norms, l2_norm_clip)
    # Book-keeping (Bu et al. 2023): a layer's weight gradient is linear in its output gradient, so
    # Σ_i c_i ∇W ℓ_i is the layer's own local weight gradient with g_i scaled by c_i; no second
    # backward pass through the network.
    by_variable = {}
    for record, g in zip(records, output_grads):
        scaled = g * tf.reshape(tf.cast(factors, g.dtype), [-1] + [1] * (g.shape.rank - 1))
        local = record.layer.trainable_variables
        for v, grad in zip(local, gradients(tape, record.z, local, output_gradients=scaled)):
            by_variable[id(v)] = grad
    del tape
    # a trainable layer the forward pass did not reach has a zero gradient
    return ([by_variable.get(id(v), tf.zeros(v.shape, tf.as_dtype(v.dtype))) for v in model.trainable_variables],
            y_pred, norms)


