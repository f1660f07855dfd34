"""tensorflow-privacy's DP Keras models with the Poisson train step (:mod:`.poisson`, steps 3-4).

Each masked row's loss is multiplied by 0 before its gradient is taken; the per-example gradients
are clipped to C (fast gradient clipping or ``tf.vectorized_map``), summed, given Gaussian noise
``N(0, σ²C²·I)`` and divided by the **expected** batch size L (Abadi et al., Algorithm 1).
"""

from __future__ import annotations

import functools

import keras
import tensorflow as tf

from ..clipping.clipped_sums import per_example_loss
from .paths import require_tf_privacy
from .train_step import log_real_record_loss, noise_key, step_noise

__all__ = ["poisson_model_classes"]


@functools.lru_cache(maxsize=None)
def poisson_model_classes():
    """``(PoissonDPSequential, PoissonDPModel)``: tensorflow-privacy's DP Keras models, Poisson train step.

    Extra constructor arguments: ``expected_batch_size`` (the divisor L) and ``noise_seed``.
    Batches must be ``(x, y, mask)``; see the module docstring for the step.
    """
    _, _, dp_keras_model, _ = require_tf_privacy()
    from tensorflow_privacy.privacy.fast_gradient_clipping import clip_grads, common_manip_utils

    class _PoissonStep:
        def __init__(self, *args, expected_batch_size, noise_seed=None, **kwargs):
            super().__init__(*args, **kwargs)
            self._expected_batch_size = float(expected_batch_size)
            self._noise_key = noise_key(noise_seed)  # the noise of step t: (key, t), as tfdpmech's own engine

        def _summed_clipping_loss(self):
            config = self.loss.get_config()
            config["reduction"] = "none"
            per_example = self.loss.__class__.from_config(config)

            def summed(y_true, y_pred, weights):
                return tf.reduce_sum(per_example(y_true, y_pred) * tf.cast(weights, y_pred.dtype))

            return summed

        def train_step(self, data):
            x, y, mask = keras.utils.unpack_x_y_sample_weight(data)
            if mask is None:
                raise ValueError(
                    f"{type(self).__name__} trains on padded Poisson batches (x, y, mask); got batches without a "
                    "mask. Feed DPSGD.dataset(x, y) to fit (shuffled fixed-size batches are "
                    "tfdpmech.mechanisms.dpsgd.ShuffledDPSGD, with a weaker provable ε)"
                )
            if self._clipping_loss is None:
                self._make_clipping_loss()
            mask = tf.cast(mask, tf.float32)
            if self._enable_fast_peg_computation:
                # Ghost-norm clipping; the mask is the per-example weight (0 rows: zero norm, zero gradient).
                clipped_sum, y_pred, _ = clip_grads.compute_clipped_gradients_and_outputs(
                    input_model=self, l2_norm_clip=self._l2_norm_clip, layer_registry=self._layer_registry,
                    x_batch=x, y_batch=y, weight_batch=mask, num_microbatches=None,
                    clipping_loss=self._summed_clipping_loss(),
                )
            else:
                rows = tf.shape(mask)[0]
                per_example = tf.vectorized_map(
                    self._compute_per_example_grads,
                    tf.nest.map_structure(lambda z: common_manip_utils.maybe_add_microbatch_axis(z, rows),
                                          (x, y, mask)),
                )
                clipped_sum = [tf.reduce_sum(g, axis=0) for g in per_example]
                y_pred = self(x, training=True)
            std = self._l2_norm_clip * self._noise_multiplier
            noise = step_noise(self._noise_key, self.optimizer.iterations, [(tf.shape(g), g.dtype) for g in clipped_sum],
                               std)
            grads = [(g + z) / tf.cast(self._expected_batch_size, g.dtype) for g, z in zip(clipped_sum, noise)]
            if self.losses:  # data-independent regularisation terms
                with tf.GradientTape() as tape:
                    reg = tf.add_n(self.losses)
                reg_grads = tape.gradient(reg, self.trainable_variables,
                                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
                grads = [a + b for a, b in zip(grads, reg_grads)]
            log_real_record_loss(self, per_example_loss(self.loss), y, y_pred, mask)
            with tf.control_dependencies([tf.debugging.assert_all_finite(
                    tf.add_n([tf.reduce_sum(g) for g in grads]),
                    "DP-SGD: the noisy gradient is NaN or inf (a record or a padding row whose loss is not finite, "
                    "e.g. an all-masked sequence through a masked average); the step was not applied. "
                    "engine='tfdpmech' selects padding rows out")]):
                grads = [tf.identity(g) for g in grads]
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            self.compiled_metrics.update_state(y, y_pred, sample_weight=mask)
            return {m.name: m.result() for m in self.metrics}

    class PoissonDPSequential(_PoissonStep, dp_keras_model.DPSequential):
        """tensorflow-privacy ``DPSequential`` with the Poisson train step (noisy sum / expected batch)."""

    class PoissonDPModel(_PoissonStep, dp_keras_model.DPModel):
        """tensorflow-privacy ``DPModel`` with the Poisson train step (noisy sum / expected batch)."""

    return PoissonDPSequential, PoissonDPModel
