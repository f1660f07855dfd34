"""Per-example clipped gradient sums equal a record-by-record loop, on every stack (Keras 2.15 and 3)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.mechanisms.dpsgd.clipping.layer_rules.convolution import patches
from tfdpmech.mechanisms.dpsgd.clipping import (
    clipped_gradient_sum,
    ghost_unsupported_layers,
    gradients,
    per_example_loss,
    resolve_clipping,
)

LOSS = keras.losses.CategoricalCrossentropy(from_logits=True)


def _loop_reference(model, loss, x, y, weights, clip):
    """Σ_i w_i clip_C(∇θ ℓ_i) by one gradient per record (the definition, no tricks)."""
    fn = per_example_loss(loss)
    total = [np.zeros(v.shape, np.float64) for v in model.trainable_variables]
    norms = []
    for i in range(len(x)):
        with tf.GradientTape() as tape:
            li = tf.reduce_sum(fn(y[i:i + 1], model(x[i:i + 1], training=True)))
        grads = [np.asarray(g, np.float64) for g in gradients(tape, li, model.trainable_variables)]
        norm = np.sqrt(sum(float(np.sum(g * g)) for g in grads))
        norms.append(norm)
        factor = weights[i] * min(1.0, clip / max(norm, 1e-12))
        total = [t + factor * g for t, g in zip(total, grads)]
    return total, np.array(norms)


def _mlp():
    return keras.Sequential([keras.Input((12,)), keras.layers.Dense(16, activation="tanh"),
                             keras.layers.Dense(5)])


def _cnn(padding="same", strides=1, dilation=1):
    return keras.Sequential([
        keras.Input((10, 10, 2)),
        keras.layers.Conv2D(4, 3, strides=strides, padding=padding, dilation_rate=dilation, activation="relu"),
        keras.layers.Conv2D(3, (2, 3), padding="valid"),
        keras.layers.Flatten(),
        keras.layers.Dense(5),
    ])


def _functional_sequence_model():
    inputs = keras.Input((6, 4))
    h = keras.layers.Dense(8, activation="tanh")(inputs)  # a Dense over 6 positions
    h = keras.layers.EinsumDense("abc,cd->abd", output_shape=(6, 3), bias_axes="d")(h)
    h = keras.layers.Flatten()(h)
    return keras.Model(inputs, keras.layers.Dense(5)(h))


def _embedding_model():
    return keras.Sequential([keras.Input((7,), dtype="int32"), keras.layers.Embedding(9, 4),
                             keras.layers.Flatten(), keras.layers.Dense(5)])


def _data(model, batch=6, seed=0):
    rng = np.random.default_rng(seed)
    shape = (batch,) + tuple(model.input_shape[1:])
    if model.inputs[0].dtype in ("int32", tf.int32):
        x = rng.integers(0, 4, size=shape).astype(np.int32)  # few ids: repeated tokens within a record
    else:
        x = (2.0 * rng.standard_normal(shape)).astype(np.float32)
    y = keras.utils.to_categorical(rng.integers(0, 5, batch), 5).astype(np.float32)
    weights = np.ones(batch, np.float32)
    weights[-2:] = 0.0  # Poisson padding rows
    return x, y, weights


MODELS = {
    "mlp": _mlp,
    "cnn_same": _cnn,
    "cnn_valid_strided": lambda: _cnn(padding="valid", strides=2),
    "cnn_dilated": lambda: _cnn(dilation=2),
    "dense_einsum_sequence": _functional_sequence_model,
    # T·(d_in + d_out) = 6·32 <= d_in·d_out = 256: the ghost Gram-matrix branch
    "dense_ghost_gram": lambda: keras.Sequential([keras.Input((6, 16)), keras.layers.Dense(16, activation="tanh"),
                                                  keras.layers.Flatten(), keras.layers.Dense(5)]),
    # 6·12 > 32: the materialised a_iᵀ g_i branch
    "dense_over_positions": lambda: keras.Sequential([keras.Input((6, 4)), keras.layers.Dense(8, activation="tanh"),
                                                      keras.layers.Flatten(), keras.layers.Dense(5)]),
    "embedding": _embedding_model,
    # one input channel, an 8×8 kernel at stride 2 ("same"): the first layer of DP-SGD's MNIST CNN
    "cnn_one_channel": lambda: keras.Sequential([keras.Input((12, 12, 1)),
                                                 keras.layers.Conv2D(3, 8, strides=2, padding="same", activation="tanh"),
                                                 keras.layers.Flatten(), keras.layers.Dense(5)]),
}


@pytest.mark.parametrize("channels", [1, 3, 4, 5])
@pytest.mark.parametrize("kernel, strides, dilations, padding", [
    ((8, 8), (2, 2), (1, 1), "SAME"), ((3, 2), (1, 1), (1, 1), "VALID"), ((4, 4), (2, 3), (1, 1), "VALID"),
    ((3, 3), (1, 1), (2, 2), "SAME"),
])
def test_conv_patches_are_extract_patches(channels, kernel, strides, dilations, padding):
    """The identity-kernel convolution used for few input channels gathers exactly ``extract_patches``' patches."""
    a = tf.constant(np.random.default_rng(channels).standard_normal((3, 11, 9, channels)).astype(np.float32))
    expected = tf.image.extract_patches(a, sizes=[1, *kernel, 1], strides=[1, *strides, 1],
                                        rates=[1, *dilations, 1], padding=padding)
    got = patches(a, kernel, strides, dilations, padding)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


@pytest.mark.parametrize("channels", [2, 6])
def test_volume_and_sequence_patches_are_extract_patches(channels):
    """3-D patches (identity kernel or extract_volume_patches) and 1-D patches (an image of height 1)."""
    rng = np.random.default_rng(channels)
    volume = tf.constant(rng.standard_normal((2, 6, 7, 5, channels)).astype(np.float32))
    expected = tf.extract_volume_patches(volume, ksizes=[1, 3, 2, 2, 1], strides=[1, 2, 1, 2, 1], padding="SAME")
    np.testing.assert_allclose(patches(volume, (3, 2, 2), (2, 1, 2), (1, 1, 1), "same").numpy(), expected.numpy(),
                               rtol=1e-6, atol=1e-6)
    sequence = tf.constant(rng.standard_normal((2, 13, channels)).astype(np.float32))
    expected = tf.image.extract_patches(sequence[:, None], sizes=[1, 1, 3, 1], strides=[1, 1, 2, 1],
                                        rates=[1, 1, 2, 1], padding="VALID")[:, 0]
    np.testing.assert_allclose(patches(sequence, (3,), (2,), (2,), "valid").numpy(), expected.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("method", ["fast_clipping", "vectorized"])
def test_clipped_sum_equals_the_record_by_record_loop(name, method):
    keras.utils.set_random_seed(1)
    model = MODELS[name]()
    x, y, weights = _data(model)
    expected, norms = _loop_reference(model, LOSS, x, y, weights, clip=0.5)
    assert (norms[weights > 0] > 0.5).any(), "the clip must bind for some record, or the test checks nothing"
    got, y_pred, got_norms = clipped_gradient_sum(model, per_example_loss(LOSS), tf.constant(x), tf.constant(y),
                                                  tf.constant(weights), 0.5, method)
    real = weights > 0
    np.testing.assert_allclose(got_norms.numpy()[real], norms[real], rtol=2e-5, atol=1e-6)
    assert (got_norms.numpy()[~real] == 0).all()
    for g, e, v in zip(got, expected, model.trainable_variables):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-4, atol=1e-6, err_msg=v.name)
    # the output of the real records (padding rows are selected out: their inputs are zeroed)
    np.testing.assert_allclose(y_pred.numpy()[real], model(x).numpy()[real], rtol=1e-5, atol=1e-6)


def test_masked_rows_add_nothing():
    keras.utils.set_random_seed(2)
    model = _mlp()
    x, y, weights = _data(model)
    fn = per_example_loss(LOSS)
    full, _, _ = clipped_gradient_sum(model, fn, x, y, weights, 1.0, "fast_clipping")
    kept = weights > 0
    only_real, _, _ = clipped_gradient_sum(model, fn, x[kept], y[kept], weights[kept], 1.0, "fast_clipping")
    for a, b in zip(full, only_real):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)


def test_every_clipped_gradient_has_norm_at_most_c():
    keras.utils.set_random_seed(3)
    model = _cnn()
    x, y, _ = _data(model, batch=1)
    got, _, norms = clipped_gradient_sum(model, per_example_loss(LOSS), x, y, np.ones(1, np.float32), 0.1,
                                         "fast_clipping")
    assert norms.numpy()[0] > 0.1
    total = np.sqrt(sum(float(np.sum(g.numpy() ** 2)) for g in got))
    assert total == pytest.approx(0.1, rel=1e-5)


def test_auto_picks_ghost_norms_for_supported_layers_and_vectorized_otherwise():
    assert resolve_clipping(_cnn(), "auto") == "fast_clipping"
    assert resolve_clipping(_embedding_model(), "auto") == "fast_clipping"
    with_norm = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.LayerNormalization(),
                                  keras.layers.Dense(2)])
    assert ghost_unsupported_layers(with_norm) == []  # the registry's normalisation rule
    assert resolve_clipping(with_norm, "auto") == "fast_clipping"
    # a recurrent layer with dropout can be neither a rule's nor recomputed record by record alone
    random = keras.Sequential([keras.Input((5, 3)), keras.layers.GRU(4, dropout=0.5), keras.layers.Dense(2)])
    assert ghost_unsupported_layers(random) == [f"{random.layers[0].name} (GRU)"]
    assert resolve_clipping(random, "auto") == "vectorized"
    with pytest.raises(ValueError, match="GRU.*path='vectorized'"):
        resolve_clipping(random, "fast_clipping")
    with pytest.raises(ValueError, match="clipping method"):
        resolve_clipping(with_norm, "ghost")


def test_a_frozen_layer_is_not_clipped_and_does_not_block_ghost_norms():
    model = keras.Sequential([keras.Input((4,)), keras.layers.LayerNormalization(), keras.layers.Dense(2)])
    model.layers[0].trainable = False
    assert resolve_clipping(model, "auto") == "fast_clipping"


def test_a_layer_called_twice_takes_ghost_norms_equal_to_the_vectorized_path():
    inputs = keras.Input((4,))
    shared = keras.layers.Dense(4, activation="tanh")
    model = keras.Model(inputs, keras.layers.Dense(2)(shared(shared(inputs))))
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    y = np.eye(2, dtype=np.float32)[[0, 1, 0]]
    fast, _, fast_norms = clipped_gradient_sum(model, per_example_loss(LOSS), x, y, np.ones(3, np.float32), 0.1,
                                               "fast_clipping")
    slow, _, norms = clipped_gradient_sum(model, per_example_loss(LOSS), x, y, np.ones(3, np.float32), 0.1,
                                          "vectorized")
    np.testing.assert_allclose(fast_norms.numpy(), norms.numpy(), rtol=1e-5)
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-7)
    assert shared.call.__self__ is shared  # the recording restored the layer's own call


def test_per_example_loss_refuses_a_function():
    with pytest.raises(TypeError, match="keras.losses.Loss instance"):
        per_example_loss(lambda a, b: a)


def test_a_trainable_layer_the_forward_pass_does_not_reach_gets_a_zero_gradient():
    class PartlyUsed(keras.Model):  # a subclassed model: tfdpmech's engine trains it too
        def __init__(self):
            super().__init__()
            self.used, self.unused = keras.layers.Dense(2), keras.layers.Dense(2)

        def call(self, x):
            return self.used(x)

    model = PartlyUsed()
    model(np.ones((1, 4), np.float32))
    model.unused.build((None, 4))
    assert len(model.trainable_variables) == 4
    x, y = np.ones((3, 4), np.float32), np.eye(2, dtype=np.float32)[[0, 1, 0]]
    unused = {id(v) for v in model.unused.trainable_variables}
    for method in ("fast_clipping", "vectorized"):
        got, _, _ = clipped_gradient_sum(model, per_example_loss(LOSS), x, y, np.ones(3, np.float32), 1.0, method)
        assert len(got) == 4
        for v, g in zip(model.trainable_variables, got):
            assert (np.abs(g.numpy()).sum() == 0) == (id(v) in unused), v.name
