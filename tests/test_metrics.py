"""taylor_accuracy: accuracy from one-hot labels or from (perturbed) Taylor coefficients."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfdpmech.losses import taylor_coefficients
from tfdpmech.metrics import taylor_accuracy


def _np(t):
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


# ------------------------------------------------------------------------------------------------
# taylor_accuracy
# ------------------------------------------------------------------------------------------------


def test_taylor_accuracy_on_one_hot():
    y = np.eye(3, dtype=np.float32)[[0, 2, 1, 1]]
    z = np.array([[3, 1, 2], [0, -1, 5], [0, 1, 2], [-1, 0, -2]], dtype=np.float32)
    acc = _np(taylor_accuracy(tf.constant(y), tf.constant(z)))
    np.testing.assert_array_equal(acc, [1.0, 1.0, 0.0, 1.0])
    assert acc.dtype == np.float32


def test_taylor_accuracy_on_coefficients():
    y = np.eye(3, dtype=np.float32)[[0, 2, 1, 1]]
    z = np.array([[3, 1, 2], [0, -1, 5], [0, 1, 2], [-1, 0, -2]], dtype=np.float32)
    phi = taylor_coefficients(y)
    np.testing.assert_array_equal(_np(taylor_accuracy(tf.constant(phi), tf.constant(z))), [1.0, 1.0, 0.0, 1.0])
    # perturbed coefficients: the label is argmin of the order-1 coefficient (a noisy label)
    noisy = phi.copy()
    noisy[2, :, 1] = [0.9, 0.4, -0.7]  # now class 2 looks like the label of example 2
    noisy[0, :, 0] = 100.0  # orders 0 and 2 do not matter
    noisy[0, :, 2] = -100.0
    np.testing.assert_array_equal(_np(taylor_accuracy(tf.constant(noisy), tf.constant(z))), [1.0, 1.0, 1.0, 1.0])
