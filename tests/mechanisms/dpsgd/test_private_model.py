"""make_private: an ordinary Keras model trains with Poisson DP-SGD through compile / fit, on every stack."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tfdpmech.accounting import PrivacyLedger
from tfdpmech import DPSGD, make_private


def _model():
    return keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(4, 3, activation="relu"),
                             keras.layers.Flatten(), keras.layers.Dense(10)])


def _private(**overrides):
    args = dict(epsilon=2.0, delta=1e-5, n=400, expected_batch_size=100, epochs=2, seed=0)
    args.update(overrides)
    return make_private(_model(), DPSGD(**args))


def test_compile_and_fit_train_with_a_proven_release(mnist_sample, tmp_path):
    x, y = np.asarray(mnist_sample.x_train[:400]), np.asarray(mnist_sample.y_train[:400])
    ledger = PrivacyLedger()
    model = _private(ledger=ledger)
    before = [w.copy() for w in model.get_weights()]
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=keras.losses.CategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    assert model.privacy_ledger is ledger and len(ledger) == 0  # nothing is spent before fit checked the data
    with pytest.raises(ValueError, match="n=400"):
        model.fit(x[:300], y[:300])
    assert len(ledger) == 0
    with pytest.raises(ValueError, match="records its privacy release in its own fit"):  # Keras's fit around it
        type(model).fit(model, model.dp_sgd.dataset(x, y), verbose=0)
    assert len(ledger) == 0 and int(model.optimizer.iterations.numpy()) == 0
    history = model.fit(x, y)
    assert len(ledger) == 1  # the budget is committed once the data passed, before the first noisy step
    release = ledger.releases[0]
    assert release.guarantee == "proven" and release.epsilon_provable <= 2.0
    assert release.details["engine"] == "tfdpmech" and release.details["path"] == "fast_clipping"  # Conv2D ghost norms
    assert release.details["optimizer"] == "Adam"
    assert len(history.history["loss"]) == 2  # the budget's epochs
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    assert model.predict(x[:3], verbose=0).shape == (3, 10)
    path = tmp_path / "private.keras"
    model.save(path)  # the saved model is the plain Keras model with the trained weights
    restored = keras.models.load_model(path)
    np.testing.assert_allclose(restored.predict(x[:3], verbose=0), model.predict(x[:3], verbose=0), rtol=1e-5,
                               atol=1e-6)


def test_fit_refuses_what_the_budget_does_not_cover(mnist_sample):
    x, y = np.asarray(mnist_sample.x_train[:400]), np.asarray(mnist_sample.y_train[:400])
    model = _private()
    with pytest.raises(RuntimeError, match="compile the private model before fit"):
        model.fit(x, y)
    model.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match="covers 1 to 2 epochs"):
        model.fit(x, y, epochs=3)
    with pytest.raises(TypeError, match=r"\['batch_size'\] do not apply"):
        model.fit(x, y, batch_size=32)
    with pytest.raises(ValueError, match="n=400"):
        model.fit(x[:300], y[:300])


def test_bad_budget_and_bad_compile_arguments_are_refused_before_any_release():
    with pytest.raises(ValueError, match="epsilon"):
        _private(epsilon=-1.0)
    with pytest.raises(ValueError, match="expected_batch_size"):
        _private(expected_batch_size=1000)
    model = _private()
    with pytest.raises(TypeError, match="keras.optimizers.Optimizer instance"):
        model.compile(optimizer=object(), loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    with pytest.raises(TypeError, match="compile takes optimizer, loss, metrics and loss_weights"):
        model.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True), jit_compile=True)
    assert len(model.privacy_ledger) == 0
    mixing = make_private(keras.Sequential([keras.Input((4,)), keras.layers.Dense(3),
                                            keras.layers.BatchNormalization(), keras.layers.Dense(2)]), DPSGD(epsilon=1.0, delta=1e-5, n=100, expected_batch_size=10, epochs=1))
    with pytest.raises(ValueError, match="mixes the examples of a batch"):
        mixing.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    assert len(mixing.privacy_ledger) == 0
