"""Per-example clipped gradient sums for any Keras model, on Keras 2.15 and Keras 3 alike.

DP-SGD needs ``Σ_i clip_C(∇θ ℓ_i)`` with ``clip_C(g) = g · min(1, C / ‖g‖)`` (Abadi et al. 2016,
Algorithm 1). Two ways to compute it, both exact:

``"fast_clipping"`` (ghost norms, one backward pass through the network; :mod:`.ghost_norms`)
    Every layer exposes a few tensors (its taps, e.g. a Dense layer's pre-activation ``z``) in one
    forward pass; one backward pass of ``Σ_i w_i ℓ_i`` gives each record's gradient at every tap; each
    layer's rule in the layer registry (:mod:`.layer_rules`) turns those into the per-record squared
    norm of its own weights' gradient (Goodfellow 2015; Li et al. 2022; Rochette et al. 2019 for
    convolutions), and with ``c_i = min(1, C/‖∇θ ℓ_i‖)`` each layer's clipped sum is its local weight
    gradient from the output gradients ``c_i g_i`` (Bu et al. 2023 "book-keeping"). A layer with no
    rule is handled alone: its own weights' per-record gradients (:mod:`.layer_rules.alone`).
``"vectorized"``
    Per-example gradients of single-record losses (``tf.vectorized_map`` on TensorFlow 2.15 where
    the model has a vectorized form, else a graph loop; always the loop from 2.16 on: see
    :data:`_VECTORIZED_MAP_IS_EXACT`), each clipped and summed. Any layer that does not mix records;
    memory grows with batch × parameters.

Records are weighted by ``w_i`` in {0, 1} (Poisson batches pad with ``w_i = 0`` rows). A row with
``w_i = 0`` is selected out (its loss, input and gradient replaced by 0, never multiplied by 0), so it
contributes exactly 0 even when its forward pass gives NaN (an all-padding sequence through a masked
average). The ghost norms are in :mod:`.ghost_norms`.

Which method a model gets (:func:`resolve_clipping`): ghost norms when every trainable unit has a rule
(:mod:`.layer_rules`: its registered rule, or handled alone) **and** the ghost norms of a probe batch equal
a record-by-record loop of gradient tapes, unit by unit (:mod:`.ghost_probe`; a unit whose rule does not
match is handled alone). The probe sees what no list of layers shows: a variable read outside its own
layer (tied weights, e.g. an output projection reading an Embedding's table), a layer called twice inside
a container. ``"auto"`` then takes ``"vectorized"`` (exact for those); ``"fast_clipping"`` is refused,
naming the cause, before any release.
"""


from __future__ import annotations

import keras
import tensorflow as tf

from .ghost_norms import (
    GHOST_LAYERS,
    clip_factors,
    ghost_clipped_sum,
    ghost_unsupported_layers,
    gradients,
    select_rows,
)
from .ghost_probe import ghost_norms_mismatch

__all__ = ["CLIPPING_METHODS", "GHOST_LAYERS", "clipped_gradient_sum", "ghost_unsupported_layers", "gradients",
           "per_example_loss", "keras_reduction", "resolve_clipping", "ghost_norms_mismatch"]

CLIPPING_METHODS = ("auto", "fast_clipping", "vectorized")


# --------------------------------------------------------------------------------------------
# Which method a model gets
# --------------------------------------------------------------------------------------------
def resolve_clipping(model, method: str, group_size: int = 1) -> str:
    """``"fast_clipping"`` or ``"vectorized"`` for ``method`` in :data:`CLIPPING_METHODS`.

    ``"auto"`` takes ghost norms when every trainable unit has a rule (its registered one, or the alone
    rule) and :func:`ghost_norms_mismatch` finds them exact on a probe batch (a unit whose registered rule
    does not match is handled alone), else ``"vectorized"``; ``group_size`` k > 1: for clipping units of k rows.

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
            f"path='fast_clipping' (ghost norms) handles the layers of the registry ({', '.join(GHOST_LAYERS)}) and "
            f"alone any other layer that draws no random numbers; model {model.name!r} also trains "
            f"{', '.join(unsupported)}. Use path='vectorized' (per-example gradients, any layer) or path='auto'"
        )
    why = ghost_norms_mismatch(model, group_size=group_size)
    if why is None:
        return "fast_clipping"
    if method == "auto":
        return "vectorized"
    raise ValueError(f"path='fast_clipping' (ghost norms) would not clip model {model.name!r} exactly: {why}. Use "
                     "path='vectorized' (per-example gradients, exact for any use of a weight) or path='auto'")


# --------------------------------------------------------------------------------------------
# The per-example loss
# --------------------------------------------------------------------------------------------
def keras_reduction(loss) -> str:
    """How the DP step reduces a record's per-position losses, from ``loss``'s Keras reduction: ``"sum"``,
    ``"mean_with_sample_weight"``, or ``"sum_over_batch_size"`` (Keras's default; ``"mean"``, ``"auto"``, ``"none"``
    and None are taken as it: a per-record loss cannot be left unreduced)."""
    reduction = loss.get_config().get("reduction", "sum_over_batch_size") if isinstance(loss, keras.losses.Loss) else None
    return reduction if reduction in ("sum", "mean_with_sample_weight") else "sum_over_batch_size"


def per_example_loss(loss):
    """``(y_true, y_pred, sample_weight=None) -> (B,)``: each record's loss, its share of the Keras loss.

    A loss with one value per record is that value. A loss with one value per position (next-token
    prediction: ``(B, T)``), weighted by a per-position ``sample_weight`` (keras-hub's padding mask), is
    reduced per record as ``loss``'s reduction reduces the batch, the batch's size taken as the run's divisor
    L (:mod:`tfdpmech.mechanisms.dpsgd.runs.train_step`), so that with clipping off and no noise the DP step's
    update is Keras's own:

    * ``"sum_over_batch_size"`` (Keras's default): Keras divides ``Σ_{i,t} w_it ℓ_it`` by the values' count
      B·T; record i's loss is ``Σ_t w_it ℓ_it / T``, and the step divides the batch's sum by L;
    * ``"sum"``: record i's loss is ``Σ_t w_it ℓ_it``, and the step divides by 1, as Keras does not divide;
    * ``"mean_with_sample_weight"``: Keras divides by the batch's total weight ``Σ_{i,t} w_it``, which depends
      on every record of the batch (one record could then move the others' clipped gradients: no bound of C per
      record); record i's loss is its own weighted mean ``Σ_t w_it ℓ_it / Σ_t w_it`` (0 for a record without
      weight), divided by L: Keras's update when every record of the batch has the same total weight.

    A position of weight 0 (padding) never contributes: its loss is selected out, never multiplied by 0.
    """
    if not isinstance(loss, keras.losses.Loss):
        raise TypeError(
            "loss must be a keras.losses.Loss instance such as keras.losses.CategoricalCrossentropy(from_logits=True), "
            f"got {type(loss).__name__}"
        )
    reduction = keras_reduction(loss)
    config = loss.get_config()
    config["reduction"] = "none"
    per_record = loss.__class__.from_config(config)

    def fn(y_true, y_pred, sample_weight=None):
        values = per_record(y_true, y_pred)
        weights = None
        if sample_weight is not None:
            weights = tf.broadcast_to(tf.cast(sample_weight, values.dtype), tf.shape(values))
            values = tf.where(weights > 0, values * weights, tf.zeros_like(values))  # padding selected out
        rank = values.shape.rank
        if rank is None or rank <= 1:
            return values
        values = tf.reshape(values, (tf.shape(values)[0], -1))  # one row of per-position losses per record
        summed = tf.reduce_sum(values, axis=1)
        if reduction == "sum":
            return summed
        if reduction == "mean_with_sample_weight":
            total = (tf.cast(tf.shape(values)[1], values.dtype) if weights is None
                     else tf.reduce_sum(tf.reshape(weights, tf.shape(values)), axis=1))
            return tf.math.divide_no_nan(summed, total)
        return summed / tf.cast(tf.shape(values)[1], values.dtype)

    fn.reduction = reduction
    return fn


# tf.vectorized_map returns wrong per-example gradients of a broadcast matmul (a Dense layer over
# positions) on TensorFlow 2.20, and then corrupts the heap (``tests/mechanisms/dpsgd/test_clipping.py``
# checks every path against a record-by-record loop); TensorFlow 2.15 is exact. From 2.16 on the
# records are therefore taken one at a time in a graph loop (tf.map_fn): slower, exact.
_VECTORIZED_MAP_IS_EXACT = tuple(int(p) for p in tf.__version__.split(".")[:2]) < (2, 16)


def _vectorized_clipped_sum(model, loss_fn, x, y, weights, l2_norm_clip, training, group_size=1):
    variables = model.trainable_variables
    k = int(group_size)

    def one_record(record):  # one clipping unit: a record (k = 1), or a group of k rows
        xi, yi, wi = tf.nest.map_structure(lambda t: t[None], record) if k == 1 else record
        keep = tf.cast(wi, tf.float32) > 0  # (k,): a padding row is selected out, never multiplied by 0
        with tf.GradientTape() as tape:
            losses = loss_fn(yi, model(xi, training=training))
            loss = tf.reduce_sum(select_rows(keep, losses * tf.cast(wi, losses.dtype)))
        grads = [tf.where(tf.reduce_any(keep), g, tf.zeros_like(g)) for g in gradients(tape, loss, variables)]
        sq = tf.add_n([tf.reduce_sum(tf.square(tf.cast(g, tf.float32))) for g in grads])
        factor, norm = clip_factors(sq, l2_norm_clip)
        return [g * tf.cast(factor, g.dtype) for g in grads], norm

    signature = ([tf.TensorSpec(v.shape, tf.as_dtype(v.dtype)) for v in variables], tf.TensorSpec((), tf.float32))
    units = (x, y, weights) if k == 1 else tf.nest.map_structure(
        lambda t: tf.reshape(t, tf.concat([[-1, k], tf.shape(t)[1:]], 0)), (x, y, weights))
    clipped = None
    if _VECTORIZED_MAP_IS_EXACT:
        try:
            clipped, norms = tf.vectorized_map(one_record, units)
        except (TypeError, ValueError, NotImplementedError):  # no vectorized form (recurrent loops on 2.15)
            clipped = None
    if clipped is None:  # one unit at a time in a graph loop: slower, exact
        clipped, norms = tf.map_fn(one_record, units, fn_output_signature=signature)
    y_pred = model(x, training=training)
    return [tf.reduce_sum(g, axis=0) for g in clipped], y_pred, (norms if k == 1 else tf.repeat(norms, k))


def clipped_gradient_sum(model, loss_fn, x, y, weights, l2_norm_clip: float, method: str, *, training=True,
                         group_size: int = 1):
    """``(Σ_i w_i clip_C(∇θ ℓ_i), y_pred, ‖∇θ ℓ_i‖)`` for one batch (``group_size`` k > 1: every k consecutive
    rows one clipping unit, ``Σ_g clip_C(Σ_{i∈g} w_i ∇θ ℓ_i)``, each row's norm its group's).

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
        return ghost_clipped_sum(model, loss_fn, x, y, weights, l2_norm_clip, training, group_size=group_size)
    if method == "vectorized":
        return _vectorized_clipped_sum(model, loss_fn, x, y, weights, l2_norm_clip, training, group_size)
    raise ValueError(f"method must be 'fast_clipping' or 'vectorized', got {method!r}")
