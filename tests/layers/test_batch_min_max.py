"""BatchMinMax: per-unit batch min-max in training, moving statistics at inference."""

from __future__ import annotations

import numpy as np
import pytest

from tfdpmech.layers import BatchMinMax


def _np(t):
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


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
    np.testing.assert_allclose(out, (x - lo) / np.maximum(hi - lo, 1e-7), rtol=1e-6, atol=1e-7)
    assert out.min() >= 0.0 and out.max() <= 1.0
    np.testing.assert_allclose(out.min(axis=0), 0.0, atol=1e-7)
    np.testing.assert_allclose(out.max(axis=0), 1.0, atol=1e-4)  # per unit, whatever its range


def test_batch_min_max_hand_computed():
    x = np.array([[1.0, 2.0], [3.0, 2.0], [2.0, 2.0]], dtype=np.float32)
    out = _np(BatchMinMax(epsilon=1e-7)(x, training=True))
    # unit 0: (x - 1) / (3 - 1); unit 1 is constant: (2 - 2) / max(0, ε) = 0, not NaN
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


@pytest.mark.parametrize("training", [True, False])
def test_batch_min_max_constant_unit_guard_holds_in_a_traced_function(training):
    """``model.fit`` and ``predict`` trace the layer: a unit constant over the batch at 46.8 (above 1,
    where ε = 1e-7 is below the float32 spacing) must still give 0, not 0/0 = NaN."""
    import tensorflow as tf

    x = np.zeros((8, 3), np.float32)
    x[:, 0], x[:, 1], x[:, 2] = 46.83475, np.arange(8), 7.0
    layer = BatchMinMax()
    layer(x, training=True)  # moving statistics: unit 0 and unit 2 have max == min
    out = _np(tf.function(lambda t: layer(t, training=training))(tf.constant(x)))
    assert np.all(np.isfinite(out)), out
    np.testing.assert_array_equal(out[:, [0, 2]], 0.0)
    np.testing.assert_allclose(out[:, 1], np.arange(8) / 7.0, rtol=1e-6)


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
    np.testing.assert_allclose(out1, (row[0] - mn) / np.maximum(mx - mn, 1e-7), rtol=1e-6)
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
