"""A weight used by more than one call per forward pass, on the ghost-norm path: exact against per-record gradients.

Tied input and output embeddings (``ReversibleEmbedding(..., tie_weights=True)`` called as a lookup and as
the output projection), a layer called twice, a layer shared across depth (ALBERT's scheme), a layer
whose rule gives no cross terms (handled alone), groups of rows clipped as one unit, and the cross term's
formula itself against a dense reference.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.mechanisms.dpsgd.clipping import clipped_gradient_sum, gradients, per_example_loss, resolve_clipping
from tfdpmech.mechanisms.dpsgd.clipping.ghost_norms import ghost_clipped_sum, layer_paths
from tfdpmech.mechanisms.dpsgd.clipping.layer_rules.groups import row_groups
from tfdpmech.mechanisms.dpsgd.clipping.layer_rules.shared_uses import Outer, Rows, materialise, shared_sq_norms

SPARSE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
NEEDS_REVERSIBLE = pytest.mark.skipif(not hasattr(keras.layers, "ReversibleEmbedding"),
                                      reason="ReversibleEmbedding is Keras 3's (3.12 on); Keras 2 has none")
CATEGORICAL = keras.losses.CategoricalCrossentropy(from_logits=True)
VOCAB, T, D = 13, 6, 8


def _per_record(model, loss, x, y, k: int = 1):
    """Each clipping unit's gradient (k consecutive rows summed), record by record, float64."""
    fn, units = per_example_loss(loss), []
    rows = len(tf.nest.flatten(x)[0])
    for start in range(0, rows, k):
        part = tf.nest.map_structure(lambda t: t[start:start + k], x)
        with tf.GradientTape() as tape:
            value = tf.reduce_sum(fn(y[start:start + k], model(part, training=False)))
        units.append([g.numpy().astype(np.float64) for g in gradients(tape, value, model.trainable_variables)])
    return units


def _clipped_reference(units, clip):
    norms = np.array([np.sqrt(sum(float(np.sum(g * g)) for g in unit)) for unit in units])
    summed = [sum(unit[j] * min(1.0, clip / n) for unit, n in zip(units, norms)) for j in range(len(units[0]))]
    return summed, norms


def _check_exact(model, loss, x, y, k: int = 1, alone=()):
    """Ghost norms and clipped sums against per-record gradients; every unit on its registered rule (a unit
    whose cross terms were wrong would be demoted to the alone rule by the probe, exact but slow), but
    ``alone``."""
    assert resolve_clipping(model, "fast_clipping", group_size=k) == "fast_clipping"
    assert sorted(name for name, family in layer_paths(model).items() if family == "alone") == sorted(alone)
    units = _per_record(model, loss, x, y, k)
    clip = float(np.median(_clipped_reference(units, np.inf)[1]))  # some units clipped, some not
    want, norms = _clipped_reference(units, clip)
    rows = len(tf.nest.flatten(x)[0])
    got, _, got_norms = ghost_clipped_sum(model, per_example_loss(loss), x, y, tf.ones((rows,)), clip, False,
                                          group_size=k)
    np.testing.assert_allclose(got_norms.numpy()[::k], norms, rtol=2e-5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=2e-4, atol=1e-6)


def _tied_lm(tie_weights=True, soft_cap=None):
    keras.utils.set_random_seed(0)
    ids = keras.Input((T,), dtype="int32")
    embedding = keras.layers.ReversibleEmbedding(VOCAB, D, tie_weights=tie_weights, logit_soft_cap=soft_cap)
    h = keras.layers.Dense(D, activation="tanh")(embedding(ids))
    h = keras.layers.LayerNormalization()(h)
    return keras.Model(ids, embedding(h, reverse=True))


def _tokens(rows=6, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, VOCAB, (rows, T)).astype(np.int32)
    ids[:, :2] = ids[:, 2:4]  # repeated ids inside a record: the equal-id terms of the lookup's norm
    return ids, rng.integers(0, VOCAB, (rows, T)).astype(np.int32)


@NEEDS_REVERSIBLE
@pytest.mark.parametrize("tie_weights, soft_cap", [(True, None), (True, 3.0), (False, None)])
def test_a_causal_lm_with_tied_embeddings_clips_exactly_on_the_ghost_norm_path(tie_weights, soft_cap):
    x, y = _tokens()
    _check_exact(_tied_lm(tie_weights, soft_cap), SPARSE, x, y)


@NEEDS_REVERSIBLE
def test_tied_embeddings_are_exact_for_groups_of_rows():
    x, y = _tokens(rows=8, seed=1)
    _check_exact(_tied_lm(), SPARSE, x, y, k=2)


def test_a_layer_called_twice_and_a_layer_shared_across_depth_clip_exactly():
    keras.utils.set_random_seed(1)
    inputs = keras.Input((5, 4))
    shared = keras.layers.Dense(4, activation="tanh")
    attention = keras.layers.MultiHeadAttention(2, 3)
    norm = keras.layers.LayerNormalization()
    h = inputs
    for _ in range(3):  # ALBERT's scheme: one block's weights at every depth
        h = norm(h + attention(h, h))
        h = shared(h)
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.GlobalAveragePooling1D()(h)))
    rng = np.random.default_rng(2)
    x = rng.normal(size=(6, 5, 4)).astype(np.float32)
    _check_exact(model, CATEGORICAL, x, keras.utils.to_categorical(rng.integers(0, 3, 6), 3))


def test_one_encoder_applied_to_two_inputs_clips_exactly():
    keras.utils.set_random_seed(2)
    encoder = keras.Sequential([keras.Input((T,), dtype="int32"), keras.layers.Embedding(VOCAB, D),
                                keras.layers.GlobalAveragePooling1D(), keras.layers.Dense(D, activation="tanh")])
    a, b = keras.Input((T,), dtype="int32"), keras.Input((T,), dtype="int32")
    model = keras.Model([a, b], keras.layers.Dense(2)(keras.layers.Concatenate()([encoder(a), encoder(b)])))
    x1, _ = _tokens(seed=3)
    x2, _ = _tokens(seed=4)
    y = keras.utils.to_categorical(np.arange(6) % 2, 2)
    _check_exact(model, CATEGORICAL, [x1, x2], y)


class Scale(keras.layers.Layer):
    """A layer the registry does not know (handled alone), called twice below."""

    def build(self, shape):
        self.w = self.add_weight(shape=(shape[-1],), initializer="ones")

    def call(self, x):
        return x * self.w


def test_a_layer_without_cross_terms_is_handled_alone_and_stays_exact():
    keras.utils.set_random_seed(3)
    inputs = keras.Input((4,))
    scale = Scale()
    conv_input = keras.layers.Reshape((4, 1))(scale(scale(inputs)))
    conv = keras.layers.Conv1D(2, 2)  # a registered rule without parts, called twice: demoted to alone
    h = keras.layers.Flatten()(conv(keras.layers.ZeroPadding1D((0, 1))(conv(conv_input))[:, :, :1]))
    model = keras.Model(inputs, keras.layers.Dense(2)(h))
    rng = np.random.default_rng(4)
    _check_exact(model, CATEGORICAL, rng.normal(size=(6, 4)).astype(np.float32),
                 keras.utils.to_categorical(np.arange(6) % 2, 2), alone=(scale.name, conv.name))


def test_the_cross_terms_equal_the_norm_of_the_materialised_sum():
    """Ids against ids, ids against a dense left, dense against dense: the ghost blocks against the sum of the
    materialised gradients, with ghost and materialised choices both taken."""
    rng = np.random.default_rng(5)
    rows, m, n = 3, 40, 30
    ids = tf.constant(rng.integers(0, m, (rows, 4)), tf.int32)
    lookup = Outer(tf.constant(rng.normal(size=(rows, 4, n)), tf.float32), ids=ids, width=m)
    dense = Outer(tf.constant(rng.normal(size=(rows, 3, n)), tf.float32),
                  left=tf.constant(rng.normal(size=(rows, 3, m)), tf.float32))
    parts = [lookup, dense, lookup]
    want = np.sum(np.square(sum(materialise(p, (m, n)).numpy().astype(np.float64) for p in parts)), axis=(1, 2))
    np.testing.assert_allclose(shared_sq_norms(parts, (m, n))[0].numpy(), want, rtol=1e-5)  # 11 positions: ghost
    wide = [Outer(tf.tile(p.right, [1, 8, 1]), left=None if p.left is None else tf.tile(p.left, [1, 8, 1]),
                  ids=None if p.ids is None else tf.tile(p.ids, [1, 8]), width=p.width) for p in parts]
    want = np.sum(np.square(sum(materialise(p, (m, n)).numpy().astype(np.float64) for p in wide)), axis=(1, 2))
    np.testing.assert_allclose(shared_sq_norms(wide, (m, n))[0].numpy(), want, rtol=1e-5)  # 88 positions: materialised
    with row_groups(3):  # the three rows as one unit
        grouped = shared_sq_norms(parts + [Rows(materialise(dense, (m, n)))], (m, n))[0].numpy()
    total = sum(materialise(p, (m, n)).numpy().astype(np.float64) for p in parts + [dense]).sum(axis=0)
    np.testing.assert_allclose(grouped, [np.sum(np.square(total))], rtol=1e-5)


@NEEDS_REVERSIBLE
def test_a_tensor_reverse_flag_is_refused_naming_it():
    class Reverses(keras.Model):
        def __init__(self):
            super().__init__()
            self.embedding = keras.layers.ReversibleEmbedding(VOCAB, D)

        def call(self, ids):
            return self.embedding(self.embedding(ids), reverse=tf.constant(True))

    model = Reverses()
    x, y = _tokens()
    model(x)
    with pytest.raises(ValueError, match="reverse must be a Python bool"):
        clipped_gradient_sum(model, per_example_loss(SPARSE), x, y, np.ones(6, np.float32), 1.0, "fast_clipping")
