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
    Per-example gradients of single-record losses (``tf.vectorized_map`` on TensorFlow 2.15 where
    the model has a vectorized form, else a graph loop; always the loop from 2.16 on: see
    :data:`_VECTORIZED_MAP_IS_EXACT`), each clipped and summed. Any layer that does not mix records;
    memory grows with batch × parameters.

Records are weighted by ``w_i`` in {0, 1} (Poisson batches pad with ``w_i = 0`` rows). A row with
``w_i = 0`` is selected out (its loss, input and gradient replaced by 0, never multiplied by 0), so it
contributes exactly 0 even when its forward pass gives NaN (an all-padding sequence through a masked
average). The ghost norms are in :mod:`.ghost_norms`.

Which method a model gets (:func:`resolve_clipping`): ghost norms only when every trainable layer is
one of :data:`GHOST_LAYERS` **and** the ghost norms of a probe batch equal a record-by-record loop of
gradient tapes (:func:`ghost_norms_mismatch`). The probe sees what no list of layers shows: a variable
read outside its own layer (tied weights, e.g. an output projection reading an Embedding's table), a
layer called twice inside a container. ``"auto"`` then takes ``"vectorized"`` (exact for those);
``"fast_clipping"`` is refused, naming the cause, before any release.
"""


from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from ...distribute import strategy_of
from .ghost_norms import (
    GHOST_LAYERS,
    clip_factors,
    ghost_clipped_sum,
    ghost_unsupported_layers,
    gradients,
    leaf_layers,
    select_rows,
)
from .model_probe import probe_inputs

__all__ = ["CLIPPING_METHODS", "GHOST_LAYERS", "clipped_gradient_sum", "ghost_unsupported_layers", "gradients",
           "per_example_loss", "resolve_clipping", "ghost_norms_mismatch"]

CLIPPING_METHODS = ("auto", "fast_clipping", "vectorized")
# float32 ghost norms agree with the loop to ~1e-6; an unseen use of a weight is off by far more. Under a
# mixed-precision policy the loop's own gradients are float16 / bfloat16 (about 3 and 2 significant digits)
_PROBE_RTOL = {"float16": 1e-2, "bfloat16": 5e-2}
_PROBE_RTOL_DEFAULT = 1e-3


def _probe_rtol(model) -> float:
    dtypes = {str(getattr(layer, "compute_dtype", "float32")) for layer in leaf_layers(model)}
    return max([_PROBE_RTOL.get(d, _PROBE_RTOL_DEFAULT) for d in dtypes] or [_PROBE_RTOL_DEFAULT])


# --------------------------------------------------------------------------------------------
# Which method a model gets
# --------------------------------------------------------------------------------------------
def _probe_loss(y, y_pred):
    """A per-record probe loss: ``Σ r ⊙ output`` over every output, ``y`` = the random weights ``r``."""
    parts = [tf.reshape(tf.cast(r, tf.float32) * tf.cast(o, tf.float32), (tf.shape(o)[0], -1))
             for r, o in zip(tf.nest.flatten(y), tf.nest.flatten(y_pred))]
    return tf.add_n([tf.reduce_sum(p, axis=1) for p in parts])


def _rows(x, i: int):
    return tf.nest.map_structure(lambda t: t[i:i + 1], x)


def ghost_norms_mismatch(model, x=None) -> str | None:
    """Why ghost norms are not exact for ``model`` on a probe batch, or None when they are.

    Compares, on a probe batch ``x`` (:func:`~tfdpmech.mechanisms.dpsgd.model_probe.probe_inputs` when None) and
    a random linear probe loss, the ghost per-record norms and the ghost gradient sum with a loop of one
    gradient tape per record (inference mode, so random layers do not differ between the two). Under a
    ``tf.distribute`` strategy the probe runs in its replicas (where the gradients of its variables exist).
    """
    strategy = strategy_of(model)
    if strategy is None or not tf.distribute.in_cross_replica_context():
        return _ghost_norms_mismatch(model, x)
    with strategy.scope():
        results = strategy.experimental_local_results(strategy.run(lambda: _ghost_norms_mismatch(model, x)))
    return next((r for r in results if r is not None), None)


def _ghost_norms_mismatch(model, x=None) -> str | None:
    x = probe_inputs(model) if x is None else x
    if x is None:
        return f"model {model.name!r} has no known input shape to probe"
    try:
        outputs = model(x, training=False)
    except Exception as exc:  # pylint: disable=broad-except  (the exact path is taken; its own errors are the model's)
        return f"model {model.name!r} did not run on a probe batch ({type(exc).__name__})"
    rtol = _probe_rtol(model)
    rng = np.random.default_rng(0)
    r = tf.nest.map_structure(lambda o: tf.constant(rng.normal(size=o.shape).astype(np.float32)), outputs)
    rows = int(tf.shape(tf.nest.flatten(outputs)[0])[0])
    try:
        summed, _, norms = ghost_clipped_sum(model, _probe_loss, x, r, tf.ones((rows,)), 1e30, training=False)
    except ValueError as exc:  # a recorded layer called twice
        return str(exc)
    variables = model.trainable_variables
    reference = [np.zeros(v.shape, np.float64) for v in variables]
    for i in range(rows):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(_probe_loss(_rows(r, i), model(_rows(x, i), training=False)))
        grads = [g.numpy().astype(np.float64) for g in gradients(tape, loss, variables)]
        norm = np.sqrt(sum(float(np.sum(g * g)) for g in grads))
        if abs(float(norms[i]) - norm) > rtol * max(norm, 1e-6):
            return (f"the ghost norm of a probe record is {float(norms[i]):.6g}, its gradient's norm is {norm:.6g}: "
                    "some use of a trainable weight happens outside the layer that owns it")
        reference = [a + g for a, g in zip(reference, grads)]
    unseen = [v.name for v, got, want in zip(variables, summed, reference)
              if np.linalg.norm(got.numpy() - want) > rtol * max(np.linalg.norm(want), 1e-6)]
    if unseen:
        return (f"the gradient of {', '.join(unseen)} has uses ghost norms do not see (read outside the layer that "
                "owns it, e.g. tied weights)")
    return None


def resolve_clipping(model, method: str) -> str:
    """``"fast_clipping"`` or ``"vectorized"`` for ``method`` in :data:`CLIPPING_METHODS`.

    ``"auto"`` takes ghost norms when every trainable layer is one of :data:`GHOST_LAYERS` and
    :func:`ghost_norms_mismatch` finds them exact on a probe batch, else ``"vectorized"``.

    Raises:
        ValueError: ``method="fast_clipping"`` for a model whose ghost norms would not be exact.
    """
    if method not in CLIPPING_METHODS:
        raise ValueError(f"clipping method must be one of {CLIPPING_METHODS}, got {method!r}")
    if method == "vectorized":
        return "vectorized"
    unsupported = ghost_unsupported_layers(model)
    if unsupported:
        if method == "auto":
            return "vectorized"
        raise ValueError(
            f"path='fast_clipping' (ghost norms) supports the trainable layers {', '.join(GHOST_LAYERS)}; model "
            f"{model.name!r} also trains {', '.join(unsupported)}. Use path='vectorized' (per-example gradients, "
            "any layer) or path='auto'"
        )
    why = ghost_norms_mismatch(model)
    if why is None:
        return "fast_clipping"
    if method == "auto":
        return "vectorized"
    raise ValueError(f"path='fast_clipping' (ghost norms) would not clip model {model.name!r} exactly: {why}. Use "
                     "path='vectorized' (per-example gradients, exact for any use of a weight) or path='auto'")


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



# tf.vectorized_map returns wrong per-example gradients of a broadcast matmul (a Dense layer over
# positions) on TensorFlow 2.20, and then corrupts the heap (``tests/mechanisms/dpsgd/test_clipping.py``
# checks every path against a record-by-record loop); TensorFlow 2.15 is exact. From 2.16 on the
# records are therefore taken one at a time in a graph loop (tf.map_fn): slower, exact.
_VECTORIZED_MAP_IS_EXACT = tuple(int(p) for p in tf.__version__.split(".")[:2]) < (2, 16)


def _vectorized_clipped_sum(model, loss_fn, x, y, weights, l2_norm_clip, training):
    variables = model.trainable_variables

    def one_record(record):
        xi, yi, wi = tf.nest.map_structure(lambda t: t[None], record)
        keep = tf.cast(wi, tf.float32) > 0  # (1,): a padding record is selected out, never multiplied by 0
        with tf.GradientTape() as tape:
            losses = loss_fn(yi, model(xi, training=training))
            loss = tf.reduce_sum(select_rows(keep, losses * tf.cast(wi, losses.dtype)))
        grads = [tf.where(keep[0], g, tf.zeros_like(g)) for g in gradients(tape, loss, variables)]
        sq = tf.add_n([tf.reduce_sum(tf.square(tf.cast(g, tf.float32))) for g in grads])
        factor, norm = clip_factors(sq, l2_norm_clip)
        return [g * tf.cast(factor, g.dtype) for g in grads], norm

    signature = ([tf.TensorSpec(v.shape, tf.as_dtype(v.dtype)) for v in variables], tf.TensorSpec((), tf.float32))
    clipped = None
    if _VECTORIZED_MAP_IS_EXACT:
        try:
            clipped, norms = tf.vectorized_map(one_record, (x, y, weights))
        except (TypeError, ValueError, NotImplementedError):  # no vectorized form (recurrent loops on 2.15)
            clipped = None
    if clipped is None:  # one record at a time in a graph loop: slower, exact
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
        return ghost_clipped_sum(model, loss_fn, x, y, weights, l2_norm_clip, training)
    if method == "vectorized":
        return _vectorized_clipped_sum(model, loss_fn, x, y, weights, l2_norm_clip, training)
    raise ValueError(f"method must be 'fast_clipping' or 'vectorized', got {method!r}")
