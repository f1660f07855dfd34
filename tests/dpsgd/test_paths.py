"""Tests for tfdpmech.dpsgd.paths: the training-path choice and the model checks.

Needs tensorflow-privacy (TensorFlow 2.15 stack); skipped with a reason elsewhere.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.dpsgd
pytest.importorskip(
    "tensorflow_privacy",
    reason="tensorflow-privacy is not installed or does not import (it needs TensorFlow 2.15 / Keras 2)",
)

import keras  # noqa: E402
from tensorflow_privacy.privacy.optimizers import dp_optimizer_keras  # noqa: E402

from tfdpmech import models  # noqa: E402
from tfdpmech.dpsgd import DPSGD, fast_clipping_layers, supports_fast_clipping  # noqa: E402

N, BATCH, DELTA = 300, 50, 1e-3


@pytest.fixture(scope="module")
def mnist_small(mnist_sample):
    return mnist_sample.x_train[:N], mnist_sample.y_train[:N]


def tiny_conv():
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(2, 3, strides=4, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(10),
    ], name="tiny_conv")


# --- path choice ----------------------------------------------------------------------------

def test_supports_fast_clipping():
    assert supports_fast_clipping(models.standard_mlp())
    assert not supports_fast_clipping(models.standard_cnn())  # Conv2D is not in 0.9.0's registry
    unsupported = fast_clipping_layers(models.standard_cnn())
    assert len(unsupported) == 2 and all("(Conv2D)" in name for name in unsupported)  # the Dense layers are fine

    class Subclassed(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(10)

        def call(self, x):
            return self.dense(x)

    sub = Subclassed()
    sub.build((None, 4))
    assert not supports_fast_clipping(sub)  # no internal compute graph
    with pytest.raises(ValueError, match="Sequential or functional"):
        DPSGD(2.0, DELTA, BATCH, 1, N, path="vectorized").compile(sub)


def test_auto_picks_vectorized_for_unsupported_layer_and_fast_refuses_it():
    dp = DPSGD(2.0, DELTA, BATCH, 1, N)
    model = dp.compile(tiny_conv())
    assert dp.path == "vectorized"
    assert dp.requested_path == "auto"
    assert not model._enable_fast_peg_computation  # pylint: disable=protected-access
    dp = DPSGD(2.0, DELTA, BATCH, 1, N, path="microbatch")
    model = dp.compile(tiny_conv())
    assert isinstance(model.optimizer, dp_optimizer_keras.GenericDPAdamOptimizer)
    assert model.loss.reduction == "none"
    with pytest.raises(ValueError, match=r"Conv2D.*path='vectorized'"):
        DPSGD(2.0, DELTA, BATCH, 1, N, path="fast_clipping").compile(tiny_conv())
    dp = DPSGD(2.0, DELTA, BATCH, 1, N, path="vectorized")
    model = dp.compile(tiny_conv())
    assert dp.path == "vectorized" and not model._enable_fast_peg_computation  # pylint: disable=protected-access


def test_bad_models_are_refused(mnist_small):
    dp = DPSGD(1.0, DELTA, BATCH, 1, N)
    softmax = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(),
                                keras.layers.Dense(10, activation="softmax")])
    with pytest.raises(ValueError, match="logits"):
        dp.compile(softmax)
    batchnorm = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(),
                                  keras.layers.BatchNormalization(), keras.layers.Dense(10)])
    with pytest.raises(ValueError, match="mixes the examples of a batch"):
        dp.compile(batchnorm)
    with pytest.raises(ValueError, match="not built"):
        dp.compile(keras.Sequential([keras.layers.Dense(10)]))
    with pytest.raises(ValueError, match="n=300"):
        dp.dataset(*[a[:100] for a in mnist_small])
    assert dp.release is None  # nothing was compiled, nothing recorded
