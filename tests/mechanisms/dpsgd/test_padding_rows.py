"""Padding rows of a Poisson batch add exactly nothing, never a NaN, and the logged loss ignores them.

A padding row is all zeros: through ``Embedding(mask_zero=True)`` it is a fully masked sequence, whose
masked average is 0/0. It must be selected out (never multiplied by 0); a real record that is fully
masked stops the step with an error before any update. The logged ``loss`` is the mean over the
batch's real records.
"""

from __future__ import annotations

import logging
import math
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech import DPSGD, make_private
from tfdpmech.mechanisms.dpsgd.clipping import clipped_gradient_sum, per_example_loss

LOSS = keras.losses.CategoricalCrossentropy(from_logits=True)
N = 120


def _masked_model():
    keras.utils.set_random_seed(0)
    ids = keras.Input((6,), dtype="int32")
    h = keras.layers.Embedding(20, 4, mask_zero=True)(ids)
    h = keras.layers.GlobalAveragePooling1D()(h)  # masked mean: 0/0 for a fully masked row
    return keras.Model(ids, keras.layers.Dense(3)(keras.layers.Dense(5, activation="tanh")(h)))


def _sequences(n=N, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 20, (n, 6)).astype(np.int32)
    x[:, 3:] *= rng.random((n, 3)) < 0.5  # padding tokens at the end; every record keeps 3 real ones
    return x, keras.utils.to_categorical(rng.integers(0, 3, n), 3).astype(np.float32)


@pytest.mark.parametrize("method", ["fast_clipping", "vectorized"])
def test_fully_masked_padding_rows_add_exactly_nothing(method):
    model = _masked_model()
    x, y = _sequences(5)
    padded_x = np.concatenate([x, np.zeros((3, 6), np.int32)])
    padded_y = np.concatenate([y, np.zeros((3, 3), np.float32)])
    weights = np.array([1] * 5 + [0] * 3, np.float32)
    fn = per_example_loss(LOSS)
    got, _, norms = clipped_gradient_sum(model, fn, padded_x, padded_y, weights, 0.1, method)
    alone, _, _ = clipped_gradient_sum(model, fn, x, y, np.ones(5, np.float32), 0.1, method)
    assert np.isfinite(norms.numpy()).all() and (norms.numpy()[5:] == 0).all()
    for a, b in zip(got, alone):
        assert np.isfinite(a.numpy()).all()
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)


def test_a_masked_sequence_model_trains_to_finite_weights():
    x, y = _sequences()
    model = make_private(_masked_model(), DPSGD(epsilon=2.0, delta=1e-3, n=N, expected_batch_size=20, epochs=2, seed=0))
    model.compile(loss=LOSS)
    history = model.fit(x, y, verbose=0)
    assert model.dp_sgd.steps_taken() == model.dp_sgd.steps
    assert all(np.isfinite(w).all() for w in model.get_weights())
    assert np.isfinite(history.history["loss"]).all()


def test_a_fully_masked_real_record_stops_the_step_before_any_update():
    x, y = _sequences()
    x[:] = 0  # every record is padding only: its loss is NaN
    model = make_private(_masked_model(), DPSGD(epsilon=2.0, delta=1e-3, n=N, expected_batch_size=60, epochs=1, seed=0))
    model.compile(loss=LOSS)
    before = [w.copy() for w in model.get_weights()]
    with pytest.raises(ValueError, match="failed on the data .*gradient of a sampled record is NaN or inf.*step 0 of"):
        model.fit(x, y, verbose=0)
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    assert model.dp_sgd.steps_taken() == 0  # the failed step did not count


def test_the_logged_loss_is_the_mean_over_the_real_records_without_a_shuffle_warning(caplog):
    rng = np.random.default_rng(0)
    x = rng.random((400, 8)).astype(np.float32)
    y = keras.utils.to_categorical(rng.integers(0, 10, 400), 10)
    # zero logits: every record's loss is ln 10, whatever the batch
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(10, kernel_initializer="zeros")])
    model = make_private(model, DPSGD(epsilon=2.0, delta=1e-5, n=400, expected_batch_size=50, epochs=1, seed=0))
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=LOSS)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        history = model.fit(x, y, verbose=0)
    assert history.history["loss"][0] == pytest.approx(math.log(10.0), rel=1e-5)  # padding rows would pull it down
    said = [str(w.message) for w in caught] + [r.getMessage() for r in caplog.records]
    assert not [s for s in said if "shuffle" in s], said


@pytest.mark.parametrize("expected", [32, 128])
def test_a_run_on_one_device_computes_on_few_padding_rows_with_one_trace(expected):
    """On tfdpmech's engine on one device a Poisson batch is padded to a multiple of row_multiple(L) only: over
    a run, the padding rows are at most 10 % of the rows computed (1/16 of L at most, on average about half
    that), and the train step is traced once whatever each batch's size."""
    from tfdpmech.mechanisms.dpsgd.sampling.poisson_sampling import row_multiple

    n = 8 * expected
    rng = np.random.default_rng(1)
    x, y = rng.random((n, 3)).astype(np.float32), keras.utils.to_categorical(rng.integers(0, 2, n), 2)
    keras.utils.set_random_seed(0)
    dp = DPSGD(epsilon=3.0, delta=1e-5, n=n, expected_batch_size=expected, epochs=4, seed=0)
    model = make_private(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]), dp)
    model.compile(keras.optimizers.SGD(0.1), loss=LOSS)
    real = rows = 0
    for _, _, (mask, _) in dp.dataset(x, y):  # (x, y, (mask, the step's tag)): the batches fit trains on
        real += int(np.count_nonzero(mask.numpy()))
        rows += int(mask.shape[0])
    assert row_multiple(expected) == min(8, expected // 8)
    assert rows > 0 and (rows - real) / rows <= expected / 16 / (expected + expected / 16), (rows, real)
    assert (rows - real) / rows <= 0.10
    traces = []
    step = model.train_step

    def counted(data):  # Python runs only when the step is traced
        traces.append(1)
        return step(data)

    model.train_step = counted
    model.fit(x, y, verbose=0)
    assert len(traces) == 1  # batches of 4 * ~8 different sizes, one trace
