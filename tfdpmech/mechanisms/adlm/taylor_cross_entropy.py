"""Second-order Taylor expansion of per-class sigmoid cross-entropy (AdLM §III-C)."""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from ...validation import check_one_hot, check_positive_int

__all__ = ["TaylorCrossEntropy", "taylor_coefficients", "loss_sensitivity", "LOG2", "PHI2"]

LOG2 = math.log(2.0)  # order-0 coefficient, App. D
PHI2 = 1.0 / 8.0  # order-2 coefficient f''(0)/2! summed over q, Eq. 25


def taylor_coefficients(y) -> np.ndarray:
    """Noise-free coefficients ``(log 2, 1/2 - y, 1/8)`` of Eq. 25 for one-hot labels.

    Args:
        y: one-hot labels, shape (n, M).

    Returns:
        float32 array of shape (n, M, 3): orders 0, 1, 2 along the last axis.

    Raises:
        ValueError: ``y`` is not one-hot.
    """
    y = check_one_hot(y, "y")
    out = np.empty(y.shape + (3,), dtype=np.float32)
    out[..., 0] = LOG2
    out[..., 1] = 0.5 - y
    out[..., 2] = PHI2
    return out


def loss_sensitivity(num_classes: int, last_hidden_units: int) -> float:
    """``Δ_F = M(|h_(k)| + |h_(k)|²/4)`` (AdLM Lemma 5); needs the last hidden layer in [0, 1]."""
    m = check_positive_int(num_classes, "num_classes", minimum=2)
    h = check_positive_int(last_hidden_units, "last_hidden_units")
    return float(m * (h + h * h / 4.0))


@keras.saving.register_keras_serializable(package="tfdpmech")
class TaylorCrossEntropy(keras.losses.Loss):
    """Per-class sigmoid cross-entropy replaced by its order-2 Taylor polynomial at z = 0.

    Per example, ``sum_l phi0_l + phi1_l * z_l + phi2_l * z_l²`` (AdLM Eq. 25 and the corrected
    line 27), summed over the M classes and averaged over the batch (line 29). ``y_pred`` are the
    logits ``z`` of an output ``Dense(M, use_bias=False)``; predict with ``argmax(z)``.

    ``y_true`` is either

    * the (perturbed) coefficient tensor of shape ``(batch, M, 3)`` produced once by the
      mechanism (orders 0, 1, 2 along the last axis), or
    * one-hot labels ``(batch, M)``, turned into the noise-free coefficients
      ``(log 2, 1/2 - y, 1/8)``; this is the same code path with the noise off, used for
      evaluation and the non-private baseline.

    With noise-free coefficients the loss equals ``sum_l (z_l - (4y_l - 2))²/8 + M(log 2 - 1/2)``.

    Args:
        batch_size: the batch size the coefficient noise was calibrated for. Training on
            coefficient tensors refuses any other batch size and any input pipeline that may yield
            a partial last batch (build it with ``drop_remainder=True``). Coefficient tensors need
            it (or ``any_batch_size=True``): a perturbed batch trained at another size spends more
            ε than recorded.
        any_batch_size: True for coefficients whose privacy does not depend on the batch (released
            once for the whole data set, e.g. :meth:`~tfdpmech.mechanisms.functional_head.FunctionalHead.pseudo_records`,
            or noise-free); excludes ``batch_size``. One-hot labels never need either.
        name: loss name.

    Raises:
        ValueError: both ``batch_size`` and ``any_batch_size``; (at trace time, before any step)
            coefficient tensors with neither, a batch size other than ``batch_size`` or a possible
            partial batch, or a ``y_true`` whose shape does not match the logits.
    """

    def __init__(self, batch_size: int | None = None, name: str = "taylor_cross_entropy", *,
                 any_batch_size: bool = False, **kwargs):
        super().__init__(name=name, **kwargs)
        self.batch_size = None if batch_size is None else check_positive_int(batch_size, "batch_size")
        if not isinstance(any_batch_size, bool):
            raise TypeError(f"any_batch_size must be True or False, got {any_batch_size!r}")
        if any_batch_size and self.batch_size is not None:
            raise ValueError("pass batch_size (perturbed per batch) or any_batch_size=True (released once), not both")
        self.any_batch_size = any_batch_size

    def _check_batch(self, y_true):
        if self.any_batch_size:
            return
        if self.batch_size is None:
            raise ValueError(
                "TaylorCrossEntropy got coefficient tensors (batch, M, 3) but no batch_size: pass "
                "TaylorCrossEntropy(batch_size=B) with the batch size the perturbed coefficients were calibrated "
                "for (AdLM.loss() does), or any_batch_size=True for coefficients released once for the whole "
                "data set (FunctionalHead.pseudo_records) or noise-free"
            )
        static = y_true.shape[0]
        if static is None:
            raise ValueError(
                "TaylorCrossEntropy: the input pipeline may yield a partial last batch, but the noise was "
                f"calibrated for batch_size={self.batch_size}; batch the data with drop_remainder=True "
                "(e.g. PrivateData.to_dataset())"
            )
        if int(static) != self.batch_size:
            raise ValueError(
                f"TaylorCrossEntropy: got a batch of {int(static)} records, but the noise was calibrated for "
                f"batch_size={self.batch_size}; train with exactly that batch size and drop_remainder=True"
            )

    def call(self, y_true, y_pred):
        z = tf.convert_to_tensor(y_pred)
        y_true = tf.cast(y_true, z.dtype)
        if len(y_true.shape) == 2:
            phi0 = tf.constant(LOG2, z.dtype)
            phi1 = 0.5 - y_true
            phi2 = tf.constant(PHI2, z.dtype)
        elif len(y_true.shape) == 3:
            self._check_batch(y_true)
            phi0, phi1, phi2 = y_true[..., 0], y_true[..., 1], y_true[..., 2]
        else:
            raise ValueError(
                f"y_true must be one-hot labels (batch, M) or coefficients (batch, M, 3), got shape {y_true.shape}"
            )
        if y_true.shape[1] is not None and z.shape[-1] is not None and y_true.shape[1] != z.shape[-1]:
            raise ValueError(f"y_true has {y_true.shape[1]} classes but the model outputs {z.shape[-1]} logits")
        return tf.reduce_sum(phi0 + phi1 * z + phi2 * tf.square(z), axis=-1)  # Eq. 25, summed over l

    def get_config(self):
        config = super().get_config()
        config.update(batch_size=self.batch_size, any_batch_size=self.any_batch_size)
        return config
