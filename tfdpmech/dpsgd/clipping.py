"""Per-example clipped gradient sums for any Keras model, on Keras 2.15 and Keras 3 alike.

DP-SGD needs ``Σ_i clip_C(∇θ ℓ_i)`` with ``clip_C(g) = g · min(1, C / ‖g‖)`` (Abadi et al. 2016,
Algorithm 1). Two ways to compute it, both exact:

``"fast_clipping"`` (ghost norms, one backward pass through the network)
    1. Forward pass with every trainable Dense, EinsumDense, Embedding and Conv2D layer run by
       this module, which keeps the layer's input ``a`` and its pre-activation output ``z``.
    2. One backward pass of ``Σ_i w_i ℓ_i`` to the ``z``'s gives every layer's per-example output
       gradient ``g_i = ∂ℓ_i/∂z_i`` (layers that do not mix records: ``z_i`` depends on record i only).
    3. Per-example squared norms without per-example gradients where that is cheaper
       (Goodfellow 2015, arXiv:1510.01799; Li et al. 2022 "ghost clipping"; Bu et al. 2023
       "Book-Keeping"): for a linear map ``z = a W`` over ``T`` positions,
       ``‖∇W ℓ_i‖² = ⟨a_i a_iᵀ, g_i g_iᵀ⟩`` (cost T²·(d_in + d_out)) or ``‖a_iᵀ g_i‖²`` materialised
       (cost T·d_in·d_out), whichever is smaller; ``T = 1`` gives ``‖a_i‖²‖g_i‖²``. Conv2D is the
       same linear map on its unfolded input (``tf.image.extract_patches``; Rochette et al. 2019).
       Embedding: ``Σ_{s,t} [id_s = id_t] ⟨g_s, g_t⟩``. Biases: ``‖Σ_t g_it‖²``.
    4. With ``c_i = min(1, C/‖∇θ ℓ_i‖)``, each layer's clipped sum ``Σ_i c_i ∇W ℓ_i`` is its local
       weight gradient from the output gradients ``c_i g_i`` (Bu et al. 2023 "book-keeping": the
       weight gradient is linear in ``g``), so no second backward pass through the network runs.
``"vectorized"``
    Per-example gradients of single-record losses (``tf.vectorized_map`` on TensorFlow 2.15, a
    graph loop from 2.16 on: see :data:`_VECTORIZED_MAP_IS_EXACT`), each clipped and summed. Any
    layer that does not mix records; memory grows with batch × parameters.

Records are weighted by ``w_i`` in {0, 1} (Poisson batches pad with ``w_i = 0`` rows, whose gradient
is then exactly 0). A layer whose trainable weights this module cannot see through (any class not
listed above, a nested layer called twice) makes ``"auto"`` choose ``"vectorized"``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import string

import keras
import tensorflow as tf

__all__ = ["CLIPPING_METHODS", "GHOST_LAYERS", "clipped_gradient_sum", "ghost_unsupported_layers", "gradients",
           "per_example_loss", "resolve_clipping"]

CLIPPING_METHODS = ("auto", "fast_clipping", "vectorized")
GHOST_LAYERS = ("Dense", "EinsumDense", "Embedding", "Conv2D")
_TINY = 1e-12


# --------------------------------------------------------------------------------------------
# Which layers ghost norms can see
# --------------------------------------------------------------------------------------------
def _leaf_layers(model):
    """Every layer of ``model`` that holds variables itself (nested models and wrappers opened)."""
    out = []
    for layer in model._flatten_layers(include_self=False, recursive=True):  # both Keras 2.15 and 3
        if not list(layer._flatten_layers(include_self=False, recursive=False)):
            out.append(layer)
    return out


def _ghost_kind(layer) -> str | None:
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
    for layer in _leaf_layers(model):
        if not layer.trainable_variables:
            continue
        if _ghost_kind(layer) is None:
            unsupported.append(f"{layer.name} ({type(layer).__name__})")
        else:
            covered.update(id(v) for v in layer.trainable_variables)
    missing = [v for v in model.trainable_variables if id(v) not in covered]
    if missing and not unsupported:  # weights owned by the model itself (a subclassed model's add_weight)
        unsupported.append(f"{model.name} ({type(model).__name__}: weights of its own)")
    return unsupported


def resolve_clipping(model, method: str) -> str:
    """``"fast_clipping"`` or ``"vectorized"`` for ``method`` in :data:`CLIPPING_METHODS`.

    Raises:
        ValueError: ``method="fast_clipping"`` for a model with a layer ghost norms cannot handle.
    """
    if method not in CLIPPING_METHODS:
        raise ValueError(f"clipping method must be one of {CLIPPING_METHODS}, got {method!r}")
    unsupported = ghost_unsupported_layers(model)
    if method == "vectorized" or (method == "auto" and unsupported):
        return "vectorized"
    if unsupported:
        raise ValueError(
            f"path='fast_clipping' (ghost norms) supports the trainable layers {', '.join(GHOST_LAYERS)}; model "
            f"{model.name!r} also trains {', '.join(unsupported)}. Use path='vectorized' (per-example gradients, "
            "any layer) or path='auto'"
        )
    return "fast_clipping"


def gradients(tape, target, variables, output_gradients=None):
    """``tape.gradient`` as dense tensors, zeros for variables ``target`` does not reach.

    (``unconnected_gradients=ZERO`` fails on Keras 3 variables, whose ``dtype`` is a string.)
    """
    grads = tape.gradient(target, variables, output_gradients=output_gradients)
    return [tf.zeros(v.shape, tf.as_dtype(v.dtype)) if g is None else tf.convert_to_tensor(g)
            for v, g in zip(variables, grads)]


# --------------------------------------------------------------------------------------------
# The per-example loss
# --------------------------------------------------------------------------------------------
def per_example_loss(loss):
    """A copy of the Keras ``loss`` object that returns one loss per record (reduction ``"none"``)."""
    if not isinstance(loss, keras.losses.Loss):
        raise TypeError(
            "loss must be a keras.losses.Loss instance such as keras.losses.CategoricalCrossentropy(from_logits=True), "
            f"got {type(loss).__name__}"
        )
    config = loss.get_config()
    config["reduction"] = "none"
    per_record = loss.__class__.from_config(config)

    def fn(y_true, y_pred):
        values = per_record(y_true, y_pred)
        rank = values.shape.rank
        if rank is not None and rank > 1:  # e.g. a per-position loss: one number per record
            values = tf.reduce_sum(tf.reshape(values, (tf.shape(values)[0], -1)), axis=1)
        return values

    return fn


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


def _linear_forward(layer, kind: str, inputs):
    """The layer's output computed as ``activation(z)`` with its pre-activation ``z`` exposed."""
    dtype = layer.compute_dtype if hasattr(layer, "compute_dtype") else layer.dtype
    if kind == "Embedding":
        ids = tf.cast(inputs, "int32")
        z = tf.gather(tf.convert_to_tensor(layer.embeddings), ids)
        return ids, z, z
    a = tf.cast(inputs, dtype)
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
    return a, z, _activation(layer)(z)


@contextlib.contextmanager
def _recording(layers_and_kinds, tape):
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
            a, z, out = _linear_forward(layer, kind, inputs)
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
        a = tf.image.extract_patches(a, sizes=[1, kh, kw, 1], strides=[1, sh, sw, 1], rates=[1, dh, dw, 1],
                                     padding=layer.padding.upper())
    a3, g3 = _flatten_positions(a), _flatten_positions(g)
    if trains_kernel:
        total += _linear_sq_norms(a3, g3, int(a.shape[-1]), int(g.shape[-1]))
    if trains_bias:
        total += tf.reduce_sum(tf.square(tf.reduce_sum(g3, axis=1)), axis=1)
    return total


# --------------------------------------------------------------------------------------------
# The clipped sum
# --------------------------------------------------------------------------------------------
def _clip_factors(sq_norms, l2_norm_clip: float):
    norms = tf.sqrt(tf.maximum(sq_norms, 0.0))
    return tf.minimum(1.0, l2_norm_clip / tf.maximum(norms, _TINY)), norms


def _ghost_clipped_sum(model, loss_fn, x, y, weights, l2_norm_clip, training):
    records_for = [(layer, _ghost_kind(layer)) for layer in _leaf_layers(model) if layer.trainable_variables]
    with tf.GradientTape(persistent=True) as tape:
        with _recording(records_for, tape) as records:
            y_pred = model(x, training=training)
        losses = loss_fn(y, y_pred) * tf.cast(weights, y_pred.dtype)
        total = tf.reduce_sum(losses)
    # the one backward pass through the network: every recorded layer's per-record output gradients
    output_grads = tape.gradient(total, [r.z for r in records], unconnected_gradients=tf.UnconnectedGradients.ZERO)
    sq_norms = tf.add_n([_record_sq_norms(r, g) for r, g in zip(records, output_grads)])
    factors, norms = _clip_factors(sq_norms, l2_norm_clip)
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


# tf.vectorized_map returns wrong per-example gradients of a broadcast matmul (a Dense layer over
# positions) on TensorFlow 2.20, and then corrupts the heap (``tests/dpsgd/test_clipping.py``
# checks every path against a record-by-record loop); TensorFlow 2.15 is exact. From 2.16 on the
# records are therefore taken one at a time in a graph loop (tf.map_fn): slower, exact.
_VECTORIZED_MAP_IS_EXACT = tuple(int(p) for p in tf.__version__.split(".")[:2]) < (2, 16)


def _vectorized_clipped_sum(model, loss_fn, x, y, weights, l2_norm_clip, training):
    variables = model.trainable_variables

    def one_record(record):
        xi, yi, wi = tf.nest.map_structure(lambda t: t[None], record)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(loss_fn(yi, model(xi, training=training)) * tf.cast(wi, tf.float32))
        grads = gradients(tape, loss, variables)
        sq = tf.add_n([tf.reduce_sum(tf.square(tf.cast(g, tf.float32))) for g in grads])
        factor, norm = _clip_factors(sq, l2_norm_clip)
        return [g * tf.cast(factor, g.dtype) for g in grads], norm

    if _VECTORIZED_MAP_IS_EXACT:
        clipped, norms = tf.vectorized_map(one_record, (x, y, weights))
    else:
        signature = ([tf.TensorSpec(v.shape, tf.as_dtype(v.dtype)) for v in variables], tf.TensorSpec((), tf.float32))
        clipped, norms = tf.map_fn(one_record, (x, y, weights), fn_output_signature=signature)
    y_pred = model(x, training=training)
    return [tf.reduce_sum(g, axis=0) for g in clipped], y_pred, norms


def clipped_gradient_sum(model, loss_fn, x, y, weights, l2_norm_clip: float, method: str, *, training=True):
    """``(Σ_i w_i clip_C(∇θ ℓ_i), y_pred, ‖∇θ ℓ_i‖)`` for one batch.

    Args:
        model: a Keras model whose layers do not mix the records of a batch.
        loss_fn: per-record loss ``(y_true, y_pred) -> (B,)`` (see :func:`per_example_loss`).
        x, y: the batch; weights: ``(B,)`` record weights (Poisson masks: 1 real, 0 padding).
        l2_norm_clip: C > 0.
        method: ``"fast_clipping"`` or ``"vectorized"`` (see :func:`resolve_clipping`).

    Returns:
        The clipped gradient sum (one tensor per ``model.trainable_variables``), the model's
        output on ``x``, and each record's unclipped gradient norm.
    """
    if method == "fast_clipping":
        return _ghost_clipped_sum(model, loss_fn, x, y, weights, l2_norm_clip, training)
    if method == "vectorized":
        return _vectorized_clipped_sum(model, loss_fn, x, y, weights, l2_norm_clip, training)
    raise ValueError(f"method must be 'fast_clipping' or 'vectorized', got {method!r}")
