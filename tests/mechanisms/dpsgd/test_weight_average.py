"""Weight averaging: De et al.'s warmed-up average beside Keras's, and validation during fit through the average."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tfdpmech import DPSGD, make_private
from tfdpmech.accounting import PrivacyLedger
from tfdpmech.mechanisms.dpsgd import OptimizerSettings
from tfdpmech.mechanisms.dpsgd.runs.weight_average import (WarmupEMAAdam, averaging_optimizer, warmup_decay,
                                                           scoring_the_average, with_averaged_evaluation)

pytestmark = pytest.mark.skipif(not keras.__version__.startswith("3"),
                                reason="the warm-up and SwapEMAWeights are Keras 3's (the TF 2.15 stack has Keras 2)")


def test_the_decay_warms_up_to_the_momentum_as_de_et_al_state():
    decays = [float(warmup_decay(t, 0.999)) for t in (0, 1, 8, 90, 10_000)]
    np.testing.assert_allclose(decays, [0.1, 2 / 11, 0.5, 0.91, 0.999], rtol=1e-6)


def _averages(optimizer, gradients):
    var = keras.Variable(np.zeros(2, np.float32))
    optimizer.build([var])
    values, averages = [], []
    for g in gradients:
        optimizer.apply([np.asarray(g, np.float32)], [var])
        values.append(var.numpy().copy())
        averages.append(optimizer._model_variables_moving_average[0].numpy().copy())
    return values, averages


def test_the_warmed_up_average_follows_the_schedule_and_keras_s_copies_the_first_step():
    gradients = [[1.0, -2.0], [0.5, 0.5], [-1.0, 3.0], [2.0, 1.0]]
    values, averages = _averages(WarmupEMAAdam(0.1, use_ema=True, ema_momentum=0.95), gradients)
    expected = np.zeros(2)  # the average starts at the initial weights
    for t, v in enumerate(values):
        d = min(0.95, (1 + t) / (10 + t))
        expected = d * expected + (1 - d) * v
        np.testing.assert_allclose(averages[t], expected, rtol=1e-5, atol=1e-7)
    keras_values, keras_averages = _averages(keras.optimizers.Adam(0.1, use_ema=True, ema_momentum=0.95), gradients)
    np.testing.assert_allclose(keras_values, values, rtol=1e-6)  # the same steps: only the average differs
    np.testing.assert_allclose(keras_averages[0], keras_values[0], rtol=1e-6)  # Keras copies at the first step
    assert not np.allclose(keras_averages[-1], averages[-1])


def test_the_optimizer_is_chosen_by_the_settings_and_round_trips_through_keras_serialisation():
    assert type(averaging_optimizer("adam", 1e-3, ema_momentum=0.99, ema_warmup=True)) is WarmupEMAAdam
    assert type(averaging_optimizer("adam", 1e-3, ema_momentum=0.99)) is keras.optimizers.Adam
    sgd = averaging_optimizer("sgd", 0.1, momentum=0.9, ema_momentum=0.99, ema_warmup=True)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(sgd))
    assert type(restored) is type(sgd) and restored.get_config() == sgd.get_config()


def test_validation_and_epoch_end_callbacks_score_the_average_the_model_keeps(mnist_sample):
    x, y = np.asarray(mnist_sample.x_train[:400]), np.asarray(mnist_sample.y_train[:400])
    x_val, y_val = np.asarray(mnist_sample.x_test[:200]), np.asarray(mnist_sample.y_test[:200])
    ledger = PrivacyLedger()
    model = make_private(
        keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(), keras.layers.Dense(10)]),
        DPSGD(2.0, 1e-5, n=400, expected_batch_size=100, epochs=3, seed=0, ledger=ledger,
              optimizer=OptimizerSettings("adam", learning_rate=0.05, ema_momentum=0.9, ema_warmup=True)))
    model.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    seen = []
    record = keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: seen.append(
        ([w.copy() for w in model.get_weights()], model.optimizer._model_variables_moving_average[0].numpy().copy())))
    history = model.fit(x, y, validation_data=(x_val, y_val), callbacks=[record], verbose=0)
    assert isinstance(model.optimizer, WarmupEMAAdam) and len(ledger) == 1
    # validation scored the average, which the model holds once fit ends
    assert history.history["val_loss"][-1] == pytest.approx(model.evaluate(x_val, y_val, verbose=0), rel=1e-5)
    np.testing.assert_array_equal(seen[-1][1], model.get_weights()[0])
    # between epochs the model holds its raw weights (a checkpoint resumes exactly), the optimizer the average
    assert not np.allclose(seen[-1][0][0], model.get_weights()[0])
    with scoring_the_average(model):  # the average swapped in for a score, and the weights restored after
        np.testing.assert_array_equal(model.get_weights()[0], model.optimizer._model_variables_moving_average[0])
    assert ledger.releases[0].details["ema_warmup"] is True


def test_no_swap_without_an_average_and_none_added_twice():
    plain = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    plain.compile(optimizer="adam", loss="mse")
    assert with_averaged_evaluation(plain, []) == []
    plain.compile(optimizer=keras.optimizers.Adam(use_ema=True), loss="mse")
    (swap,) = with_averaged_evaluation(plain, [])
    assert isinstance(swap, keras.callbacks.SwapEMAWeights) and with_averaged_evaluation(plain, [swap]) == [swap]


def test_a_run_fitted_in_two_parts_ends_as_one_fit_and_holds_its_raw_weights_between_them(mnist_sample):
    x, y = np.asarray(mnist_sample.x_train[:400]), np.asarray(mnist_sample.y_train[:400])

    def private():
        keras.utils.set_random_seed(3)
        model = make_private(
            keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(), keras.layers.Dense(10)]),
            DPSGD(2.0, 1e-5, n=400, expected_batch_size=100, epochs=2, seed=0,
                  optimizer=OptimizerSettings("sgd", learning_rate=0.5, ema_momentum=0.9, ema_warmup=True)))
        model.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True))
        return model

    whole = private()
    whole.fit(x, y, verbose=0)
    parts = private()
    parts.fit(x, y, epochs=1, verbose=0)
    average = parts.optimizer._model_variables_moving_average[0].numpy()
    assert not np.allclose(parts.get_weights()[0], average)  # mid-run: the raw weights stay in the model
    parts.fit(x, y, epochs=1, verbose=0)
    for a, b in zip(parts.get_weights(), whole.get_weights()):  # the run's end: the average, as one fit gives
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(whole.get_weights()[0], whole.optimizer._model_variables_moving_average[0])
