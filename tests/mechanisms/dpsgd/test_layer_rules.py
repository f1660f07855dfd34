"""The layer registry: rules of one's own, layers handled alone, shared position ids, recurrent layers, and the
probe that demotes a rule that does not match — each against one gradient tape per record."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.mechanisms.dpsgd import LayerRule, register_layer_rule
from tfdpmech.mechanisms.dpsgd.clipping import clipped_gradient_sum, gradients, per_example_loss, resolve_clipping
from tfdpmech.mechanisms.dpsgd.clipping.ghost_norms import layer_paths
from tfdpmech.mechanisms.dpsgd.clipping.layer_rules import Tapped
from tfdpmech.mechanisms.dpsgd.clipping.layer_rules.registry import select_rows
from tfdpmech.mechanisms.dpsgd.runs.train_step import KERAS_3

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _exact(model, x, y):
    """Clipped sums and norms of the ghost-norm path equal one gradient tape per record (a padding row last).

    Both run as traced functions, as the train step runs them: TensorFlow's eager CPU kernel refuses some
    configurations its graph form runs (a DepthwiseConv2D with unequal strides, on some CPUs)."""
    rows = len(y)
    weights = np.array([1.0] * (rows - 1) + [0.0], np.float32)
    fn = per_example_loss(LOSS)

    def record_gradient(xi, yi):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(fn(yi, model(xi)))
        return gradients(tape, loss, model.trainable_variables)

    record_gradient = tf.function(record_gradient, autograph=False)
    per_record = [[g.numpy().astype(np.float64) for g in
                   record_gradient(tf.nest.map_structure(lambda t: t[i:i + 1], x), y[i:i + 1])] for i in range(rows)]
    norms = np.array([np.sqrt(sum(float(np.sum(g * g)) for g in grads)) for grads in per_record])
    clip = float(np.median(norms[:-1]))
    want = [sum(w * min(1.0, clip / n) * grads[k] for grads, w, n in zip(per_record, weights, norms))
            for k in range(len(model.trainable_variables))]
    got, _, got_norms = tf.function(lambda: clipped_gradient_sum(model, fn, x, y, weights, clip, "fast_clipping",
                                                                 training=False), autograph=False)()
    np.testing.assert_allclose(got_norms.numpy()[:-1], norms[:-1], rtol=1e-4)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-4, atol=1e-6)


class Scale(keras.layers.Layer):
    """``x ⊙ w``: one weight per feature, a layer the registry does not know."""

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones")

    def call(self, inputs):
        return inputs * self.w


class ScaleRule(LayerRule):
    family = "scale"

    def __init__(self, wrong=False):
        self.wrong = wrong

    def forward(self, layer, inputs, keep, args, kwargs):
        a = select_rows(keep, inputs)
        out = a * layer.w
        return Tapped(out, [(out, [layer.w])], {"a": a})

    def sq_norms(self, layer, saved, tap_grads):  # (B, d) inputs: record i's gradient is g_i ⊙ a_i
        factor = 2.0 if self.wrong else 1.0  # a wrong rule: the probe must catch it
        return factor * tf.reduce_sum(tf.square(tap_grads[0] * saved["a"]), axis=-1)


def _scale_model(seed=0):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((6,))
    h = keras.layers.Dense(5, activation="tanh")(inputs)
    h = Scale()(h)
    model = keras.Model(inputs, keras.layers.Dense(3)(h))
    model.layers[2].w.assign(np.linspace(0.5, 1.5, 5))
    return model


def _data(rows=7, features=6, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(rows, features)).astype(np.float32), rng.integers(0, classes, rows)


def test_register_layer_rule_refuses_what_is_not_a_layer_class_or_a_rule():
    with pytest.raises(TypeError, match="layer_class"):
        register_layer_rule(object, ScaleRule())
    with pytest.raises(TypeError, match="rule"):
        register_layer_rule(Scale, object())


def test_a_layer_without_a_rule_is_handled_alone_and_the_rest_stays_on_the_ghost_path():
    model = _scale_model()
    assert resolve_clipping(model, "auto") == "fast_clipping"
    paths = layer_paths(model)
    assert paths[model.layers[2].name] == "alone" and paths[model.layers[1].name] == "dense"
    _exact(model, *_data())


def test_a_rule_of_ones_own_is_used_and_a_wrong_one_is_demoted_to_alone():
    class OwnScale(Scale):
        pass

    class WrongScale(Scale):
        pass

    register_layer_rule(OwnScale, ScaleRule())
    register_layer_rule(WrongScale, ScaleRule(wrong=True))
    for cls, family in ((OwnScale, "scale"), (WrongScale, "alone")):
        keras.utils.set_random_seed(0)
        inputs = keras.Input((6,))
        model = keras.Model(inputs, keras.layers.Dense(3)(cls()(keras.layers.Dense(5, activation="tanh")(inputs))))
        assert resolve_clipping(model, "auto") == "fast_clipping"
        assert layer_paths(model)[model.layers[2].name] == family
        _exact(model, *_data())


@pytest.mark.skipif(not KERAS_3, reason="the position embedding uses keras.ops (Keras 3)")
def test_shared_position_ids_are_broadcast_per_record():
    from tfdpmech.models.architectures import PositionEmbedding

    keras.utils.set_random_seed(0)
    ids = keras.Input((6,), dtype="int32")
    x = PositionEmbedding(6, 4)(keras.layers.Embedding(11, 4)(ids))
    model = keras.Model(ids, keras.layers.Dense(3)(keras.layers.Flatten()(x)))
    assert resolve_clipping(model, "auto") == "fast_clipping"
    assert set(layer_paths(model).values()) == {"embedding", "dense"}
    rng = np.random.default_rng(1)
    _exact(model, rng.integers(0, 11, (7, 6)).astype(np.int32), rng.integers(0, 3, 7))


@pytest.mark.parametrize("layer, family", [
    (lambda: keras.layers.LSTM(5, return_sequences=True, go_backwards=True), "recurrent"),
    (lambda: keras.layers.GRU(5, return_sequences=True), "recurrent"),
    (lambda: keras.layers.SimpleRNN(5, go_backwards=True), "recurrent"),
    (lambda: keras.layers.GRU(5, reset_after=False), "alone"),  # the rule covers Keras's default GRU only
    (lambda: keras.layers.LSTM(5, use_bias=False), "recurrent"),
])
def test_recurrent_layers_are_exact(layer, family):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4, 3))
    recurrent = layer()
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Flatten()(recurrent(inputs))))
    assert resolve_clipping(model, "auto") == "fast_clipping"
    assert layer_paths(model)[recurrent.name] == family
    rng = np.random.default_rng(2)
    _exact(model, rng.normal(size=(7, 4, 3)).astype(np.float32), rng.integers(0, 3, 7))


def _skip_where_tensorflow_cannot_run(layer, shape):
    """Skip, naming TensorFlow's own refusal, where this machine's kernels cannot run ``layer`` (traced, on one
    record): TensorFlow's CPU DepthwiseConv2D takes unequal strides on some CPUs only."""
    try:
        tf.function(layer, autograph=False)(tf.zeros((1, *shape)))
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError) as exc:
        message = [line for line in str(exc).splitlines() if "implementation" in line or "support" in line]
        pytest.skip(f"TensorFlow cannot run {type(layer).__name__} {layer.get_config().get('strides')} on this "
                    f"machine: {(message or [type(exc).__name__])[0].strip()[:200]}")


_DEPTHWISE_2D = getattr(keras.layers, "DepthwiseConv2D")
_DEPTHWISE_1D = getattr(keras.layers, "DepthwiseConv1D", None)


@pytest.mark.parametrize("layer, shape", [
    (lambda: _DEPTHWISE_2D(3, strides=2, padding="same", depth_multiplier=2), (7, 6, 3)),  # records folded
    (lambda: _DEPTHWISE_2D((3, 2), padding="valid"), (7, 6, 3)),
    (lambda: _DEPTHWISE_2D(3, strides=(1, 2), padding="same"), (7, 6, 3)),  # unequal strides: from the patches
    (lambda: _DEPTHWISE_2D(3, dilation_rate=2, padding="same"), (7, 6, 3)),  # dilated: from the patches
    pytest.param(lambda: _DEPTHWISE_1D(3, strides=2, padding="same", depth_multiplier=2), (9, 3),
                 marks=pytest.mark.skipif(_DEPTHWISE_1D is None, reason="no DepthwiseConv1D on this Keras")),
])
def test_depthwise_convolutions_are_exact(layer, shape):
    keras.utils.set_random_seed(0)
    _skip_where_tensorflow_cannot_run(layer(), shape)
    inputs = keras.Input(shape)
    depthwise = layer()
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Flatten()(depthwise(inputs))))
    assert layer_paths(model)[depthwise.name] == "depthwise_convolution"
    rng = np.random.default_rng(3)
    _exact(model, rng.normal(size=(7, *shape)).astype(np.float32), rng.integers(0, 3, 7))


class OwnWeights(keras.Model):
    """A subclassed model whose own weights (a temperature and an offset) are read in its call, outside its layers."""

    def __init__(self):
        super().__init__()
        self.hidden, self.out = keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(3)
        self.temperature = self.add_weight(shape=(), initializer="ones", name="temperature")
        self.offset = self.add_weight(shape=(8,), initializer="zeros", name="offset")

    def call(self, inputs):
        return self.out(self.hidden(inputs) + self.offset) * self.temperature


def test_a_subclassed_models_own_weights_are_a_unit_of_their_own_on_the_ghost_path():
    keras.utils.set_random_seed(0)
    model = OwnWeights()
    model(np.zeros((1, 5), np.float32))
    assert resolve_clipping(model, "auto") == "fast_clipping"
    rng = np.random.default_rng(4)
    _exact(model, rng.normal(size=(7, 5)).astype(np.float32), rng.integers(0, 3, 7))


def test_an_embeddings_norm_is_the_same_by_pairs_of_positions_and_materialised():
    """A long sequence over a small table materialises the table gradient per record (P² > rows), a short one
    sums over pairs of positions: both give each record's (and each group's) squared norm."""
    from tfdpmech.mechanisms.dpsgd.clipping.layer_rules.embedding import lookup_sq_norms  # noqa: PLC0415
    from tfdpmech.mechanisms.dpsgd.clipping.layer_rules.groups import row_groups  # noqa: PLC0415

    rng = np.random.default_rng(0)
    ids = tf.constant(rng.integers(0, 6, (4, 9)), tf.int32)
    g = tf.constant(rng.normal(size=(4, 9, 3)), tf.float32)
    table = np.stack([np.stack([g.numpy()[i][ids.numpy()[i] == r].sum(axis=0) for r in range(6)]) for i in range(4)])
    for k in (1, 2):  # a record, or a group of two rows clipped as one unit: the rows' table gradients summed
        want = np.sum(np.square(table.reshape(4 // k, k, 6, 3).sum(axis=1)), axis=(1, 2))
        with row_groups(k):
            ghost = lookup_sq_norms({"ids": ids}, [g]).numpy()  # no width: pairs of positions
            materialised = lookup_sq_norms({"ids": ids}, [g], 6).numpy()  # 9² (18² for groups) > 6 rows
        np.testing.assert_allclose(ghost, want, rtol=1e-5)
        np.testing.assert_allclose(materialised, want, rtol=1e-5)


def test_a_rule_registered_by_name_needs_a_dotted_name_and_a_rule():
    from tfdpmech.mechanisms.dpsgd.clipping.layer_rules.registry import register_layer_rule_by_name  # noqa: PLC0415
    from tfdpmech.mechanisms.dpsgd.clipping.layer_rules import ALONE  # noqa: PLC0415

    with pytest.raises(TypeError, match="qualified_name must be a string 'module.ClassName', got 'Dense'"):
        register_layer_rule_by_name("Dense", ALONE)
    with pytest.raises(TypeError, match="rule must be a tfdpmech LayerRule instance, got str"):
        register_layer_rule_by_name("my.pkg.Layer", "alone")


@pytest.mark.skipif(not hasattr(keras.layers.Dense, "enable_lora"), reason="LoRA layers are Keras 3's")
def test_a_lora_layer_gets_the_lora_rule_through_its_flag_and_a_flag_rule_needs_a_name_and_a_rule():
    from tfdpmech.mechanisms.dpsgd.clipping.layer_rules import ALONE, registered_rule  # noqa: PLC0415
    from tfdpmech.mechanisms.dpsgd.clipping.layer_rules.lora import LORA  # noqa: PLC0415
    from tfdpmech.mechanisms.dpsgd.clipping.layer_rules.registry import register_flag_rule  # noqa: PLC0415

    layer = keras.layers.Dense(3)
    layer.build((None, 4))
    plain = registered_rule(layer)
    layer.enable_lora(2)
    assert plain is not None and plain is not LORA and registered_rule(layer) is LORA
    with pytest.raises(TypeError, match="flag must be an attribute name such as 'lora_enabled', got 'lora enabled'"):
        register_flag_rule("lora enabled", ALONE)
    with pytest.raises(TypeError, match="rule must be a tfdpmech LayerRule instance, got str"):
        register_flag_rule("lora_enabled", "alone")


@pytest.mark.parametrize("layer, shape", [
    (lambda: keras.layers.Conv2D(6, 3, padding="same", groups=3), (6, 5, 3)),  # two kernels per channel
    (lambda: keras.layers.Conv2D(3, (3, 2), strides=2, padding="valid", groups=3), (7, 6, 3)),
    (lambda: keras.layers.Conv1D(4, 3, padding="same", groups=4), (9, 4)),
])
def test_a_convolution_with_one_input_channel_per_group_is_exact_by_the_depthwise_norms(layer, shape):
    if not KERAS_3:
        pytest.skip("grouped convolutions on a CPU are Keras 3's (XLA)")
    keras.utils.set_random_seed(0)
    inputs = keras.Input(shape)
    grouped = layer()
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Flatten()(grouped(inputs))))
    assert layer_paths(model)[grouped.name] == "convolution"  # not handled alone
    rng = np.random.default_rng(4)
    _exact(model, rng.normal(size=(7, *shape)).astype(np.float32), rng.integers(0, 3, 7))


def test_other_groupings_are_handled_alone_and_stay_exact():
    if not KERAS_3:
        pytest.skip("grouped convolutions on a CPU are Keras 3's (XLA)")
    keras.utils.set_random_seed(0)
    inputs = keras.Input((5, 5, 4))
    grouped = keras.layers.Conv2D(4, 3, padding="same", groups=2)  # two input channels per group
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Flatten()(grouped(inputs))))
    assert layer_paths(model)[grouped.name] == "alone"
    rng = np.random.default_rng(5)
    _exact(model, rng.normal(size=(6, 5, 5, 4)).astype(np.float32), rng.integers(0, 3, 6))


def test_convnext_layer_scale_is_exact_and_convnext_tiny_has_no_layer_handled_alone():
    if not KERAS_3:
        pytest.skip("keras.applications ConvNeXt is Keras 3's here")
    from keras.src.applications.convnext import LayerScale

    keras.utils.set_random_seed(0)
    inputs = keras.Input((4, 4, 3))
    scale = LayerScale(0.5, 3)
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Flatten()(scale(inputs))))
    assert layer_paths(model)[scale.name] == "layer_scale"
    rng = np.random.default_rng(6)
    _exact(model, rng.normal(size=(6, 4, 4, 3)).astype(np.float32), rng.integers(0, 3, 6))
    convnext = keras.applications.ConvNeXtTiny(weights=None, input_shape=(32, 32, 3), classes=10)
    assert "alone" not in set(layer_paths(convnext).values())
