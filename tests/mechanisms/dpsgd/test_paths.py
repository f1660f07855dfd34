"""Tests for tfdpmech.mechanisms.dpsgd.runs.paths: the training-path choice and the model checks.

The path choice is tested for every engine that imports (tfdpmech's everywhere, tensorflow-privacy's on the
TensorFlow 2.15 stack); the model checks run with ``engine="auto"``. Only the checks of tensorflow-privacy's
own layer registry skip where it does not import.
"""

from __future__ import annotations

import keras
import pytest

from tfdpmech import models
from tfdpmech.mechanisms.dpsgd import ShuffledDPSGD, fast_clipping_layers, supports_fast_clipping
from tfdpmech.mechanisms.dpsgd.clipping import ghost_unsupported_layers
from tfdpmech.mechanisms.dpsgd.runs.paths import tf_privacy_available

pytestmark = pytest.mark.dpsgd
ENGINES = ["tfdpmech"] + (["tensorflow_privacy"] if tf_privacy_available() else [])
TF_PRIVACY_CROSS_CHECK = pytest.mark.skipif(
    not tf_privacy_available(),
    reason="tensorflow-privacy cross-check: its fast-clipping layer registry imports on the TensorFlow 2.15 stack only",
)

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

@TF_PRIVACY_CROSS_CHECK
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
        ShuffledDPSGD(2.0, DELTA, BATCH, 1, N, path="vectorized").compile(sub)


def test_ghost_norms_cover_the_standard_models_and_name_what_they_cannot():
    """tfdpmech's fast-clipping check (every engine's ``"auto"`` on Keras 3): Conv2D has ghost norms here."""
    assert ghost_unsupported_layers(models.standard_mlp()) == []
    assert ghost_unsupported_layers(models.standard_cnn()) == []
    normed = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(), keras.layers.LayerNormalization(),
                               keras.layers.Dense(10)], name="normed")
    assert ghost_unsupported_layers(normed) == []  # the registry's normalisation rule
    # a recurrent layer with dropout: no rule, and its per-record recomputation would draw other masks
    random = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Reshape((28, 28)),
                               keras.layers.GRU(4, dropout=0.5), keras.layers.Dense(10)], name="random")
    assert ghost_unsupported_layers(random) == [f"{random.layers[1].name} (GRU)"]
    dp = ShuffledDPSGD(2.0, DELTA, BATCH, 1, N, path="fast_clipping", engine="tfdpmech")
    with pytest.raises(ValueError, match=r"\(ghost norms\).*GRU.*path='vectorized'"):
        dp.compile(random)
    assert dp.release is None and not dp.ledger.releases


@pytest.mark.parametrize("engine", ENGINES)
def test_auto_path_for_a_conv_net_and_the_paths_each_engine_refuses(engine):
    base = tiny_conv()
    dp = ShuffledDPSGD(2.0, DELTA, BATCH, 1, N, engine=engine)
    model = dp.compile(base)
    assert dp.requested_path == "auto" and dp.engine == engine
    if engine == "tensorflow_privacy":
        from tensorflow_privacy.privacy.optimizers import dp_optimizer_keras

        assert dp.path == "vectorized"  # Conv2D is not in tensorflow-privacy 0.9.0's registry
        assert model is not base and not model._enable_fast_peg_computation  # pylint: disable=protected-access
        dp = ShuffledDPSGD(2.0, DELTA, BATCH, 1, N, path="microbatch", engine=engine)
        model = dp.compile(tiny_conv())
        assert isinstance(model.optimizer, dp_optimizer_keras.GenericDPAdamOptimizer)
        assert model.loss.reduction == "none"
        with pytest.raises(ValueError, match=r"Conv2D.*path='vectorized'"):
            ShuffledDPSGD(2.0, DELTA, BATCH, 1, N, path="fast_clipping", engine=engine).compile(tiny_conv())
    else:
        assert dp.path == "fast_clipping"  # tfdpmech has ghost norms for Conv2D
        assert model is base  # the user's own model, with the DP train step installed
        with pytest.raises(ValueError, match="engine='tfdpmech' clips every example.*engine='tensorflow_privacy'"):
            ShuffledDPSGD(2.0, DELTA, BATCH, 1, N, path="microbatch", engine=engine)
    dp = ShuffledDPSGD(2.0, DELTA, BATCH, 1, N, path="vectorized", engine=engine)
    model = dp.compile(tiny_conv())
    assert dp.path == "vectorized" and dp.release.details["path"] == "vectorized"
    assert dp.release.details["engine"] == engine
    if engine == "tensorflow_privacy":
        assert not model._enable_fast_peg_computation  # pylint: disable=protected-access


def test_bad_models_are_refused(mnist_small):
    dp = ShuffledDPSGD(1.0, DELTA, BATCH, 1, N)
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
