"""Models DP-SGD cannot clip exactly are refused, or trained exactly, before anything is recorded.

Batch statistics at any depth (inside TimeDistributed, a custom layer, a nested model, a layer no list
names), records that mix and weights read outside their own layer: each is either refused before the release or trained
on the exact per-example path; a layer called twice trains on the ghost-norm path.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.accounting import PrivacyLedger
from tfdpmech import DPSGD, make_private
from tfdpmech.mechanisms.dpsgd.clipping import clipped_gradient_sum, gradients, per_example_loss
from tfdpmech.mechanisms.dpsgd.clipping.model_probe import batch_dependence

LOSS = keras.losses.CategoricalCrossentropy(from_logits=True)


def _run(**kw):
    return DPSGD(2.0, 1e-3, expected_batch_size=10, epochs=1, n=100, engine="tfdpmech", **kw)


class HoldsBatchNorm(keras.layers.Layer):
    """A custom layer with a BatchNormalization inside."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.norm = keras.layers.BatchNormalization()

    def call(self, x, training=None):
        return self.norm(x, training=training)


class RunningMean(keras.layers.Layer):
    """A layer no list names that keeps the batch mean in a variable (as BatchNormalization does)."""

    def build(self, input_shape):
        self.mean = self.add_weight(shape=(input_shape[-1],), initializer="zeros", trainable=False, name="mean")

    def call(self, x, training=None):
        if training:
            self.mean.assign(0.9 * self.mean + 0.1 * tf.reduce_mean(x, axis=0))
        return x - self.mean


class TiedOutput(keras.layers.Layer):
    """An output projection that reads the embedding table of another layer (weight tying)."""

    def __init__(self, embedding, **kw):
        super().__init__(**kw)
        self.embedding = embedding

    def call(self, h):
        return tf.matmul(h, tf.transpose(tf.convert_to_tensor(self.embedding.embeddings)))


def _nested_batchnorm_models():
    inputs = keras.Input((3, 4))
    inner = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4), keras.layers.BatchNormalization()])
    return {
        "time_distributed": keras.Sequential([
            inputs, keras.layers.TimeDistributed(keras.layers.BatchNormalization()), keras.layers.Flatten(),
            keras.layers.Dense(2)]),
        "custom_layer": keras.Sequential([keras.Input((4,)), HoldsBatchNorm(), keras.layers.Dense(2)]),
        "nested_model": keras.Sequential([keras.Input((4,)), inner, keras.layers.Dense(2)]),
        "unlisted_layer": keras.Sequential([keras.Input((4,)), RunningMean(), keras.layers.Dense(2)]),
        "batch_mean_lambda": keras.Sequential([keras.Input((4,)),
                                               keras.layers.Lambda(lambda t: t - tf.reduce_mean(t, axis=0)),
                                               keras.layers.Dense(2)]),
    }


@pytest.mark.parametrize("name", sorted(_nested_batchnorm_models()))
def test_batch_statistics_and_mixed_records_at_any_depth_are_refused_before_the_release(name):
    model = _nested_batchnorm_models()[name]
    before = [v.numpy().copy() for v in model.variables]
    ledger = PrivacyLedger()
    private = make_private(model, DPSGD(epsilon=2.0, delta=1e-3, n=100, expected_batch_size=10, epochs=1, ledger=ledger))
    with pytest.raises(ValueError, match="mix|from the batch"):
        private.compile(loss=LOSS)
    assert len(ledger) == 0 and private.dp_sgd.release is None
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.variables))  # the probe restored them


def test_random_layers_with_data_independent_state_pass_the_probe():
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dropout(0.3), keras.layers.GaussianNoise(0.1),
                              keras.layers.Dense(2)])
    assert batch_dependence(model) is None
    dp = _run()
    dp.compile(model, loss=LOSS)
    assert dp.release is not None


def _tied_model():
    keras.utils.set_random_seed(3)
    ids = keras.Input((5,), dtype="int32")
    embedding = keras.layers.Embedding(11, 4)
    h = keras.layers.GlobalAveragePooling1D()(embedding(ids))
    return keras.Model(ids, TiedOutput(embedding)(keras.layers.Dense(4)(h)))


def _loop(model, x, y, clip):
    fn, total, norms = per_example_loss(LOSS), None, []
    for i in range(len(x)):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(fn(y[i:i + 1], model(x[i:i + 1], training=True)))
        grads = [g.numpy().astype(np.float64) for g in gradients(tape, loss, model.trainable_variables)]
        norms.append(np.sqrt(sum(float(np.sum(g * g)) for g in grads)))
        clipped = [g * min(1.0, clip / norms[-1]) for g in grads]
        total = clipped if total is None else [a + b for a, b in zip(total, clipped)]
    return total, np.array(norms)


def test_tied_weights_take_the_exact_path_or_are_refused_naming_the_variable():
    model = _tied_model()
    dp = _run()
    dp.compile(model, loss=LOSS)
    assert dp.path == "vectorized"  # auto: the ghost norms would miss the tied use of the table
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 11, (6, 5)).astype(np.int32), keras.utils.to_categorical(rng.integers(0, 11, 6), 11)
    clip = float(np.median(_loop(model, x, y, clip=np.inf)[1]))  # some records clipped, some not
    want, norms = _loop(model, x, y, clip=clip)
    got, _, got_norms = clipped_gradient_sum(model, per_example_loss(LOSS), x, y, np.ones(6, np.float32), clip,
                                             dp.path)
    np.testing.assert_allclose(got_norms.numpy(), norms, rtol=1e-4)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-4, atol=1e-6)
    forced = _run(path="fast_clipping")
    with pytest.raises(ValueError, match="embeddings.*outside the layer that owns it|ghost norm of a probe record"):
        forced.compile(_tied_model(), loss=LOSS)
    assert forced.release is None and len(forced.ledger) == 0


def test_a_layer_called_twice_trains_on_the_ghost_norm_path():
    shared = keras.layers.Dense(4, activation="tanh")
    block = keras.Sequential([keras.Input((4,)), shared, shared])  # the same Dense twice, inside a container
    model = keras.Sequential([keras.Input((4,)), block, keras.layers.Dense(2)])
    rng = np.random.default_rng(1)
    x, y = rng.random((100, 4)).astype(np.float32), keras.utils.to_categorical(rng.integers(0, 2, 100), 2)
    private = make_private(model, DPSGD(epsilon=2.0, delta=1e-3, n=100, expected_batch_size=10, epochs=1, seed=0))
    private.compile(loss=LOSS)
    private.fit(x, y, verbose=0)
    assert private.dp_sgd.path == "fast_clipping"
    assert private.privacy_ledger.releases[0].details["path"] == "fast_clipping"
    assert private.dp_sgd.steps_taken() == private.dp_sgd.steps
