"""The convexified (risk-averting) cross-entropy of Lu et al. (Eq. 22).

Lu, Asghar, Kaafar, Webb, Dickinson, "A Differentially Private Framework for Deep Learning with
Convexified Loss Functions", §4.4 (Theorem 5, Eqs. 22–23). Theorem 5 calls the risk-averting error
convex; the works it cites show convexity only in regions that grow with α (see
``docs/mechanisms/output_perturbation.md``).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from ...validation import check_choice, check_positive_real

__all__ = ["ConvexifiedCrossEntropy", "LOSS_MODES"]

LOSS_MODES = ("per_sample", "reference_elementwise")


def _check_alpha(alpha) -> float:
    return check_positive_real(alpha, "alpha", hint="the paper uses alpha in (0, 10], e.g. 1")


@keras.saving.register_keras_serializable(package="tfdpmech")
class ConvexifiedCrossEntropy(keras.losses.Loss):
    """Risk-averting cross-entropy ``L^(α) = (1/α)·ln[(1/B)·Σ_i exp(α·l_i)]`` (Lu et al. Eq. 22).

    ``l_i = −log p_{i,y_i}`` is the per-example cross-entropy. The value is computed stably as
    ``(logsumexp(α·l) − ln B)/α`` with ``l`` from ``log_softmax``, so it stays finite for any α·l.
    α → 0 recovers the mean cross-entropy, large α approaches the maximum loss. The paper defines
    the loss over the whole training set (Eq. 22); evaluated per minibatch it is a biased estimate.

    The L2 term of Eq. 23 is not part of this loss: put ``kernel_regularizer=keras.regularizers.L2(c)``
    on every Dense layer (the sensitivity bounds read it from there).

    Keras reduces a per-example loss vector; this loss returns ``val`` broadcast to shape (B,), so
    the default ``"sum_over_batch_size"`` reduction yields exactly ``val``. ``sample_weight`` has no
    meaning for that form and is refused.

    Args:
        alpha: risk factor α > 0 (Table 4: 1 for most datasets, 5 for Purchase-10..100).
        from_logits: ``y_pred`` are logits (default). With False, ``y_pred`` are probabilities
            (clipped away from 0 before the log).
        sparse: integer labels (True), one-hot labels (False), or None to infer from the rank of
            ``y_true`` (rank of ``y_pred`` → one-hot).
        mode: ``"per_sample"`` (Eq. 22, default) or ``"reference_elementwise"``, the authors'
            code ``(1/α)·ln mean_{B×C} exp(−α·y⊙log p)`` = ``(1/α)·ln(((C−1) + mean p_y^{−α})/C)``,
            for parity experiments only (it differs from Eq. 22 by constants inside the log).
        name: loss name.

    Raises:
        ValueError / TypeError: α ≤ 0, unknown ``mode``, or a ``sample_weight`` passed at call time.
    """

    def __init__(self, alpha: float = 1.0, from_logits: bool = True, sparse: bool | None = None,
                 mode: str = "per_sample", name: str = "convexified_cross_entropy", **kwargs):
        kwargs.pop("reduction", None)  # the broadcast form only works with the default reduction
        super().__init__(name=name, **kwargs)
        self.alpha = _check_alpha(alpha)
        self.from_logits = bool(from_logits)
        self.sparse = None if sparse is None else bool(sparse)
        self.mode = check_choice(mode, "mode", LOSS_MODES)

    def __call__(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            raise ValueError(
                "ConvexifiedCrossEntropy does not take sample_weight (or class_weight): the risk-averting "
                "loss couples the whole batch; drop the weights or resample the data instead"
            )
        return super().__call__(y_true, y_pred)

    def _log_probs(self, y_pred):
        y_pred = tf.convert_to_tensor(y_pred)
        if not y_pred.dtype.is_floating:
            y_pred = tf.cast(y_pred, tf.float32)
        if self.from_logits:
            return tf.nn.log_softmax(y_pred, axis=-1)
        eps = tf.constant(1e-7, y_pred.dtype)
        return tf.math.log(tf.clip_by_value(y_pred, eps, 1.0))

    def call(self, y_true, y_pred):
        logp = self._log_probs(y_pred)
        num_classes = tf.shape(logp)[-1]
        sparse = self.sparse
        if sparse is None:
            sparse = len(y_true.shape) != len(logp.shape) or (y_true.shape[-1] == 1 and logp.shape[-1] != 1)
        if sparse:
            labels = tf.cast(tf.reshape(y_true, [-1]), tf.int32)
            y = tf.one_hot(labels, num_classes, dtype=logp.dtype)
        else:
            y = tf.cast(y_true, logp.dtype)
        batch = tf.cast(tf.shape(logp)[0], logp.dtype)
        alpha = tf.constant(self.alpha, logp.dtype)
        if self.mode == "per_sample":
            ce = -tf.reduce_sum(y * logp, axis=-1)  # l_i
            val = (tf.reduce_logsumexp(alpha * ce) - tf.math.log(batch)) / alpha  # Eq. 22, stable form
            return tf.ones_like(ce) * val
        elementwise = tf.reshape(-alpha * y * logp, [-1])  # authors' code: mean over B·C entries
        count = tf.cast(tf.size(elementwise), logp.dtype)
        val = (tf.reduce_logsumexp(elementwise) - tf.math.log(count)) / alpha
        return tf.ones_like(logp[:, 0]) * val

    def get_config(self):
        config = super().get_config()
        config.pop("reduction", None)
        config.update(alpha=self.alpha, from_logits=self.from_logits, sparse=self.sparse, mode=self.mode)
        return config
