"""Tests for tfdpmech.layers: BoundedLRN, BatchMinMax, UnitClip, PerturbedBias, InputNoise.

Each layer: its formula on hand-computed values, its bounds, its errors, get_config/from_config,
and a model holding all of them survives a ``.keras`` round trip.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfdpmech  # noqa: F401  (registers the custom objects for load_model)
from tfdpmech.layers import BatchMinMax, BoundedLRN, InputNoise, PerturbedBias, UnitClip

Q, ALPHA, BETA = 2.0, 1e-4, 0.75


def _np(t):
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


def _lrn_reference(h, q=Q, size=5, alpha=ALPHA, beta=BETA):
    """Eq. 22 written loop by loop over channels (channels last)."""
    h = np.asarray(h, dtype=np.float64)
    n = h.shape[-1]
    half = size // 2
    out = np.empty_like(h)
    for k in range(n):
        lo, hi = max(0, k - half), min(n - 1, k + half)
        s = np.sum(h[..., lo : hi + 1] ** 2, axis=-1)
        out[..., k] = h[..., k] / np.maximum(h[..., k], (q + alpha * s) ** beta)
    return out


# ------------------------------------------------------------------------------------------------
# BoundedLRN (AdLM Eq. 22)
# ------------------------------------------------------------------------------------------------


def test_bounded_lrn_hand_computed_five_channels():
    h = np.array([[0.5, 100.0, 1.0, 200.0, 0.25]], dtype=np.float32)
    # window of channel k: k-2..k+2 clipped to 0..4; the sum is NOT divided by size=5
    expected = [
        0.5 / (2 + 1e-4 * (0.5**2 + 100**2 + 1.0**2)) ** 0.75,  # 0.5 / 3.000125^0.75 = 0.219339
        1.0,  # 100 > (2 + 1e-4·50001.25)^0.75 = 4.30: the max(h, ·) branch
        1.0 / (2 + 1e-4 * (0.5**2 + 100**2 + 1.0**2 + 200**2 + 0.25**2)) ** 0.75,  # 1 / 7.00013^0.75
        1.0,  # 200 > (2 + 1e-4·50001.06)^0.75
        0.25 / (2 + 1e-4 * (1.0**2 + 200**2 + 0.25**2)) ** 0.75,  # 0.25 / 6.00011^0.75
    ]
    np.testing.assert_allclose(expected, [0.219339, 1.0, 0.232365, 1.0, 0.065211], atol=1e-6)
    out = _np(BoundedLRN()(h))
    assert out.shape == (1, 5)
    np.testing.assert_allclose(out[0], expected, rtol=1e-5)
    # the same numbers with the AlexNet-default values passed explicitly
    np.testing.assert_allclose(_np(BoundedLRN(q=2, size=5, alpha=1e-4, beta=0.75)(h)), out, rtol=1e-6)
    # dividing the sum by size (the "alpha/size" convention of some frameworks) would give 0.2768
    alpha_over_size = 0.5 / (2 + 1e-4 / 5 * 10001.25) ** 0.75
    assert abs(out[0, 0] - alpha_over_size) > 0.05


def test_bounded_lrn_hand_computed_seven_channels_window_edges():
    # big values at the two ends: they are inside the windows of channels 1, 2 (resp. 4, 5) only
    h = np.array([[300.0, 0.5, 1.0, 0.8, 1.5, 0.3, 400.0]], dtype=np.float32)
    sq = h[0].astype(np.float64) ** 2
    expected = np.array([
        1.0,  # 300 > (2 + 1e-4·(300²+0.5²+1²))^0.75 = 6.04
        0.5 / (2 + 1e-4 * (sq[0] + sq[1] + sq[2] + sq[3])) ** 0.75,  # channels 0..3
        1.0 / (2 + 1e-4 * (sq[0] + sq[1] + sq[2] + sq[3] + sq[4])) ** 0.75,  # 0..4
        0.8 / (2 + 1e-4 * (sq[1] + sq[2] + sq[3] + sq[4] + sq[5])) ** 0.75,  # 1..5: neither end
        1.5 / (2 + 1e-4 * (sq[2] + sq[3] + sq[4] + sq[5] + sq[6])) ** 0.75,  # 2..6
        0.3 / (2 + 1e-4 * (sq[3] + sq[4] + sq[5] + sq[6])) ** 0.75,  # 3..6
        1.0,
    ])
    np.testing.assert_allclose(expected, [1.0, 0.082779, 0.165555, 0.475607, 0.171644, 0.034329, 1.0], atol=1e-6)
    # channel 3's window must exclude channels 0 and 6: with them the value would be 0.0675
    assert expected[3] > 0.4 and abs(0.8 / (2 + 1e-4 * sq.sum()) ** 0.75 - 0.067540) < 1e-6
    out = _np(BoundedLRN()(h))
    np.testing.assert_allclose(out[0], expected, rtol=1e-5)


def test_bounded_lrn_conv_shaped_input_matches_loop_reference():
    rng = np.random.default_rng(0)
    h = (rng.random((2, 3, 2, 7)) * 10.0 ** rng.uniform(-1, 3, size=(2, 3, 2, 7))).astype(np.float32)
    out = _np(BoundedLRN()(h))
    assert out.shape == h.shape
    np.testing.assert_allclose(out, _lrn_reference(h), rtol=1e-5, atol=1e-7)
    # a window of 3 and other constants follow the same formula
    layer = BoundedLRN(q=1.0, size=3, alpha=0.01, beta=0.5)
    np.testing.assert_allclose(_np(layer(h)), _lrn_reference(h, q=1.0, size=3, alpha=0.01, beta=0.5),
                               rtol=1e-5, atol=1e-7)


def test_bounded_lrn_fewer_channels_than_window():
    h = np.array([[3.0, 0.5]], dtype=np.float32)
    expected = [1.0, 0.5 / (2 + 1e-4 * 9.25) ** 0.75]
    np.testing.assert_allclose(_np(BoundedLRN()(h))[0], expected, rtol=1e-6)


def test_bounded_lrn_output_in_unit_interval_for_non_negative_inputs():
    rng = np.random.default_rng(1)
    mags = 10.0 ** rng.uniform(-4, 8, size=(6, 4, 4, 9))
    h = rng.random((6, 4, 4, 9)) * mags
    h[0, 0, 0, :] = 0.0  # zeros
    h[1, 0, 0, :] = 1e4  # the max(h, ·) branch in every channel
    h[2, 0, 0, :] = 1e19  # h² overflows float32: still finite and bounded
    h = h.astype(np.float32)
    out = _np(BoundedLRN()(h))
    assert np.all(np.isfinite(out))
    assert out.min() >= 0.0 and out.max() <= 1.0
    np.testing.assert_array_equal(out[0, 0, 0], 0.0)
    np.testing.assert_array_equal(out[1, 0, 0], 1.0)  # (2 + 1e-4·5e8)^0.75 = 3343 < 1e4
    assert np.sum(out == 1.0) > 100  # the max(h, ·) branch triggered for large inputs
    assert np.sum(out < 0.5) > 100  # and the LRN branch for small ones


def test_bounded_lrn_constructor_errors():
    with pytest.raises(ValueError, match="q must be > 0"):
        BoundedLRN(q=0.0)
    with pytest.raises(ValueError, match="alpha must be >= 0 and beta > 0"):
        BoundedLRN(alpha=-1e-4)
    with pytest.raises(ValueError, match="alpha must be >= 0 and beta > 0"):
        BoundedLRN(beta=0.0)
    with pytest.raises(ValueError, match="size must be >= 1"):
        BoundedLRN(size=0)
    with pytest.raises(TypeError, match="size must be an integer"):
        BoundedLRN(size=2.5)


# ------------------------------------------------------------------------------------------------
# BatchMinMax
# ------------------------------------------------------------------------------------------------


def _batch(seed=0, n=6):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, 4)) * [1.0, 10.0, 0.01, 100.0] + [0.0, 5.0, -3.0, 50.0]).astype(np.float32)


def test_batch_min_max_training_maps_each_unit_onto_unit_interval():
    x = _batch()
    layer = BatchMinMax()
    out = _np(layer(x, training=True))
    lo, hi = x.min(axis=0), x.max(axis=0)
    np.testing.assert_allclose(out, (x - lo) / (hi - lo + 1e-7), rtol=1e-5, atol=1e-6)
    assert out.min() >= 0.0 and out.max() <= 1.0
    np.testing.assert_allclose(out.min(axis=0), 0.0, atol=1e-7)
    np.testing.assert_allclose(out.max(axis=0), 1.0, atol=1e-4)  # per unit, whatever its range


def test_batch_min_max_hand_computed():
    x = np.array([[1.0, 2.0], [3.0, 2.0], [2.0, 2.0]], dtype=np.float32)
    out = _np(BatchMinMax(epsilon=1e-7)(x, training=True))
    # unit 0: (x - 1) / (3 - 1); unit 1 is constant: (2 - 2) / (0 + ε) = 0, not NaN
    np.testing.assert_allclose(out, [[0.0, 0.0], [1.0, 0.0], [0.5, 0.0]], atol=1e-6)


def test_batch_min_max_constant_unit_guard():
    x = np.full((5, 3), 7.0, dtype=np.float32)
    x[:, 1] = np.arange(5)
    out = _np(BatchMinMax()(x, training=True))
    assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(out[:, 0], 0.0)
    np.testing.assert_array_equal(out[:, 2], 0.0)
    # a single-example batch is constant in every unit
    out1 = _np(BatchMinMax()(x[:1], training=True))
    np.testing.assert_array_equal(out1, 0.0)


def test_batch_min_max_first_update_sets_stats_from_data_then_averages():
    layer = BatchMinMax(momentum=0.99)
    a, b = _batch(1), _batch(2)
    layer(a, training=True)
    np.testing.assert_allclose(_np(layer.moving_min), a.min(axis=0), rtol=1e-6)
    np.testing.assert_allclose(_np(layer.moving_max), a.max(axis=0), rtol=1e-6)
    assert float(_np(layer.steps)) == 1.0
    layer(b, training=True)
    # second update: rate max(1 - 0.99, 1/2) = 1/2, the mean of the two batches' extremes
    np.testing.assert_allclose(_np(layer.moving_min), (a.min(0) + b.min(0)) / 2, rtol=1e-5)
    np.testing.assert_allclose(_np(layer.moving_max), (a.max(0) + b.max(0)) / 2, rtol=1e-5)
    assert float(_np(layer.steps)) == 2.0
    assert not layer.moving_min.trainable and not layer.moving_max.trainable
    assert layer.trainable_weights == []


def test_batch_min_max_late_updates_use_momentum():
    layer = BatchMinMax(momentum=0.5)
    a, b = _batch(3), _batch(4)
    layer(a, training=True)
    layer(b, training=True)  # rate max(0.5, 1/2) = 0.5
    layer(a, training=True)  # rate max(0.5, 1/3) = 0.5
    m2 = (a.min(0) + b.min(0)) / 2
    np.testing.assert_allclose(_np(layer.moving_min), m2 + 0.5 * (a.min(0) - m2), rtol=1e-5)


def test_batch_min_max_inference_uses_moving_stats_only():
    layer = BatchMinMax()
    x = _batch(5, n=8)
    layer(x, training=True)
    mn, mx = _np(layer.moving_min).copy(), _np(layer.moving_max).copy()
    row = _batch(6, n=1)
    others1, others2 = _batch(7, n=3), _batch(8, n=5) * 50.0
    out1 = _np(layer(np.concatenate([row, others1]), training=False))[0]
    out2 = _np(layer(np.concatenate([row, others2]), training=False))[0]
    out3 = _np(layer(row, training=False))[0]
    np.testing.assert_array_equal(out1, out2)  # independent of the rest of the batch
    np.testing.assert_array_equal(out1, out3)
    np.testing.assert_allclose(out1, (row[0] - mn) / (mx - mn + 1e-7), rtol=1e-5)
    # inference does not move the statistics
    np.testing.assert_array_equal(_np(layer.moving_min), mn)
    np.testing.assert_array_equal(_np(layer.moving_max), mx)
    assert float(_np(layer.steps)) == 1.0


def test_batch_min_max_constructor_errors():
    for m in (1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="momentum must be in"):
            BatchMinMax(momentum=m)
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        BatchMinMax(epsilon=0.0)


# ------------------------------------------------------------------------------------------------
# UnitClip
# ------------------------------------------------------------------------------------------------


def test_unit_clip_bounds():
    x = np.array([[-2.0, -0.5, 0.0, 0.3, 1.0, 1.5]], dtype=np.float32)
    f32 = lambda v: np.array([v], dtype=np.float32)  # noqa: E731
    np.testing.assert_array_equal(_np(UnitClip()(x)), f32([0.0, 0.0, 0.0, 0.3, 1.0, 1.0]))
    np.testing.assert_array_equal(_np(UnitClip(-1.0, 1.0)(x)), f32([-1.0, -0.5, 0.0, 0.3, 1.0, 1.0]))
    np.testing.assert_array_equal(_np(UnitClip(0.25, 0.5)(x)), f32([0.25, 0.25, 0.25, 0.3, 0.5, 0.5]))
    big = np.random.default_rng(0).normal(size=(3, 4, 5)).astype(np.float32) * 1e4
    out = _np(UnitClip()(big))
    assert out.shape == big.shape and out.min() >= 0.0 and out.max() <= 1.0


@pytest.mark.parametrize("low, high", [(-2.0, 1.0), (0.0, 2.0), (0.5, 0.5), (0.8, 0.2), (-1.5, -1.2)])
def test_unit_clip_constructor_errors(low, high):
    with pytest.raises(ValueError, match=r"UnitClip needs -1 <= low < high <= 1.*low=.*high="):
        UnitClip(low, high)


# ------------------------------------------------------------------------------------------------
# PerturbedBias
# ------------------------------------------------------------------------------------------------


def test_perturbed_bias_adds_bias_times_b_bar():
    layer = PerturbedBias(b_bar=[2.0, 0.5, -1.0])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(_np(layer(x)), x)  # bias starts at zero
    layer.bias.assign([1.0, 2.0, 3.0])
    np.testing.assert_allclose(_np(layer(x)), x + [2.0, 1.0, -3.0])
    # conv-shaped inputs: per filter (last axis)
    x4 = np.zeros((1, 2, 2, 3), dtype=np.float32)
    np.testing.assert_allclose(_np(layer(x4)), np.broadcast_to([2.0, 1.0, -3.0], (1, 2, 2, 3)))
    # same at training and inference: b̄ is part of the learned function
    np.testing.assert_array_equal(_np(layer(x, training=True)), _np(layer(x, training=False)))


def test_perturbed_bias_b_bar_is_frozen():
    layer = PerturbedBias(b_bar=[1.5, 0.75])
    layer.build((None, 2))
    assert [w.name.split(":")[0].split("/")[-1] for w in layer.trainable_weights] == ["bias"]
    assert [w.name.split(":")[0].split("/")[-1] for w in layer.non_trainable_weights] == ["b_bar"]
    model = keras.Sequential([keras.Input((2,)), layer])
    model.compile(keras.optimizers.SGD(0.5), "mse")
    model.fit(np.zeros((4, 2), np.float32), np.ones((4, 2), np.float32), batch_size=4, epochs=2, verbose=0)
    np.testing.assert_array_equal(_np(layer.b_bar), [1.5, 0.75])
    assert np.all(_np(layer.bias) != 0.0)  # the bias itself trains


def test_perturbed_bias_default_and_errors():
    layer = PerturbedBias(units=3)
    out = _np(layer(np.zeros((1, 3), np.float32)))
    np.testing.assert_array_equal(_np(layer.b_bar), [1.0, 1.0, 1.0])  # no noise
    np.testing.assert_array_equal(out, 0.0)
    with pytest.raises(ValueError, match="b_bar must be finite"):
        PerturbedBias(b_bar=[1.0, np.nan])
    with pytest.raises(ValueError, match="units=3 does not match b_bar of size 2"):
        PerturbedBias(b_bar=[1.0, 2.0], units=3)
    with pytest.raises(ValueError, match="PerturbedBias has 2 units but its input has 3 channels"):
        PerturbedBias(b_bar=[1.0, 2.0])(np.zeros((1, 3), np.float32))


# ------------------------------------------------------------------------------------------------
# InputNoise
# ------------------------------------------------------------------------------------------------


def test_input_noise_is_identity_at_inference():
    layer = InputNoise(scales=np.full((2, 3), 5.0, np.float32), seed=0)
    x = np.random.default_rng(0).random((4, 2, 3)).astype(np.float32)
    np.testing.assert_array_equal(_np(layer(x, training=False)), x)
    np.testing.assert_array_equal(_np(layer(x)), x)
    model = keras.Sequential([keras.Input((2, 3)), layer])
    np.testing.assert_array_equal(model.predict(x, verbose=0), x)


def test_input_noise_shared_by_the_batch_and_fresh_each_training_call():
    layer = InputNoise(scales=np.ones(5, np.float32), seed=3)
    x = np.random.default_rng(1).random((4, 5)).astype(np.float32)
    n1 = _np(layer(x, training=True)) - x
    n2 = _np(layer(x, training=True)) - x
    # one draw per feature, shared by every example of the batch (the shared_per_step mode)
    np.testing.assert_allclose(n1, np.broadcast_to(n1[0], n1.shape), atol=1e-6)
    assert np.all(np.abs(n1[0] - n2[0]) > 1e-6)  # a new draw per call


def test_input_noise_fresh_each_call_inside_tf_function():
    layer = InputNoise(scales=np.ones(5, np.float32), seed=4)
    layer.build((None, 5))  # variables are created outside the traced function
    x = tf.zeros((2, 5))

    @tf.function
    def step(x):
        return layer(x, training=True)

    draws = [_np(step(x))[0] for _ in range(3)]
    assert step.experimental_get_tracing_count() == 1
    assert np.all(draws[0] != draws[1]) and np.all(draws[1] != draws[2]) and np.all(draws[0] != draws[2])


def test_input_noise_per_feature_scale():
    scales = np.repeat(np.array([[0.0], [0.5], [2.0]], np.float32), 4000, axis=1)  # 4000 draws per scale
    layer = InputNoise(scales=scales, seed=7)
    noise = _np(layer(np.zeros((1, 3, 4000), np.float32), training=True))[0]
    np.testing.assert_array_equal(noise[0], 0.0)
    mean_abs = np.abs(noise).mean(axis=1)
    # E|Lap(b)| = b, standard error b/sqrt(4000) = 1.6 %; tolerance 8 %
    np.testing.assert_allclose(mean_abs[1:], [0.5, 2.0], rtol=0.08)
    assert abs(noise[1].mean()) < 0.05 and abs(noise[2].mean()) < 0.2


def test_input_noise_seeds():
    x = np.zeros((1, 6), np.float32)
    a = _np(InputNoise(scales=np.ones(6), seed=11)(x, training=True))
    b = _np(InputNoise(scales=np.ones(6), seed=11)(x, training=True))
    np.testing.assert_array_equal(a, b)
    c = _np(InputNoise(scales=np.ones(6))(x, training=True))
    d = _np(InputNoise(scales=np.ones(6))(x, training=True))
    assert not np.array_equal(c, d)  # OS entropy


def test_input_noise_scales_are_a_frozen_weight():
    layer = InputNoise(scales=np.full(3, 0.5, np.float32), seed=0)
    layer.build((None, 3))
    assert layer.trainable_weights == []
    assert len(layer.non_trainable_weights) == 1
    np.testing.assert_array_equal(_np(layer.scales), [0.5, 0.5, 0.5])


def test_input_noise_errors():
    with pytest.raises(ValueError, match="scales must be finite and >= 0"):
        InputNoise(scales=[1.0, -0.5])
    with pytest.raises(ValueError, match="scales must be finite and >= 0"):
        InputNoise(scales=[1.0, np.inf])
    with pytest.raises(ValueError, match="pass scales"):
        InputNoise()
    with pytest.raises(ValueError, match=r"InputNoise scales have shape \(3,\), inputs \(4,\)"):
        InputNoise(scales=np.ones(3))(np.zeros((1, 4), np.float32), training=True)


# ------------------------------------------------------------------------------------------------
# serialisation
# ------------------------------------------------------------------------------------------------


def _layers_for_config():
    return [
        (BoundedLRN(q=1.5, size=3, alpha=2e-4, beta=0.5, name="lrn"), (2, 3, 3, 4)),
        (BatchMinMax(momentum=0.9, epsilon=1e-5, name="bmm"), (5, 4)),
        (UnitClip(-0.5, 0.75, name="clip"), (2, 4)),
        (PerturbedBias(b_bar=[1.1, 0.9, 1.3, 0.7], name="pbias"), (2, 4)),
        (InputNoise(scales=np.full((4,), 0.3, np.float32), seed=5, name="noise"), (2, 4)),
    ]


@pytest.mark.parametrize("index", range(5))
def test_get_config_from_config_round_trip(index):
    layer, shape = _layers_for_config()[index]
    x = np.random.default_rng(index).random(shape).astype(np.float32) * 3.0
    if isinstance(layer, BatchMinMax):
        layer(x, training=True)  # move the statistics away from their initial values
    else:
        layer(x)
    if isinstance(layer, PerturbedBias):
        layer.bias.assign([0.5, -0.5, 1.0, 2.0])
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
    clone(x)  # build
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(_np(clone(x, training=False)), _np(layer(x, training=False)), rtol=1e-6)
    # through the registry as well
    name = keras.saving.get_registered_name(type(layer))
    assert name == f"tfdpmech>{type(layer).__name__}"
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(again) is type(layer) and again.get_config() == config


def test_config_contents():
    cfg = BoundedLRN(q=1.5, size=3, alpha=2e-4, beta=0.5).get_config()
    assert (cfg["q"], cfg["size"], cfg["alpha"], cfg["beta"]) == (1.5, 3, 2e-4, 0.5)
    cfg = BatchMinMax(momentum=0.9, epsilon=1e-5).get_config()
    assert (cfg["momentum"], cfg["epsilon"]) == (0.9, 1e-5)
    cfg = UnitClip(-0.5, 0.75).get_config()
    assert (cfg["low"], cfg["high"]) == (-0.5, 0.75)
    cfg = PerturbedBias(b_bar=[1.0, 2.0]).get_config()
    assert cfg["units"] == 2 and "b_bar" not in cfg  # b̄ travels with the weights
    cfg = InputNoise(scales=np.ones((2, 3)), seed=9).get_config()
    assert cfg["seed"] == 9 and tuple(cfg["feature_shape"]) == (2, 3) and "scales" not in cfg


def _all_layers_model():
    inp = keras.Input((5, 5, 2))
    h = InputNoise(scales=np.full((5, 5, 2), 0.05, np.float32), seed=3, name="input_noise")(inp)
    h = keras.layers.Conv2D(4, 2, use_bias=False, name="conv")(h)
    h = PerturbedBias(b_bar=[1.2, 0.8, 1.05, 0.95], name="pbias")(h)
    h = keras.layers.ReLU()(h)
    h = BoundedLRN(name="lrn")(h)
    h = keras.layers.Flatten()(h)
    h = keras.layers.Dense(6, name="dense")(h)
    h = BatchMinMax(name="minmax")(h)
    h = UnitClip(name="clip")(h)
    out = keras.layers.Dense(3, use_bias=False, name="logits")(h)
    return keras.Model(inp, out)


def test_model_with_all_layers_survives_keras_file_round_trip(tmp_path):
    keras.utils.set_random_seed(0)
    model = _all_layers_model()
    rng = np.random.default_rng(0)
    x = rng.random((8, 5, 5, 2)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]
    model.compile(keras.optimizers.SGD(0.05), loss=tfdpmech.TaylorCrossEntropy(), metrics=[tfdpmech.taylor_accuracy])
    model.get_layer("pbias").bias.assign([0.1, -0.2, 0.3, 0.05])
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)  # moves BatchMinMax statistics, trains weights
    pred = model.predict(x, verbose=0)
    path = tmp_path / "all_layers.keras"
    model.save(path)
    loaded = keras.models.load_model(path)  # custom objects resolved through the registration
    kinds = {type(layer) for layer in loaded.layers}
    assert {InputNoise, PerturbedBias, BoundedLRN, BatchMinMax, UnitClip} <= kinds
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), pred)
    for a, b in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(_np(loaded.get_layer("pbias").b_bar), np.float32([1.2, 0.8, 1.05, 0.95]))
    np.testing.assert_array_equal(_np(loaded.get_layer("input_noise").scales), np.full((5, 5, 2), 0.05, np.float32))
    assert float(_np(loaded.get_layer("minmax").steps)) == 2.0


def test_bounded_lrn_fused_and_generic_paths_agree():
    """Rank-4 float32 inputs use TF's fused LRN (min(lrn, 1)); other ranks the explicit Eq. 22."""
    rng = np.random.default_rng(0)
    x = (rng.uniform(0, 3, size=(2, 3, 3, 7)) ** 4).astype(np.float32)  # some entries trigger max(h, .)
    layer = BoundedLRN()
    fused = layer(x).numpy()
    generic = layer(x.reshape(2, 9, 7)).numpy().reshape(x.shape)  # rank 3: band-matrix path
    np.testing.assert_allclose(fused, generic, rtol=2e-5, atol=1e-6)
    assert fused.max() == 1.0 and fused.min() >= 0
