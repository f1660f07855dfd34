"""DPSGD without n: σ is calibrated to the records the first fit trains on (after validation_split), before the
model is compiled and before anything is charged; the ledger states that n and its ε is dp_accounting's for it."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import tfdpmech
from tfdpmech.accounting.poisson_dpsgd import poisson_dpsgd_epsilon

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _model(seed=0):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(3)])


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 6)).astype(np.float32), rng.integers(0, 3, n)


def _private(**kwargs):
    settings = dict(epsilon=1.0, delta=1e-5, expected_batch_size=24, epochs=2, seed=0)
    model = tfdpmech.make_private(_model(), tfdpmech.DPSGD(**{**settings, **kwargs}))
    model.compile(optimizer="sgd", loss=LOSS, metrics=["accuracy"])
    return model


def test_the_first_fit_gives_n_after_validation_split_and_trains_as_the_given_n_does():
    x, y = _data(150)
    taken = _private()
    assert taken.dp_sgd.n is None and taken.dp_sgd.noise_multiplier is None and len(taken.privacy_ledger) == 0
    history = taken.fit(x, y, validation_split=0.2, verbose=0)
    given = _private(n=120)
    given.fit(x, y, validation_split=0.2, verbose=0)
    dp = taken.dp_sgd
    assert dp.n == 120 and dp.n_from_fit and "val_loss" in history.history
    assert dp.noise_multiplier == given.dp_sgd.noise_multiplier and dp.steps_taken() == dp.steps == 10
    for a, b in zip(taken.trainable_variables, given.trainable_variables):  # the same σ, batches and noise
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    (release,) = taken.privacy_ledger.releases
    assert release.details["n"] == 120 and "n=120" in taken.privacy_ledger.summary()
    assert release.epsilon_provable == pytest.approx(
        poisson_dpsgd_epsilon(dp.noise_multiplier, 1e-5, q=24 / 120, steps=10, accountant="pld"))


def test_evaluate_before_the_first_fit_scores_the_untrained_model_and_charges_nothing():
    x, y = _data(120)
    model = _private()
    loss, accuracy = model.evaluate(x, y, verbose=0)
    logits = model.predict(x, verbose=0)
    assert loss == pytest.approx(float(LOSS(y, logits)), rel=1e-5)
    assert accuracy == pytest.approx(float(np.mean(logits.argmax(1) == y)))
    assert model.dp_sgd.n is None and len(model.privacy_ledger) == 0  # nothing calibrated, nothing released
    assert model.evaluate(x, y, verbose=0) == pytest.approx([loss, accuracy])  # a second call, compiled once
    model.fit(x, y, verbose=0)  # then the run compiles for the records fit takes, as without the evaluation
    untouched = _private()
    untouched.fit(x, y, verbose=0)
    assert model.dp_sgd.n == 120 and len(model.privacy_ledger) == 1
    for a, b in zip(model.trainable_variables, untouched.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert model.evaluate(x, y, verbose=0) == pytest.approx(untouched.evaluate(x, y, verbose=0))


def test_test_on_batch_before_the_first_fit_scores_and_train_on_batch_is_refused_naming_fit():
    x, y = _data(120)
    model = _private()
    before = [w.numpy() for w in model.trainable_variables]
    loss, accuracy = model.test_on_batch(x[:32], y[:32])
    logits = model.predict(x[:32], verbose=0)
    assert float(loss) == pytest.approx(float(LOSS(y[:32], logits)), rel=1e-5)
    assert float(accuracy) == pytest.approx(float(np.mean(logits.argmax(1) == y[:32])))
    with pytest.raises(ValueError, match=r"train_on_batch .* calibrates its noise to the records its first fit trains "
                                         r"on .* train it with model.fit\(x, y\)"):
        model.train_on_batch(x[:32], y[:32])
    for a, b in zip(before, model.trainable_variables):  # nothing trained
        np.testing.assert_array_equal(a, b.numpy())
    assert model.dp_sgd.n is None and len(model.privacy_ledger) == 0
    model.fit(x, y, verbose=0)
    assert model.dp_sgd.n == 120 and len(model.privacy_ledger) == 1


def test_a_second_fit_trains_on_the_same_records_only():
    x, y = _data(120)
    model = _private()
    model.fit(x, y, epochs=1, verbose=0)
    with pytest.raises(ValueError, match="calibrated for n=120 training examples, got 100"):
        model.fit(x[:100], y[:100], epochs=1, verbose=0)
    model.fit(x, y, epochs=1, verbose=0)
    assert model.dp_sgd.steps_taken() == model.dp_sgd.steps


def test_a_refused_first_fit_charges_nothing_and_the_next_fit_calibrates_afresh():
    x, y = _data(150)
    model = _private()
    with pytest.raises(ValueError, match="label"):  # compiled for n=150, refused at the labels' check
        model.fit(x, y + 5, verbose=0)
    assert len(model.privacy_ledger) == 0 and model.dp_sgd.release is None
    model.fit(x[:120], y[:120], verbose=0)
    assert model.dp_sgd.n == 120 and model.privacy_ledger.releases[0].details["n"] == 120


@pytest.mark.parametrize("call, words", [
    (lambda dp: dp.dataset(*_data(120)), "dataset\\(x, y\\) needs n"),
    (lambda dp: dp.compile(_model(), loss=LOSS), "DPSGD.compile needs n"),
    (lambda dp: dp.prepare(_model(), *_data(120), loss=LOSS), "DPSGD.prepare needs n"),
])
def test_what_needs_n_before_a_fit_says_so(call, words):
    dp = tfdpmech.DPSGD(epsilon=1.0, delta=1e-5, expected_batch_size=24, epochs=1)
    with pytest.raises(ValueError, match=words):
        call(dp)
    assert dp.release is None


@pytest.mark.parametrize("settings, count, words", [
    (dict(expected_batch_size=200), 150, "expected_batch_size=200 exceeds the number of training records n=150"),
    (dict(delta=0.01), 150, "delta=0.01 is not below 1/n"),
])
def test_sizes_that_do_not_fit_the_records_are_refused_at_the_first_fit(settings, count, words):
    model = _private(**settings)
    before = [v.numpy().copy() for v in model.trainable_variables]
    with pytest.raises(ValueError, match=words):
        model.fit(*_data(count), verbose=0)
    assert len(model.privacy_ledger) == 0
    assert all(np.array_equal(b, v.numpy()) for b, v in zip(before, model.trainable_variables))
