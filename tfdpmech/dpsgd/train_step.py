"""tfdpmech's DP-SGD train step, installed on an ordinary Keras model (Keras 2.15 and Keras 3).

:func:`install_dp_train_step` replaces ``model.train_step`` so that ``model.fit`` runs, per batch
(Abadi et al. 2016, Algorithm 1):

1. the per-example clipped gradient sum ``Σ_i w_i clip_C(∇θ ℓ_i)`` (:mod:`.clipping`; ``w_i`` is the
   Poisson mask: 1 for a sampled record, 0 for a padding row);
2. ``+ N(0, σ²C²·I)`` drawn **once** per step from a ``tf.random.Generator`` (line "add noise");
3. ``÷ L``, a public divisor fixed in advance (the expected batch size ``q·n`` for Poisson
   sampling, the batch size for shuffled batches) — never the realised batch size, which depends
   on the data;

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

The run objects (:class:`~tfdpmech.dpsgd.DPSGD`, :class:`~tfdpmech.dpsgd.PoissonDPSGD`) wrap this
step in their guards (finite input, batch size, no step beyond the accounted ones). The model object is the user's own (weights, ``save``, ``predict`` unchanged); only its training
step differs.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from .clipping import clipped_gradient_sum, gradients, per_example_loss

__all__ = ["KERAS_3", "install_dp_train_step"]

KERAS_3 = int(keras.__version__.split(".")[0]) >= 3


def _noise_generator(seed):
    return tf.random.Generator.from_non_deterministic_state() if seed is None else tf.random.Generator.from_seed(seed)


def _on_first_replica():
    """True on replica 0 of a ``tf.distribute`` strategy (and without one): the one replica that adds the noise."""
    context = tf.distribute.get_replica_context()
    if context is None:  # cross-replica context: not a per-replica step
        return tf.constant(True)
    return tf.equal(tf.cast(context.replica_id_in_sync_group, tf.int32), 0)


def _log_loss_and_metrics(model, x, y, y_pred, sample_weight):
    """Update the compiled loss and metrics for the progress bar (they see padding rows with weight 0)."""
    if KERAS_3:
        loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
        tracker = getattr(model, "_loss_tracker", None)
        if tracker is not None:
            tracker.update_state(loss, sample_weight=tf.shape(tf.nest.flatten(x)[0])[0])
    else:
        model.compute_loss(x, y, y_pred, sample_weight)
    return model.compute_metrics(x, y, y_pred, sample_weight)


def install_dp_train_step(model, *, loss, l2_norm_clip: float, noise_multiplier: float, divisor: float,
                          clipping: str, noise_seed=None, require_mask: bool = False):
    """Make ``model.fit`` train ``model`` with DP-SGD (see the module docstring).

    Args:
        model: a compiled ``keras.Model`` (its optimizer, loss and metrics are used).
        loss: the ``keras.losses.Loss`` the model was compiled with (a per-record copy is made).
        l2_norm_clip: C. noise_multiplier: σ (0 for the noise-free cross-checks).
        divisor: the public L the noisy sum is divided by.
        clipping: ``"fast_clipping"`` or ``"vectorized"`` (see :func:`.clipping.resolve_clipping`).
        noise_seed: None (OS entropy) or an int (reproducible experiments; keep it secret).
        require_mask: batches must be ``(x, y, mask)`` (Poisson batches).
    """
    loss_fn = per_example_loss(loss)
    strategy = getattr(model, "distribute_strategy", None)
    if strategy is not None:
        with strategy.scope():  # a generator the replicas may call (each gets its own stream; only replica 0's counts)
            generator = _noise_generator(noise_seed)
    else:  # pragma: no cover - every Keras model has a strategy (the default one)
        generator = _noise_generator(noise_seed)
    std = float(l2_norm_clip) * float(noise_multiplier)

    def train_step(data):
        x, y, mask = keras.utils.unpack_x_y_sample_weight(data)
        first = tf.nest.flatten(x)[0]
        if mask is None:
            if require_mask:
                raise ValueError(
                    "Poisson DP-SGD trains on padded Poisson batches (x, y, mask); got batches without a mask. Fit "
                    "on PoissonDPSGD.dataset(x, y)"
                )
            mask = tf.ones(tf.shape(first)[:1], tf.float32)
        summed, y_pred, _ = clipped_gradient_sum(model, loss_fn, x, y, tf.cast(mask, tf.float32), l2_norm_clip,
                                                 clipping)
        first_replica = _on_first_replica()
        grads = [(g + generator.normal(tf.shape(g), stddev=std, dtype=g.dtype) * tf.cast(first_replica, g.dtype))
                 / tf.cast(divisor, g.dtype) for g in summed]
        if model.losses:  # weight regularisers (activity regularisers are refused by check_model)
            with tf.GradientTape() as tape:
                regularisation = tf.add_n(model.losses)
            # once per global step, like the noise: the optimizer sums the replicas' gradients
            grads = [g + r * tf.cast(first_replica, r.dtype)
                     for g, r in zip(grads, gradients(tape, regularisation, model.trainable_variables))]
        model.optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return _log_loss_and_metrics(model, x, y, y_pred, mask)

    model.train_step = train_step
    model.train_function = None  # a compiled train function would still run the old step
    return model
