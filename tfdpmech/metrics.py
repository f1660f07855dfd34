"""Metrics that work both on labels and on the perturbed coefficient tensors."""

from __future__ import annotations

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="tfdpmech")
def taylor_accuracy(y_true, y_pred):
    """Accuracy of ``argmax(logits)`` against one-hot labels or Taylor coefficients.

    With one-hot ``y_true`` (batch, M) this is categorical accuracy. With coefficient tensors
    (batch, M, 3) the label is read as ``argmin`` of the order-1 coefficient ``1/2 - y``: on
    perturbed coefficients that is a noisy label, i.e. post-processing of the private release,
    so the metric costs no privacy and shows fit to the *private* training targets.
    """
    classes, logits = y_true.shape[1] if len(y_true.shape) > 1 else None, y_pred.shape[-1]
    if len(y_true.shape) not in (2, 3) or (classes is not None and logits is not None and classes != logits):
        raise ValueError(
            f"y_true must be one-hot labels (batch, M) or Taylor coefficients (batch, M, 3) with M = {logits} "
            f"classes like y_pred, got shape {tuple(y_true.shape)}"
        )
    if len(y_true.shape) == 3:
        labels = tf.argmin(y_true[..., 1], axis=-1)
    else:
        labels = tf.argmax(y_true, axis=-1)
    return tf.cast(tf.equal(labels, tf.argmax(y_pred, axis=-1)), tf.float32)
