"""Group clipping: every k consecutive rows one clipping unit (a record's views, a user's records), their weighted
gradients summed and clipped once, on every layer family of the ghost-norm path and on the per-record path,
against one gradient tape per record summed by group."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.mechanisms.dpsgd.clipping import clipped_gradient_sum, gradients, per_example_loss
from tfdpmech.mechanisms.dpsgd.runs.train_step import KERAS_3

from .test_layer_rules import Scale  # x ⊙ w: a layer the registry does not know

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


class OwnScale(keras.Model):
    def __init__(self):
        super().__init__()
        self.inner, self.head = keras.layers.Dense(6, activation="tanh"), keras.layers.Dense(3)
        self.scale = self.add_weight(shape=(), initializer="ones", name="scale")

    def call(self, inputs):
        return self.head(self.inner(inputs)) * self.scale


def _sequential(shape, *layers, dtype="float32"):
    inputs = keras.Input(shape, dtype=dtype)
    out = inputs
    for layer in layers:
        out = layer(out)
    return keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Flatten()(out)))


def _mha():
    inputs = keras.Input((4, 6))
    out = keras.layers.MultiHeadAttention(2, 3)(inputs, inputs)
    return keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Flatten()(out)))


FAMILIES = {
    "dense": (lambda: _sequential((5,), keras.layers.Dense(4, activation="tanh")), (5,)),
    "dense_positions": (lambda: _sequential((3, 5), keras.layers.Dense(4)), (3, 5)),
    "conv2d": (lambda: _sequential((6, 6, 2), keras.layers.Conv2D(3, 3, strides=2, padding="same")), (6, 6, 2)),
    "conv1d": (lambda: _sequential((7, 2), keras.layers.Conv1D(3, 2)), (7, 2)),
    "conv2d_transpose": (lambda: _sequential((4, 4, 2), keras.layers.Conv2DTranspose(2, 3, strides=2)), (4, 4, 2)),
    "depthwise_folded": (lambda: _sequential((6, 6, 2), keras.layers.DepthwiseConv2D(3, depth_multiplier=2)),
                         (6, 6, 2)),
    "depthwise_patches": (lambda: _sequential((7, 7, 2), keras.layers.DepthwiseConv2D(3, dilation_rate=2)),
                          (7, 7, 2)),
    "separable": (lambda: _sequential((6, 6, 2), keras.layers.SeparableConv2D(3, 3)), (6, 6, 2)),
    "embedding": (lambda: _sequential((5,), keras.layers.Embedding(7, 4), dtype="int32"), (5,)),
    "attention": (_mha, (4, 6)),
    "layer_norm": (lambda: _sequential((4, 6), keras.layers.LayerNormalization()), (4, 6)),
    "group_norm": (lambda: _sequential((4, 4, 4), keras.layers.GroupNormalization(2)), (4, 4, 4)),
    "lstm": (lambda: _sequential((4, 3), keras.layers.LSTM(4, return_sequences=True)), (4, 3)),
    "gru": (lambda: _sequential((4, 3), keras.layers.GRU(4)), (4, 3)),
    "alone_prelu": (lambda: _sequential((5,), keras.layers.Dense(4), keras.layers.PReLU()), (5,)),
    "own_weights": (OwnScale, (5,)),
}
if not KERAS_3:
    FAMILIES.pop("separable")


def _batch(shape, rows, integer, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 7, (rows, *shape)).astype(np.int32) if integer else rng.normal(size=(rows, *shape))
    return x.astype(np.int32 if integer else np.float32), rng.integers(0, 3, rows)


def _per_row_gradients(model, x, y, weights):
    fn = per_example_loss(LOSS)

    def one(xi, yi, wi):
        with tf.GradientTape() as tape:
            loss = wi * tf.reduce_sum(fn(yi, model(xi)))
        return gradients(tape, loss, model.trainable_variables)

    one = tf.function(one, autograph=False)
    return [[g.numpy().astype(np.float64) for g in one(x[i:i + 1], y[i:i + 1], weights[i])]
            for i in range(len(y))]


def _reference(model, x, y, weights, k, clip):
    rows = _per_row_gradients(model, x, y, weights)
    groups = [[sum(rows[g * k + r][v] for r in range(k)) for v in range(len(rows[0]))] for g in range(len(y) // k)]
    norms = np.array([np.sqrt(sum(float(np.sum(t * t)) for t in grads)) for grads in groups])
    factors = np.minimum(1.0, clip / np.maximum(norms, 1e-30))
    summed = [sum(f * grads[v] for f, grads in zip(factors, groups)) for v in range(len(groups[0]))]
    return summed, norms, groups


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_groups_gradient_is_clipped_once_on_every_family(name, k):
    build, shape = FAMILIES[name]
    keras.utils.set_random_seed(0)
    model = build()
    if not model.built:
        model(np.zeros((1, *shape), np.float32))
    x, y = _batch(shape, 4 * k, integer=name == "embedding")
    weights = np.ones(4 * k, np.float32) / k  # views: each group's mean gradient
    weights[-1] = 0.0  # a padding row inside the last group
    want, norms, _ = _reference(model, x, y, weights, k, clip=1.0)
    clip = float(np.median(norms))  # some groups clipped
    want, norms, _ = _reference(model, x, y, weights, k, clip)
    for method in ("fast_clipping", "vectorized"):
        got, _, got_norms = tf.function(lambda m=method: clipped_gradient_sum(
            model, per_example_loss(LOSS), x, y, weights, clip, m, training=False, group_size=k), autograph=False)()
        np.testing.assert_allclose(got_norms.numpy(), np.repeat(norms, k), rtol=1e-5, err_msg=method)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-6 * clip, err_msg=method)


@pytest.mark.parametrize("name", ["conv2d", "lstm", "own_weights", "alone_prelu"])
def test_with_every_row_far_above_c_a_group_moves_the_sum_by_exactly_c(name):
    build, shape = FAMILIES[name]
    keras.utils.set_random_seed(1)
    model = build()
    if not model.built:
        model(np.zeros((1, *shape), np.float32))
    k, clip = 3, 1e-4  # every row's gradient is far above C
    x, y = _batch(shape, 4 * k, integer=False, seed=2)
    weights = np.ones(4 * k, np.float32)  # a user's records: summed
    fn = per_example_loss(LOSS)
    whole = clipped_gradient_sum(model, fn, x, y, weights, clip, "fast_clipping", training=False, group_size=k)[0]
    without = weights.copy()
    without[:k] = 0.0  # the first group (user) removed
    rest = clipped_gradient_sum(model, fn, x, y, without, clip, "fast_clipping", training=False, group_size=k)[0]
    moved = np.sqrt(sum(float(np.sum((a.numpy() - b.numpy()) ** 2)) for a, b in zip(whole, rest)))
    assert moved == pytest.approx(clip, rel=1e-5)


class _RowsOnlyScale(Scale):
    pass


def _rows_only_rule():
    """A rule exact for rows that claims groups but sums its rows' squared norms: a group's squared norm is
    ‖Σ_i g_i‖², not Σ_i ‖g_i‖², so it is wrong for every group whose rows' gradients are not orthogonal."""
    from tfdpmech.mechanisms.dpsgd import LayerRule
    from tfdpmech.mechanisms.dpsgd.clipping.layer_rules import Tapped
    from tfdpmech.mechanisms.dpsgd.clipping.layer_rules.groups import sum_rows
    from tfdpmech.mechanisms.dpsgd.clipping.layer_rules.registry import select_rows

    class RowsOnly(LayerRule):
        family, groups = "rows_only", True

        def forward(self, layer, inputs, keep, args, kwargs):
            a = select_rows(keep, inputs)
            out = a * layer.w
            return Tapped(out, [(out, [layer.w])], {"a": a})

        def sq_norms(self, layer, saved, tap_grads):
            return sum_rows(tf.reduce_sum(tf.square(tap_grads[0] * saved["a"]), axis=-1))

    return RowsOnly()


def test_the_probe_checks_groups_and_demotes_a_rule_exact_for_rows_only():
    from tfdpmech.mechanisms.dpsgd import register_layer_rule
    from tfdpmech.mechanisms.dpsgd.clipping import resolve_clipping
    from tfdpmech.mechanisms.dpsgd.clipping.ghost_norms import layer_paths

    register_layer_rule(_RowsOnlyScale, _rows_only_rule())
    for k, family in ((1, "rows_only"), (3, "alone")):
        keras.utils.set_random_seed(0)
        inputs = keras.Input((6,))
        scale = _RowsOnlyScale()
        model = keras.Model(inputs, keras.layers.Dense(3)(scale(keras.layers.Dense(5, activation="tanh")(inputs))))
        assert resolve_clipping(model, "auto", group_size=k) == "fast_clipping"
        assert layer_paths(model)[scale.name] == family, k
