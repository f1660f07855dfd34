"""Token-level losses as Keras means them: with clipping off and no noise, the DP step's update is Keras's own.

A next-token loss has one value per position, weighted per position (keras-hub's ``sample_weight =
padding_mask[..., 1:]``). For each Keras reduction the DP step reduces a record's positions to its share of the
Keras loss (:func:`per_example_loss`) and divides by the run's divisor (:func:`step_divisor`); one SGD step is
compared with Keras's own ``train_on_batch`` of the same compiled loss, and padding positions never contribute.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tfdpmech import DPSGD, make_private
from tfdpmech.mechanisms.dpsgd.clipping.clipped_sums import keras_reduction
from tfdpmech.mechanisms.dpsgd.clipping.output_losses import per_record_loss
from tfdpmech.mechanisms.dpsgd.runs.train_step import install_dp_train_step, step_divisor
from tfdpmech.mechanisms.dpsgd.sampling.position_weights import with_position_weights

V, T, D, B = 11, 7, 6, 5
LR = 1e3  # a large step: the float32 rounding of the weights stays far below the update


def _lm(seed=0):
    keras.utils.set_random_seed(seed)
    ids = keras.Input((T,), dtype="int32")
    h = keras.layers.Dense(D, activation="tanh")(keras.layers.Embedding(V, D)(ids))
    return keras.Model(ids, keras.layers.Dense(V)(h))


def _batch(lengths, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, V, (B, T)).astype(np.int32)
    y = rng.integers(0, V, (B, T)).astype(np.int32)
    w = (np.arange(T)[None, :] < np.asarray(lengths)[:, None]).astype(np.float32)  # 0 on padding
    return x, y, w


def _keras_update(loss, x, y, w):
    model = _lm()
    before = [v.numpy().copy() for v in model.trainable_variables]
    model.compile(keras.optimizers.SGD(LR), loss=loss)
    model.train_on_batch(x, y, sample_weight=w)
    return [(b - v.numpy()) / LR for b, v in zip(before, model.trainable_variables)]


def _dp_update(loss, x, y, w):
    model = _lm()
    before = [v.numpy().copy() for v in model.trainable_variables]
    model.compile(keras.optimizers.SGD(LR), loss=loss)
    install_dp_train_step(model, loss=per_record_loss(model, loss), l2_norm_clip=1e9, noise_multiplier=0.0,
                          divisor=step_divisor(keras_reduction(loss), B), clipping="fast_clipping")
    model.train_on_batch(x, with_position_weights(y, w), sample_weight=np.ones(B, np.float32))
    return [(b - v.numpy()) / LR for b, v in zip(before, model.trainable_variables)]


def _assert_same(got, want):
    for g, e in zip(got, want):
        scale = max(float(np.abs(e).max()), 1e-12)
        assert np.abs(g - e).max() <= 2e-5 * scale, (np.abs(g - e).max(), scale)


@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "sum"])
def test_the_dp_update_equals_keras_for_a_weighted_per_position_loss(reduction):
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)
    x, y, w = _batch([7, 3, 5, 1, 6])
    _assert_same(_dp_update(loss, x, y, w), _keras_update(loss, x, y, w))


@pytest.mark.skipif(int(keras.__version__.split(".")[0]) < 3, reason="Keras 2 has no mean_with_sample_weight reduction")
def test_mean_with_sample_weight_is_each_records_own_weighted_mean():
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="mean_with_sample_weight")
    x, y, w = _batch([4, 4, 4, 4, 4])  # every record the same total weight: Keras's update
    _assert_same(_dp_update(loss, x, y, w), _keras_update(loss, x, y, w))
    x, y, w = _batch([7, 3, 5, 1, 6])  # otherwise: the mean over records of each record's weighted mean
    want = None
    for i in range(B):
        keep = w[i] > 0
        part = _keras_update(loss, x[i:i + 1], y[i:i + 1], w[i:i + 1])  # one record: its own weighted mean
        part = [p / B for p in part]
        want = part if want is None else [a + b for a, b in zip(want, part)]
        assert keep.any()
    _assert_same(_dp_update(loss, x, y, w), want)


def test_padding_positions_never_contribute():
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    x, y, w = _batch([7, 3, 5, 1, 6])
    changed = y.copy()
    changed[w == 0] = (changed[w == 0] + 1) % V  # other labels where the weight is 0
    _assert_same(_dp_update(loss, x, changed, w), _dp_update(loss, x, y, w))


def test_a_private_model_trains_on_per_position_weights_and_refuses_a_wrong_shape():
    rng = np.random.default_rng(3)
    n = 64
    x = rng.integers(0, V, (n, T)).astype(np.int32)
    y = rng.integers(0, V, (n, T)).astype(np.int32)
    w = (np.arange(T)[None, :] < rng.integers(1, T + 1, n)[:, None]).astype(np.float32)
    model = make_private(_lm(), DPSGD(epsilon=2.0, delta=1e-3, n=n, expected_batch_size=16, epochs=1, seed=0))
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[keras.metrics.SparseCategoricalAccuracy()])
    with pytest.raises(ValueError, match=r"sample_weight of shape \(64, 3\).*y has shape \(64, 7\)"):
        model.fit(x, y, sample_weight=w[:, :3], verbose=0)
    assert model.dp_sgd.release is None  # refused before anything was charged
    history = model.fit(x, y, sample_weight=w, verbose=0)
    assert model.dp_sgd.path == "fast_clipping"
    assert np.isfinite(history.history["loss"]).all()
    assert model.dp_sgd.steps_taken() == model.dp_sgd.steps
