"""Mixed precision on the ghost-norm path, and Poisson batches clipped in chunks of ``physical_batch_size``."""

from __future__ import annotations

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech import DPSGD, make_private
from tfdpmech.mechanisms.dpsgd import OptimizerSettings
from tfdpmech.mechanisms.dpsgd.clipping.chunked_clipping import chunked_clipped_gradient_sum
from tfdpmech.mechanisms.dpsgd.clipping import clipped_gradient_sum, per_example_loss, resolve_clipping
from tfdpmech.mechanisms.dpsgd.runs.train_step import KERAS_3

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@pytest.fixture
def policy():
    """Set a global dtype policy for one test, then back to float32."""
    def set_policy(name):
        keras.mixed_precision.set_global_policy(name)
    yield set_policy
    keras.mixed_precision.set_global_policy("float32")


def _cnn(seed=0):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(8, 3, strides=2, activation="tanh"),
                             keras.layers.Conv2D(16, 3, strides=2, activation="tanh"), keras.layers.Flatten(),
                             keras.layers.Dense(10, dtype="float32")])


def _mnist(sample, n):
    return np.asarray(sample.x_train[:n]), np.argmax(np.asarray(sample.y_train[:n]), axis=1)


def _train(policy_name, set_policy, x, y, xt, yt, **run):
    set_policy(policy_name)
    model = make_private(_cnn(), DPSGD(epsilon=8.0, delta=1e-5, n=len(x), expected_batch_size=200, epochs=8, seed=0,
                                       optimizer=OptimizerSettings("sgd", learning_rate=1.0, momentum=0.9), **run))
    model.compile(loss=LOSS, metrics=["accuracy"])
    model.fit(x, y, verbose=0)
    return model, model.evaluate(xt, yt, verbose=0)[1]


def test_mixed_precision_trains_on_the_ghost_path_and_learns_as_float32(mnist_sample, policy):
    x, y = _mnist(mnist_sample, 2000)
    xt, yt = np.asarray(mnist_sample.x_test[:1000]), np.argmax(np.asarray(mnist_sample.y_test[:1000]), axis=1)
    reference, accuracy = _train("float32", policy, x, y, xt, yt)
    assert accuracy > 0.7
    for name in ("mixed_float16", "mixed_bfloat16"):
        model, low = _train(name, policy, x, y, xt, yt)
        assert model.dp_sgd.path == "fast_clipping", name
        assert abs(low - accuracy) <= 0.01, (name, low, accuracy)
        assert len(model.privacy_ledger) == 1 and model.privacy_ledger.releases[0].guarantee == "proven"


@pytest.mark.parametrize("name, rtol", [("mixed_float16", 2e-2), ("mixed_bfloat16", 6e-2)])
def test_mixed_precision_clipped_sums_match_a_float32_reference(mnist_sample, policy, name, rtol):
    x, y = _mnist(mnist_sample, 24)
    reference_model = _cnn()
    weights = reference_model.get_weights()
    loss = per_example_loss(keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    mask = np.ones(len(x), np.float32)
    mask[-4:] = 0.0  # padding rows contribute exactly zero in every precision
    want, _, want_norms = clipped_gradient_sum(reference_model, loss, tf.constant(x), tf.constant(y), tf.constant(mask),
                                               0.5, "vectorized", training=False)
    policy(name)
    model = _cnn()
    model.set_weights(weights)
    assert resolve_clipping(model, "auto") == "fast_clipping"
    got, _, norms = clipped_gradient_sum(model, loss, tf.constant(x), tf.constant(y), tf.constant(mask), 0.5,
                                         "fast_clipping", training=False)
    assert all(g.dtype == tf.float32 for g in got) and norms.dtype == tf.float32
    np.testing.assert_allclose(norms.numpy()[:-4], want_norms.numpy()[:-4], rtol=rtol)
    assert np.all(norms.numpy()[-4:] == 0.0)
    for g, w in zip(got, want):
        assert np.linalg.norm(g.numpy() - w.numpy()) <= rtol * np.linalg.norm(w.numpy())


def test_chunked_clipped_sum_equals_the_one_chunk_sum(mnist_sample):
    x, y = _mnist(mnist_sample, 50)
    model = _cnn()
    loss = per_example_loss(LOSS)
    mask = (np.arange(50) % 7 != 3).astype(np.float32)
    args = (model, loss, tf.constant(x), tf.constant(y), tf.constant(mask), 1.0)
    for method in ("fast_clipping", "vectorized"):
        whole, pred, norms = clipped_gradient_sum(*args, method)
        for chunk in (1, 16, 50, 64):
            parts, pred_c, norms_c = chunked_clipped_gradient_sum(*args, method, chunk)
            for a, b in zip(parts, whole):
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(norms_c.numpy(), norms.numpy(), rtol=1e-6)
            np.testing.assert_allclose(pred_c.numpy(), pred.numpy(), rtol=1e-6, atol=1e-6)


def test_physical_batch_size_trains_the_same_run(mnist_sample):
    x, y = _mnist(mnist_sample, 800)

    def trained(**run):
        model = make_private(_cnn(), DPSGD(epsilon=4.0, delta=1e-5, n=800, expected_batch_size=200, epochs=1, seed=3,
                                           **run))
        model.compile(loss=LOSS)
        model.fit(x, y, verbose=0)
        return model

    whole, chunked = trained(), trained(physical_batch_size=48)
    for a, b in zip(chunked.get_weights(), whole.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert chunked.privacy_ledger.releases[0].details["physical_batch_size"] == 48
    assert chunked.privacy_ledger.epsilon_provable() == whole.privacy_ledger.epsilon_provable()


def test_what_would_break_a_dp_step_is_refused_before_the_release():
    with pytest.raises(ValueError, match="physical_batch_size"):
        DPSGD(epsilon=1.0, delta=1e-5, n=100, expected_batch_size=10, physical_batch_size=0)
    with pytest.raises(TypeError, match="physical_batch_size"):
        DPSGD(epsilon=1.0, delta=1e-5, n=100, expected_batch_size=10, physical_batch_size=2.5)
    if not KERAS_3:
        pytest.skip("Keras 2.15's optimizers have no gradient_accumulation_steps or loss_scale_factor")
    for option, match in ((dict(gradient_accumulation_steps=2), "physical_batch_size"),
                          (dict(loss_scale_factor=128.0), "loss_scale_factor")):
        model = make_private(_cnn(), DPSGD(epsilon=1.0, delta=1e-5, n=100, expected_batch_size=10))
        with pytest.raises(ValueError, match=match):
            model.compile(optimizer=keras.optimizers.SGD(0.1, **option), loss=LOSS)
        assert len(model.privacy_ledger) == 0


def _sensitivity_models():
    """Tiny models, one layer family each (the registry's rules and one layer handled alone)."""
    image, sequence = keras.Input((8, 8, 3)), keras.Input((6, 5))
    tokens = keras.Input((6,), dtype="int32")

    def head(x):
        return keras.layers.Dense(4, dtype="float32")(keras.layers.Flatten()(x))

    models = {
        "dense": keras.Model(sequence, head(keras.layers.Dense(8, activation="tanh")(sequence))),
        "conv2d": keras.Model(image, head(keras.layers.Conv2D(4, 3, strides=2, activation="tanh")(image))),
        "conv1d": keras.Model(sequence, head(keras.layers.Conv1D(4, 3, padding="causal")(sequence))),
        "depthwise": keras.Model(image, head(keras.layers.DepthwiseConv2D(3, depth_multiplier=2)(image))),
        "transposed": keras.Model(image, head(keras.layers.Conv2DTranspose(2, 3, strides=2)(image))),
        "layer_norm": keras.Model(sequence, head(keras.layers.LayerNormalization()(sequence))),
        "group_norm": keras.Model(image, head(keras.layers.GroupNormalization(3)(image))),
        "embedding": keras.Model(tokens, head(keras.layers.Embedding(10, 4)(tokens))),
        "attention": keras.Model(sequence, head(keras.layers.MultiHeadAttention(2, 4)(sequence, sequence))),
        "lstm": keras.Model(sequence, head(keras.layers.LSTM(4, return_sequences=True)(sequence))),
        "alone": keras.Model(sequence, head(keras.layers.PReLU()(sequence))),
    }
    if KERAS_3:
        models["separable"] = keras.Model(image, head(keras.layers.SeparableConv2D(4, 3)(image)))
    return models


@pytest.mark.parametrize("name", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_sums_move_by_at_most_c_when_a_record_is_removed(policy, name):
    """Norms and clipped sums come from the same float32 values: no sum is rounded to the compute dtype after the
    records are added (a rounded sum moves by more than C when one record changes)."""
    policy(name)
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    clip, rows = 1e-3, 24  # every record clipped: each moves the sum by exactly C
    loss = per_example_loss(LOSS)
    for family, model in _sensitivity_models().items():
        x = rng.integers(0, 10, (rows, 6)).astype(np.int32) if family == "embedding" else \
            (3 * rng.normal(size=(rows, *model.inputs[0].shape[1:]))).astype(np.float32)
        y = tf.constant(rng.integers(0, 4, rows))
        weights = np.ones(rows, np.float32)
        summed, _, norms = clipped_gradient_sum(model, loss, tf.constant(x), y, tf.constant(weights), clip,
                                                "fast_clipping", training=False)
        assert np.all(norms.numpy() > clip), family
        for i in range(4):
            without = weights.copy()
            without[i] = 0.0
            other, _, _ = clipped_gradient_sum(model, loss, tf.constant(x), y, tf.constant(without), clip,
                                               "fast_clipping", training=False)
            moved = np.sqrt(sum(float(np.sum((a.numpy().astype(np.float64) - b.numpy()) ** 2))
                                for a, b in zip(summed, other)))
            assert abs(moved / clip - 1.0) <= 1e-5, (family, name, i, moved / clip)


@pytest.mark.slow  # two fresh processes, about 10 s each
def test_a_chunked_step_holds_one_chunk_at_a_time():
    here = os.path.dirname(os.path.abspath(__file__))
    growth = {}
    for rows in (512, 4096):  # 2 and 16 chunks of 256 records, 50 MB of activations each
        done = subprocess.run([sys.executable, os.path.join(here, "_chunk_memory_worker.py"), str(rows)],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        growth[rows] = int(done.stdout.split()[-1])
    # eight times the chunks add the 13 MB of the larger input and less than one chunk's activations besides (the
    # chunks' loop runs them one after the other: TensorFlow's default would run up to 10 at once)
    assert growth[4096] - growth[512] < 40 * 2**20, growth


def test_the_first_fit_traces_the_clipped_step_once_whatever_the_chunks(monkeypatch):
    """The clipped step (a deep network's forward and backward passes and every layer's norm) is what takes the
    time of a first fit's trace: it is traced once, not once for the first chunk and again for the loop's body,
    and the train step is not traced a second time because the optimizer's variables were created in its trace."""
    from tfdpmech.mechanisms.dpsgd.clipping import chunked_clipping  # noqa: PLC0415

    traces = []

    def counted(*args, **kwargs):
        traces.append(1)
        return clipped_gradient_sum(*args, **kwargs)

    monkeypatch.setattr(chunked_clipping, "clipped_gradient_sum", counted)
    rng = np.random.default_rng(0)
    x, y = rng.random((256, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, 256)
    for physical in (None, 16):  # expected batch 64: about four chunks of 16
        traces.clear()
        model = make_private(_cnn(), DPSGD(epsilon=8.0, delta=1e-5, n=len(x), expected_batch_size=64, epochs=1,
                                           seed=0, physical_batch_size=physical))
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=LOSS)
        built = lambda: getattr(model.optimizer, "built", getattr(model.optimizer, "_built", False))  # Keras 3, 2
        assert not built()  # built by fit, before its trace
        model.fit(x, y, verbose=0)
        assert built() and int(model.optimizer.iterations) == 4
        assert len(traces) == 1, (physical, len(traces))
