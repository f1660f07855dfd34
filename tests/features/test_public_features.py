"""public_features: provenance as an ε = 0 release, bounds known by construction, frozen weights."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfdpmech
from tfdpmech.features import FeatureExtractor, layer_bounds, public_features
from tfdpmech.layers import UnitClip


def small_public_model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([
        keras.Input((5,)),
        keras.layers.Dense(4, activation="relu", name="relu"),
        keras.layers.Dense(3, name="linear"),
        UnitClip(name="clip"),
        keras.layers.Dense(3, activation="sigmoid", name="sig"),
        keras.layers.Dense(2, name="logits"),
    ], name="public")


def test_cut_layer_bounds_and_release():
    model = small_public_model()
    x_pub = np.random.default_rng(0).uniform(0, 1, (20, 5)).astype(np.float32)
    feats = public_features(model, "clip", trained_on=x_pub, description="20 public rows")
    assert feats.bounds == (0.0, 1.0) and feats.unit_bounded and feats.num_features == 3
    rel = feats.release
    assert rel.epsilon_provable == 0.0 and rel.epsilon_claimed == 0.0 and rel.guarantee == "proven"
    assert "trained on public data only (20 public rows)" in rel.basis and rel.details["public_records"] == 20
    f = feats(x_pub)
    assert f.shape == (20, 3) and f.dtype == np.float64 and f.min() >= 0 and f.max() <= 1
    np.testing.assert_allclose(f, keras.Model(model.inputs[0], model.get_layer("clip").output)(x_pub).numpy(), rtol=1e-6)
    assert model.get_layer("relu").trainable  # the public model itself is left as it was


def test_bounds_from_layer_types():
    model = small_public_model()
    assert layer_bounds(model.get_layer("sig")) == (0.0, 1.0)
    assert layer_bounds(model.get_layer("relu")) == (0.0, math.inf)
    assert layer_bounds(model.get_layer("linear")) == (-math.inf, math.inf)
    assert layer_bounds(keras.layers.ReLU(max_value=6.0)) == (0.0, 6.0)
    assert public_features(model, "relu").nonnegative and not public_features(model, "relu").unit_bounded
    assert public_features(model, "linear", bounds=(-2, 2)).bounds == (-2.0, 2.0)


def test_declared_bounds_are_checked_never_clipped():
    feats = public_features(small_public_model(), "linear", bounds=(5.0, 6.0))
    with pytest.raises(ValueError, match="outside its declared bounds"):
        feats(np.ones((3, 5), np.float32))


def test_weights_changed_after_provenance_refused():
    model = small_public_model()
    feats = public_features(model, "clip")
    feats.check_unchanged()
    model.get_layer("relu").kernel.assign(tf.zeros_like(model.get_layer("relu").kernel))  # trained further
    with pytest.raises(ValueError, match="weights changed after its provenance"):
        feats(np.ones((2, 5), np.float32))


def test_features_come_from_a_frozen_copy_made_when_the_provenance_is_recorded():
    model = small_public_model()
    feats = public_features(model, "clip")
    assert feats.frozen is not feats.model and not feats.frozen.trainable
    assert all(a is not b for a, b in zip(feats.frozen.weights, feats.model.weights))  # no shared variable
    x = np.random.default_rng(1).uniform(0, 1, (4, 5)).astype(np.float32)
    np.testing.assert_allclose(feats(x), feats.model(x).numpy(), rtol=1e-6)
    kernel = feats.frozen.layers[1].kernel  # a change to the copy (e.g. through a model built on it) is refused too
    kernel.assign(kernel + 1.0)
    with pytest.raises(ValueError, match="frozen copy changed after its provenance"):
        feats(x)


class _Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2, activation="sigmoid")

    def call(self, x):
        return self.dense(x)


def test_a_model_that_cannot_be_copied_is_refused_when_wrapped():
    model = _Subclassed()
    model(np.zeros((1, 3), np.float32))
    with pytest.raises(TypeError, match="cannot be copied with keras.models.clone_model"):
        FeatureExtractor(model, name="sub", provenance="random weights", bounds=(0, 1))


def test_disjointness_with_training_records():
    x_pub = np.random.default_rng(0).uniform(0, 1, (20, 5)).astype(np.float32)
    feats = public_features(small_public_model(), "clip", trained_on=x_pub)
    feats.check_disjoint(x_pub[:0 + 1] + 0.5)
    with pytest.raises(ValueError, match="shares 2 record"):
        feats.check_disjoint(np.concatenate([x_pub[3:5], x_pub[:2] + 1]))


def test_mnist_mlp_hidden_clip_is_unit_bounded():
    feats = public_features(tfdpmech.models.mlp(10), "hidden_clip")
    assert feats.unit_bounded and feats.num_features == 25 and feats.input_shape == (28, 28, 1)


def test_bad_arguments():
    with pytest.raises(TypeError, match="keras.Model"):
        public_features("model", "clip")
    with pytest.raises(ValueError, match="not in model 'public'"):
        public_features(small_public_model(), "nope")
    with pytest.raises(TypeError, match="keras.Model"):
        FeatureExtractor(lambda x: x, name="f", provenance="")
    with pytest.raises(ValueError, match="low < high"):
        FeatureExtractor(small_public_model(), name="f", provenance="", bounds=(1, 0))


def test_auto_batch_size_bounds_the_widest_layer_and_leaves_features_unchanged():
    """The default forward-pass size keeps the widest activation under 64 MB and changes no feature."""
    from tfdpmech.features.extractor import AUTO_BATCH_FLOATS

    wide = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(64, 3, padding="same"),
                             keras.layers.GlobalAveragePooling2D(), keras.layers.Activation("sigmoid")])
    feats = FeatureExtractor(wide, name="wide", provenance="random weights", bounds=(0, 1))
    assert feats.auto_batch_size == AUTO_BATCH_FLOATS // (28 * 28 * 64)
    narrow = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, activation="sigmoid")])
    assert FeatureExtractor(narrow, name="n", provenance="random", bounds=(0, 1)).auto_batch_size == 8192
    x = np.random.default_rng(0).random((700, 28, 28, 1)).astype(np.float32)
    np.testing.assert_allclose(feats(x), feats(x, batch_size=7), rtol=1e-5, atol=1e-6)
