"""tfdpmech's DP-SGD train step, installed on an ordinary Keras model (Keras 2.15 and Keras 3).

:func:`install_dp_train_step` replaces ``model.train_step`` so that ``model.fit`` runs, per batch
(Abadi et al. 2016, Algorithm 1):

1. the per-example clipped gradient sum ``Σ_i w_i clip_C(∇θ ℓ_i)``
   (:mod:`tfdpmech.mechanisms.dpsgd.clipping.clipped_sums`; ``w_i`` is the Poisson mask: 1 for a sampled record, 0
   for a padding row);
2. ``+ N(0, σ²C²·I)`` drawn **once** per step (line "add noise"), from a secret noise key and the
   global step (the optimizer's step count): a second ``fit`` continues the noise stream, it never
   draws a step's noise again;
3. ``÷ L``, a public divisor fixed in advance (the expected batch size ``q·n`` for Poisson
   sampling, the batch size for shuffled batches; 1 for a loss reduced by ``"sum"``, as Keras) — never
   the realised batch size, which depends on the data;

Under ``tf.distribute.MirroredStrategy`` and ``MultiWorkerMirroredStrategy`` (several workers:
:mod:`.multiworker`) each replica computes step 1 on its slice of the global batch, and only replica 0
(``replica_id_in_sync_group == 0``, which numbers the replicas of every worker) adds the noise; every
replica divides by the **global** L. The Keras optimizers of both stacks then all-reduce the gradients with
``ReduceOp.SUM`` (Keras 2.15 ``Optimizer.aggregate_gradients`` → ``all_reduce_sum_gradients``; Keras 3
``TFOptimizer._all_reduce_sum_gradients``; the replica scaling of Keras 3's
``scale_loss_for_distribution`` touches the logged loss only, never these gradients), so the update is
exactly ``(Σ_all replicas clipped + one N(0, σ²C²I) draw) / L``: the same as on one device. Noise added
on every replica and averaged would divide its standard deviation by √replicas; that cannot happen here.
4. plus the gradient of the model's weight regularisers (data-independent), then one step of the
   compiled Keras optimizer.

A step whose sampled record has a non-finite gradient is refused before the update (padding rows
never do: they are selected out, :mod:`tfdpmech.mechanisms.dpsgd.clipping.clipped_sums`). The logged ``loss`` is the
mean loss over the batch's real records (padding rows excluded), plus the weight regularisers, as ``model.fit`` logs it
without DP.

The run objects (:class:`~tfdpmech.mechanisms.dpsgd.ShuffledDPSGD`, :class:`~tfdpmech.mechanisms.dpsgd.DPSGD`) wrap this
step in their guards (:mod:`.guards`). The model object is the user's own (weights, ``save``,
``predict`` unchanged); only its training step differs.
"""

from __future__ import annotations

import secrets

import keras
import tensorflow as tf

from ..clipping.chunked_clipping import chunked_clipped_gradient_sum
from ..clipping.clipped_sums import gradients, per_example_loss
from ..clipping.ghost_norms import select_rows
from ..sampling.position_weights import position_weighted_loss, split_position_weights
from .run_state import dp_step, inner_optimizer

__all__ = ["KERAS_3", "install_dp_train_step", "noise_key", "step_divisor", "step_noise", "log_real_record_loss", "check_finite_norms",
           "build_optimizer"]

KERAS_3 = int(keras.__version__.split(".")[0]) >= 3


def noise_key(seed=None):
    """The secret noise key (two int64 words) from an int seed, or from OS entropy for None."""
    if seed is None:
        return (secrets.randbits(63), secrets.randbits(63))
    return (int(seed) % (1 << 63), 0x5EED)


def build_optimizer(model) -> None:
    """Create the variables of ``model``'s optimizer (its moments, its step count) now, if they are not yet.

    Keras creates them inside the first trace of the train function when no ``tf.distribute`` strategy is set; a
    ``tf.function`` whose first trace creates variables is traced a second time (the variables then exist), so the
    whole DP step (the model's forward and backward passes, every layer's norm) would be traced twice before the
    first step. The variables and their initial values are the same either way. A model not built yet (a subclassed
    model before its first call) has no variables to build them for: Keras then builds them in the trace."""
    optimizer = model.optimizer
    if not hasattr(optimizer, "build") or getattr(optimizer, "built", getattr(optimizer, "_built", False)):
        return  # none, a Keras 2 legacy optimizer (no build), or built
    if model.built and model.trainable_variables:
        optimizer.build(model.trainable_variables)


def step_divisor(reduction: str, expected_batch_size: float) -> float:
    """The public divisor of the noisy sum: the expected batch size L, or 1 for a loss reduced by ``"sum"`` (Keras
    does not divide that loss by the batch; :func:`~tfdpmech.mechanisms.dpsgd.clipping.clipped_sums.per_example_loss`)."""
    return 1.0 if reduction == "sum" else float(expected_batch_size)


def step_noise(key, step, shapes_and_dtypes, std: float):
    """``N(0, std²·I)`` for every shape, a pure function of the secret ``key``, the global ``step`` and the
    variable's position (one independent draw per variable and step)."""
    base = tf.random.experimental.stateless_fold_in(tf.constant(key, tf.int64), tf.cast(step, tf.int64))
    return [tf.random.stateless_normal(shape, seed=tf.random.experimental.stateless_fold_in(base, i), stddev=std,
                                       dtype=dtype)
            for i, (shape, dtype) in enumerate(shapes_and_dtypes)]


def check_finite_norms(norms, weights):
    """An assertion that every sampled record (weight > 0) has a finite gradient norm."""
    return tf.debugging.assert_all_finite(
        select_rows(tf.cast(weights, tf.float32) > 0, tf.cast(norms, tf.float32)),
        message=("DP-SGD: the gradient of a sampled record is NaN or inf, so the step was not applied (for instance "
                 "a record whose every position is masked, Embedding(mask_zero=True), reaching a masked average: "
                 "0/0). Give every record a finite loss, e.g. at least one unmasked position"))


def log_real_record_loss(model, loss_fn, y, y_pred, weights) -> None:
    """Update the logged ``loss``: the mean per-record loss over the real records (weight > 0), plus the
    weight regularisers, weighted by the number of real records (an epoch's value is the mean over its
    records). Padding rows are selected out, never multiplied by 0."""
    keep = tf.cast(weights, tf.float32) > 0
    count = tf.reduce_sum(tf.cast(keep, tf.float32))
    losses = tf.cast(loss_fn(y, y_pred), tf.float32)
    value = tf.reduce_sum(select_rows(keep, losses)) / tf.maximum(count, 1.0)
    if model.losses:
        value += tf.cast(tf.add_n(model.losses), tf.float32)
    if KERAS_3:
        tracker = getattr(model, "_loss_tracker", None)
    else:
        container = model.compiled_loss
        if not container._built:  # pylint: disable=protected-access  (built on first use, as Keras's own step)
            container.build(y_pred)
        tracker = container._total_loss_mean  # pylint: disable=protected-access
    if tracker is not None:
        tracker.update_state(value, sample_weight=count)


def _on_first_replica():
    """True on replica 0 of a ``tf.distribute`` strategy (and without one): the one replica that adds the noise."""
    context = tf.distribute.get_replica_context()
    if context is None:  # cross-replica context: not a per-replica step
        return tf.constant(True)
    return tf.equal(tf.cast(context.replica_id_in_sync_group, tf.int32), 0)


def _log_loss_and_metrics(model, loss_fn, x, y, y_pred, weights):
    """The logged loss (:func:`log_real_record_loss`) and the compiled metrics (padding rows weighted 0, their
    outputs selected out; labels with per-position weights: the metrics weighted by position, as Keras's)."""
    log_real_record_loss(model, loss_fn, y, y_pred, weights)
    keep = tf.cast(weights, tf.float32) > 0
    y_pred = tf.nest.map_structure(lambda t: select_rows(keep, t), y_pred)
    targets, positions = split_position_weights(y)
    if positions is not None:
        positions = tf.cast(positions, tf.float32)
        weights = positions * tf.reshape(tf.cast(weights, tf.float32), [-1] + [1] * (positions.shape.rank - 1))
    return model.compute_metrics(x, targets, y_pred, weights)


def install_dp_train_step(model, *, loss, l2_norm_clip: float, noise_multiplier: float, divisor: float,
                          clipping: str, noise_seed=None, require_mask: bool = False, physical_batch_size=None,
                          group_size: int = 1, correlated=None):
    """Make ``model.fit`` train ``model`` with DP-SGD (see the module docstring).

    Args:
        model: a compiled ``keras.Model`` (its optimizer, loss and metrics are used).
        loss: the per-record loss ``(y_true, y_pred[, per-position weights]) -> (B,)``
            (:func:`tfdpmech.mechanisms.dpsgd.clipping.output_losses.per_record_loss`), or the ``keras.losses.Loss`` the
            model was compiled with (a per-record copy is made).
        l2_norm_clip: C. noise_multiplier: σ (0 for the noise-free cross-checks).
        divisor: the public L the noisy sum is divided by.
        clipping: ``"fast_clipping"`` or ``"vectorized"`` (see
            :func:`tfdpmech.mechanisms.dpsgd.clipping.clipped_sums.resolve_clipping`).
        noise_seed: None (OS entropy) or an int (reproducible experiments; keep it secret): the noise key,
            with the optimizer's step count the noise of each step (:func:`step_noise`).
        require_mask: batches must be ``(x, y, mask)`` (Poisson batches).
        physical_batch_size: None, or the most records clipped at once
            (:mod:`tfdpmech.mechanisms.dpsgd.clipping.chunked_clipping`).
        group_size: k: every k consecutive rows are one clipping unit (a record's views;
            :mod:`tfdpmech.mechanisms.dpsgd.sampling.augmentation`).
        correlated: None (independent noise: DP-SGD), or a
            :class:`~tfdpmech.mechanisms.dpsgd.noise.correlated_noise.BandedNoise` (BandMF): the step's draw, with
            deviation ``σ·C·sens(C)``, goes through the strategy's inverse with the optimizer's noise buffer.

    Under ``mixed_float16`` Keras wraps the optimizer in a ``LossScaleOptimizer``, which divides the
    gradients it is given by its loss scale; the DP step scales its own backward pass instead
    (:mod:`tfdpmech.mechanisms.dpsgd.clipping.ghost_norms`: norms, clipped sums and noise in float32) and applies the
    unscaled noisy gradient to the wrapped optimizer.
    """
    loss_fn = position_weighted_loss(per_example_loss(loss) if isinstance(loss, keras.losses.Loss) else loss)
    key = noise_key(noise_seed)
    std = float(l2_norm_clip) * float(noise_multiplier)

    def train_step(data):
        x, y, mask = keras.utils.unpack_x_y_sample_weight(data)
        first = tf.nest.flatten(x)[0]
        if mask is None:
            if require_mask:
                raise ValueError(
                    "Poisson DP-SGD trains on padded Poisson batches (x, y, mask); got batches without a mask. Fit "
                    "on DPSGD.dataset(x, y)"
                )
            mask = tf.ones(tf.shape(first)[:1], tf.float32)
        mask = tf.cast(mask, tf.float32)
        summed, y_pred, norms = chunked_clipped_gradient_sum(model, loss_fn, x, y, mask, l2_norm_clip, clipping,
                                                             physical_batch_size, group_size=group_size)
        first_replica = _on_first_replica()
        step = model.optimizer.iterations
        buffer_updates = []
        if correlated is None:
            noise = step_noise(key, step, [(tf.shape(g), g.dtype) for g in summed], std)
        else:
            noise = step_noise(key, step, [(tf.shape(g), g.dtype) for g in summed], std * correlated.sensitivity)
            noise, buffer_updates = correlated(inner_optimizer(model.optimizer), model.trainable_variables, noise,
                                               step)
        grads = [(g + z * tf.cast(first_replica, g.dtype)) / tf.cast(divisor, g.dtype) for g, z in zip(summed, noise)]
        if model.losses:  # weight regularisers (activity regularisers are refused by check_model)
            with tf.GradientTape() as tape:
                regularisation = tf.add_n(model.losses)
            # once per global step, like the noise: the optimizer sums the replicas' gradients
            grads = [g + r * tf.cast(first_replica, r.dtype)
                     for g, r in zip(grads, gradients(tape, regularisation, model.trainable_variables))]
        with tf.control_dependencies([check_finite_norms(norms, mask)]):
            grads = [tf.identity(g) for g in grads]
        # the update, the optimizer's step count among it, waits for the whole step: a step that fails (an id outside
        # an embedding's table) changes nothing, so the run stays at its step and a corrected fit takes it again
        with tf.control_dependencies(grads), dp_step():  # the optimizer of a make_private model applies only here
            inner_optimizer(model.optimizer).apply_gradients(zip(grads, model.trainable_variables))
            if correlated is not None:  # the noise buffer moves with the update, never without it
                correlated.assign(buffer_updates)
        return _log_loss_and_metrics(model, loss_fn, x, y, y_pred, mask)

    model.train_step = train_step
    model.train_function = None  # a compiled train function would still run the old step

    def make_dp_train_function(*args, **kwargs):  # fit calls it before the first trace
        build_optimizer(model)
        return type(model).make_train_function(model, *args, **kwargs)

    model.make_train_function = make_dp_train_function
    return model
