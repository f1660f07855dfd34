"""Batch normalisation under DP-SGD: a trainable one is refused naming both fixes; a frozen one trains;
replace_batch_norm swaps trainable ones for GroupNormalization, keeping every other weight."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tfdpmech import DPSGD, make_private
from tfdpmech.mechanisms.dpsgd import replace_batch_norm
from tfdpmech.mechanisms.dpsgd.clipping.batch_norm import group_count

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _run():
    return DPSGD(epsilon=1, delta=1e-5, n=64, expected_batch_size=16, epochs=1)


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(64, 8, 8, 1)).astype(np.float32), rng.integers(0, 3, 64)


def _cnn(channels=4):
    """A small Conv2D + BatchNormalization CNN whose weights are not the initial ones (so a copy is seen)."""
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(channels, 3, name="conv"),
                              keras.layers.BatchNormalization(name="bn"), keras.layers.ReLU(),
                              keras.layers.Flatten(), keras.layers.Dense(3, name="head")])
    rng = np.random.default_rng(1)
    model.set_weights([rng.uniform(0.5, 1.5, w.shape).astype(np.float32) for w in model.get_weights()])
    return model


def _trains(model):
    """make_private + compile + fit on random data; the weights that moved, by variable identity."""
    x, y = _data()
    private = make_private(model, _run())
    private.compile(loss=LOSS)
    before = {id(v): v.numpy().copy() for v in private.variables}
    private.fit(x, y, verbose=0)
    assert len(private.privacy_ledger) == 1 and private.privacy_ledger.releases[0].guarantee == "proven"
    return {id(v) for v in private.variables if not np.array_equal(before[id(v)], v.numpy())}


# --- the refusal ------------------------------------------------------------------------------------------------
def test_a_trainable_batch_norm_is_refused_naming_both_fixes_before_the_release():
    private = make_private(_cnn(), _run())
    with pytest.raises(ValueError) as info:
        private.compile(loss=LOSS)
    message = str(info.value)
    assert "layer 'bn' (BatchNormalization) mixes the examples of a batch" in message
    assert "model.get_layer('bn').trainable = False" in message  # fix 1, for the layer at hand
    assert "a frozen BatchNormalization runs in inference mode with its moving statistics" in message
    assert "tfdpmech.replace_batch_norm(model)" in message  # fix 2
    assert len(private.privacy_ledger) == 0


def test_a_nested_trainable_batch_norm_is_refused_with_both_fixes_and_no_top_level_example():
    inner = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4), keras.layers.BatchNormalization(name="deep")])
    private = make_private(keras.Sequential([keras.Input((4,)), inner, keras.layers.Dense(2)]), _run())
    with pytest.raises(ValueError, match="layer 'deep'") as info:
        private.compile(loss=LOSS)
    message = str(info.value)
    assert "layer.trainable = False" in message and "tfdpmech.replace_batch_norm(model)" in message
    assert "get_layer" not in message  # get_layer finds top-level layers only
    assert len(private.privacy_ledger) == 0


# --- fix 1: freeze ----------------------------------------------------------------------------------------------
def test_a_frozen_batch_norm_is_accepted_and_the_model_trains_with_its_moving_statistics_fixed():
    model = _cnn()
    bn = model.get_layer("bn")
    bn.trainable = False
    statistics = [bn.moving_mean.numpy().copy(), bn.moving_variance.numpy().copy()]
    moved = _trains(model)
    assert {id(v) for v in model.get_layer("conv").trainable_variables} <= moved
    assert {id(v) for v in model.get_layer("head").trainable_variables} <= moved
    np.testing.assert_array_equal(bn.moving_mean.numpy(), statistics[0])  # inference mode: never updated
    np.testing.assert_array_equal(bn.moving_variance.numpy(), statistics[1])


# --- fix 2: replace_batch_norm ----------------------------------------------------------------------------------
def test_replace_batch_norm_gives_group_norm_keeps_the_other_weights_and_trains(capsys):
    model = _cnn()
    new = replace_batch_norm(model)
    assert "bn (BatchNormalization) -> bn_group_norm (GroupNormalization, groups=4)" in capsys.readouterr().out
    assert new is not model and new.replaced_batch_norm == [("bn", "bn_group_norm", 4)]
    norm = new.get_layer("bn_group_norm")
    assert isinstance(norm, keras.layers.GroupNormalization) and norm.groups == 4
    assert norm.axis in (-1, 3)  # the channel axis of the BatchNormalization
    assert not any(isinstance(layer, keras.layers.BatchNormalization) for layer in new.layers)
    old_bn = model.get_layer("bn")
    np.testing.assert_array_equal(norm.gamma.numpy(), old_bn.gamma.numpy())
    np.testing.assert_array_equal(norm.beta.numpy(), old_bn.beta.numpy())
    for name in ("conv", "head"):
        for a, b in zip(new.get_layer(name).get_weights(), model.get_layer(name).get_weights()):
            np.testing.assert_array_equal(a, b)
    assert isinstance(model.get_layer("bn"), keras.layers.BatchNormalization)  # the original is left as it was
    # each record is normalised on its own: its output does not depend on the rest of the batch
    x, _ = _data()
    np.testing.assert_allclose(new(x[:1], training=True), new(x[:5], training=True)[:1], rtol=1e-5, atol=1e-5)
    moved = _trains(new)
    assert {id(v) for v in new.trainable_variables} <= moved


def test_functional_models_nested_models_and_frozen_layers():
    inputs = keras.Input((8, 8, 1))
    h = keras.layers.Conv2D(48, 3)(inputs)
    h = keras.layers.BatchNormalization(name="wide", center=False)(h)
    inner = keras.Sequential([keras.Input((6, 6, 48)), keras.layers.Conv2D(64, 1),
                              keras.layers.BatchNormalization(name="inner_bn")], name="inner")
    frozen = keras.layers.BatchNormalization(name="frozen")
    h = frozen(inner(h))
    frozen.trainable = False
    frozen.moving_mean.assign(np.full(64, 0.25, np.float32))
    out = keras.layers.Dense(3)(keras.layers.BatchNormalization(name="flat")(keras.layers.Dense(5)(
        keras.layers.Flatten()(h))))
    model = keras.Model(inputs, out)
    new = replace_batch_norm(model, verbose=False)
    # 48 channels: 24 groups; 64: 32; one value per channel after Dense(5): one group (a group of one value is 0)
    assert new.replaced_batch_norm == [("wide", "wide_group_norm", 24), ("inner_bn", "inner_bn_group_norm", 32),
                                       ("flat", "flat_group_norm", 1)]
    assert new.get_layer("wide_group_norm").beta is None  # center=False is kept
    inner_new = new.get_layer("inner")
    assert inner_new is not inner and isinstance(inner_new.layers[-1], keras.layers.GroupNormalization)
    np.testing.assert_array_equal(inner_new.layers[0].get_weights()[0], inner.layers[0].get_weights()[0])
    kept = new.get_layer("frozen")
    assert isinstance(kept, keras.layers.BatchNormalization) and not kept.trainable
    np.testing.assert_array_equal(kept.moving_mean.numpy(), np.full(64, 0.25, np.float32))
    x = np.random.default_rng(0).normal(size=(2, 8, 8, 1)).astype(np.float32)
    assert new.predict(x, verbose=0).shape == (2, 3)


def test_the_default_groups_are_the_largest_divisor_up_to_32_leaving_more_than_one_value():
    assert [group_count(c, 36) for c in (1, 4, 32, 48, 64, 96, 100)] == [1, 4, 32, 24, 32, 32, 25]
    assert [group_count(c, 1) for c in (2, 5, 16, 64)] == [1, 1, 8, 32]  # after a Dense: pairs at least
    assert group_count(16, None) == 16  # unknown spatial size: the channel count decides
    with pytest.raises(ValueError, match="normalise single values"):
        group_count(1, 1)


# --- refusals ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("groups, exc, words", [
    (3, ValueError, r"groups=3 must divide the channels: layer 'bn' has 4 channels; pass one of \[1, 2, 4\]"),
    (0, ValueError, "groups must be >= 1"),
    ("4", TypeError, "groups must be an int or None"),
    (True, TypeError, "groups must be an int or None"),
])
def test_a_bad_groups_is_refused_naming_groups(groups, exc, words):
    model = _cnn()
    with pytest.raises(exc, match=words):
        replace_batch_norm(model, groups=groups)
    assert isinstance(model.get_layer("bn"), keras.layers.BatchNormalization)


def test_groups_that_leave_single_values_are_refused():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4), keras.layers.BatchNormalization(name="bn"),
                              keras.layers.Dense(2)])
    with pytest.raises(ValueError, match=r"groups=4: layer 'bn' has 4 channels and one value per channel"):
        replace_batch_norm(model, groups=4)
    assert replace_batch_norm(model, groups=2, verbose=False).replaced_batch_norm == [("bn", "bn_group_norm", 2)]


def test_groups_of_few_values_get_a_suggestion_to_compare_one_group(capsys):
    """A 1×1 map of 64 channels in 32 groups: 2 values a group; 8×8 maps of 4 channels: 64 values a group."""
    tiny = keras.Sequential([keras.Input((1, 1, 8)), keras.layers.Conv2D(64, 1),
                             keras.layers.BatchNormalization(name="tiny_bn"), keras.layers.Flatten(),
                             keras.layers.Dense(2)])
    replace_batch_norm(tiny)
    printed = capsys.readouterr().out
    assert "1 replacement(s) normalise fewer than 16 values per group (e.g. 'tiny_bn_group_norm'" in printed
    assert "groups=1" in printed
    replace_batch_norm(tiny, groups=1)  # 64 values in one group
    assert "fewer than" not in capsys.readouterr().out
    replace_batch_norm(_cnn())
    assert "fewer than" not in capsys.readouterr().out


class _Subclassed(keras.Model):
    def __init__(self):
        super().__init__(name="sub")
        self.conv, self.bn = keras.layers.Conv2D(4, 3), keras.layers.BatchNormalization()
        self.head = keras.layers.Dense(3)

    def call(self, x, training=None):
        return self.head(keras.layers.Flatten()(self.bn(self.conv(x), training=training)))


def test_a_subclassed_model_is_refused_naming_the_fix():
    model = _Subclassed()
    model(np.zeros((1, 8, 8, 1), np.float32))  # built by a call
    with pytest.raises(ValueError, match=r"model 'sub' is a subclassed _Subclassed.*keras\.layers\.GroupNormalization"
                                         r".*layer\.trainable = False"):
        replace_batch_norm(model)


class _HoldsBatchNorm(keras.layers.Layer):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.norm = keras.layers.BatchNormalization(name="held")

    def call(self, x, training=None):
        return self.norm(x, training=training)


@pytest.mark.parametrize("wrapper", ["time_distributed", "custom_layer"])
def test_a_batch_norm_inside_a_layer_that_cannot_be_rebuilt_is_refused(wrapper):
    if wrapper == "time_distributed":
        model = keras.Sequential([keras.Input((3, 4)), keras.layers.TimeDistributed(
            keras.layers.BatchNormalization(name="held"), name="outer"), keras.layers.Flatten(), keras.layers.Dense(2)])
    else:
        model = keras.Sequential([keras.Input((4,)), _HoldsBatchNorm(name="outer"), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match=r"layer 'held' \(BatchNormalization\) sits inside layer 'outer'.*cannot "
                                         r"rebuild.*layer\.trainable = False"):
        replace_batch_norm(model)


def test_not_a_model_unbuilt_and_bad_verbose_are_refused():
    with pytest.raises(TypeError, match="model must be a keras.Model, got BatchNormalization"):
        replace_batch_norm(keras.layers.BatchNormalization())
    with pytest.raises(ValueError, match="not built"):
        replace_batch_norm(keras.Sequential([keras.layers.Dense(2), keras.layers.BatchNormalization()]))
    with pytest.raises(TypeError, match="verbose must be True or False"):
        replace_batch_norm(_cnn(), verbose="yes")


def test_without_a_trainable_batch_norm_the_copy_says_so(capsys):
    model = _cnn()
    model.get_layer("bn").trainable = False
    new = replace_batch_norm(model)
    assert "has no trainable BatchNormalization" in capsys.readouterr().out
    assert new.replaced_batch_norm == [] and isinstance(new.get_layer("bn"), keras.layers.BatchNormalization)
    for a, b in zip(new.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
