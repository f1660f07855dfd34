"""A model trained on anything but the released data never logs a guarantee .

Every mechanism with a training callback: AdLM/ILM (``AdLMBudget``), input perturbation
(``InputPerturbationBudget``) and DP-SGD (``DPSGDBudget``: the n the noise was calibrated for).
And no record is dropped without a word: a batch size that does not divide n is refused unless
``drop_remainder=True`` acknowledges it, and the ledger records the number dropped.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech import ILM, AdLM, InputPerturbation, models
from tfdpmech.validation import ReleasedData

N, BATCH, SHAPE, CLASSES = 200, 10, (4, 4, 1), 3  # batch 10: the per-record mode meets its ε on this model


@pytest.fixture(scope="module")
def raw():
    rng = np.random.default_rng(0)
    x = rng.random((N,) + SHAPE).astype(np.float32)
    y = np.eye(CLASSES, dtype=np.float32)[rng.integers(0, CLASSES, N)]
    return x, y


def tiny_private_model():
    return models.mlp(CLASSES, input_shape=SHAPE, first_units=8, hidden_units=4)


def relevance_model():
    return keras.Sequential([keras.Input(SHAPE), keras.layers.Flatten(), keras.layers.Dense(8, activation="relu"),
                             keras.layers.Dense(CLASSES)])


def _weights(model):
    return [w.numpy().copy() for w in model.trainable_variables]


def _perturbed(kind, raw, noise_mode="per_example_frozen"):
    x, y = raw
    if kind == "ilm":
        mech = ILM.from_total(1.0, BATCH, seed=0, noise_mode=noise_mode)
    else:
        mech = AdLM.from_total(1.0, BATCH, seed=0, noise_mode=noise_mode)
        mech.fit_relevance(relevance_model(), x, y)
    model = tiny_private_model()
    data = mech.perturb(x, y, model)
    model.compile(keras.optimizers.Adam(1e-3), loss=mech.loss())
    return mech, model, data


@pytest.mark.parametrize("kind, noise_mode", [("ilm", "per_example_frozen"), ("adlm", "per_example_frozen"),
                                              ("ilm", "shared_frozen")])
def test_adlm_ilm_refuse_raw_data_and_log_nothing(raw, kind, noise_mode):
    x, y = raw
    mech, model, data = _perturbed(kind, raw, noise_mode)
    callback = mech.callback(model, verbose=0)
    before = _weights(model)
    # the case: raw x and one-hot y with the mechanism's loss and callback
    with pytest.raises(ValueError, match=r"y passed to fit has 3 value\(s\) per record.*not the released data"):
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[callback])
    # raw features with the released coefficients: refused inside the train step, before any update
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"not the data .*\.perturb released"):
        model.fit(x, data.phi_bar, batch_size=BATCH, epochs=1, verbose=0, callbacks=[callback])
    # released features with coefficients of the raw labels: refused too
    clean_phi = np.stack([np.full(y.shape, np.log(2.0)), 0.5 - y, np.full(y.shape, 0.125)], -1).astype(np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"not the data .*\.perturb released"):
        model.fit(data.x_bar, clean_phi, batch_size=BATCH, epochs=1, verbose=0, callbacks=[callback])
    assert all(np.array_equal(a, b) for a, b in zip(before, _weights(model))), "a refused fit must not train"
    # the released data trains and logs ε, after the refusals (no poisoned train function)
    history = model.fit(data.to_dataset(seed=0), epochs=1, verbose=0, callbacks=[callback])
    assert history.history["epsilon_claimed"] == [pytest.approx(mech.ledger.epsilon_claimed(1))]
    history = model.fit(data.x_bar, data.phi_bar, batch_size=BATCH, epochs=1, verbose=0, callbacks=[callback])
    assert "epsilon_provable" in history.history


def test_adlm_callback_before_perturb_is_refused(raw):
    mech = ILM.from_total(1.0, BATCH, seed=0)
    model = tiny_private_model()
    model.compile("adam", loss=mech.loss())
    with pytest.raises(RuntimeError, match=r"call ILM.perturb\(x, y, model\) before fit"):
        model.fit(raw[0], raw[1], batch_size=BATCH, epochs=1, verbose=0, callbacks=[mech.callback(model, verbose=0)])


def test_input_perturbation_callback_refuses_raw_features():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(N, 5))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = (x[:, 0] > 0).astype(np.float32)
    ip = InputPerturbation(1.0, 1e-5, 3, mode="private", seed=0)
    x_noisy, y_out = ip.perturb(x, y)
    model = ip.make_linear_model()
    model.compile(keras.optimizers.SGD(0.1), loss=keras.losses.BinaryCrossentropy(from_logits=True))
    before = _weights(model)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"not the data InputPerturbation.perturb released"):
        model.fit(x.astype(np.float32), y, batch_size=N, epochs=1, verbose=0, callbacks=[ip.callback()])
    assert all(np.array_equal(a, b) for a, b in zip(before, _weights(model)))
    assert ip.steps_taken == 0
    history = ip.fit(model, x_noisy, y_out)
    assert len(history.history["epsilon_provable"]) == 3


def test_input_perturbation_callback_refuses_raw_labels_when_labels_are_randomized():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(N, 5))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = (x[:, 0] > 0).astype(np.float32)
    ip = InputPerturbation(2.0, 1e-5, 2, mode="private", label_epsilon=0.5, seed=0)
    x_noisy, y_noisy = ip.perturb(x, y)
    assert np.any(y_noisy != y)  # some labels flipped by randomized response
    model = ip.make_linear_model()
    model.compile(keras.optimizers.SGD(0.1), loss=keras.losses.BinaryCrossentropy(from_logits=True))
    with pytest.raises(tf.errors.InvalidArgumentError, match="not the data InputPerturbation.perturb released"):
        model.fit(x_noisy, y, batch_size=N, epochs=1, verbose=0, callbacks=[ip.callback()])


def test_released_data_accepts_its_rows_in_any_order_and_rejects_others():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(50, 6)).astype(np.float32), rng.normal(size=(50, 2)).astype(np.float32)
    released = ReleasedData((x, y), source="test", fix="use the released arrays")
    perm = rng.permutation(50)[:20]
    released.assert_batch((tf.constant(x[perm]), tf.constant(y[perm])))  # passes (eager)
    other = x[perm].copy()
    other[3, 2] += 1e-3  # one value of one record changed
    with pytest.raises(tf.errors.InvalidArgumentError, match="not the data test released"):
        released.assert_batch((tf.constant(other), tf.constant(y[perm])))
    with pytest.raises(ValueError, match=r"y passed to fit has 3 value\(s\) per record"):
        released.assert_batch((tf.constant(x), tf.constant(np.zeros((50, 3), np.float32))))


# --- item 5: records are never dropped without a word ----------------------------------------------------------
def test_adlm_refuses_a_batch_size_that_drops_records(raw):
    x, y = raw
    x3 = np.concatenate([x, x[:5]])  # n = 205, batch 10: 5 records would sit out every epoch
    y3 = np.concatenate([y, y[:5]])
    mech = ILM.from_total(1.0, BATCH, seed=0)
    with pytest.raises(ValueError, match=r"n=205 records do not fill batches of batch_size=10: 5 records .*"
                                         r"drop_remainder=True"):
        mech.perturb(x3, y3, tiny_private_model())
    assert len(mech.ledger.releases) == 0  # refused before any noise or release


def test_adlm_drop_remainder_is_acknowledged_and_recorded(raw):
    x, y = raw
    x3, y3 = np.concatenate([x, x[:5]]), np.concatenate([y, y[:5]])
    mech = ILM.from_total(1.0, BATCH, seed=0)
    data = mech.perturb(x3, y3, tiny_private_model(), drop_remainder=True)
    assert data.records_dropped_per_epoch == 5
    assert [r.details["records_dropped_per_epoch"] for r in mech.ledger.releases] == [5, 5]
    assert sum(int(b[0].shape[0]) for b in data.to_dataset(seed=0)) == 200
    # a PrivateData that did not acknowledge it refuses to build the pipeline
    import dataclasses
    with pytest.raises(ValueError, match="drop_remainder=True"):
        dataclasses.replace(data, drop_remainder=False).to_dataset()


def test_adlm_divisible_batch_drops_nothing(raw):
    mech = ILM.from_total(1.0, BATCH, seed=0)
    data = mech.perturb(*raw, tiny_private_model())
    assert data.records_dropped_per_epoch == 0
    assert mech.ledger.releases[0].details["records_dropped_per_epoch"] == 0
    assert sum(int(b[0].shape[0]) for b in data.to_dataset(seed=0)) == N


# --- DP-SGD: the callback's ε holds for the n examples the noise was calibrated for ------------------------------
@pytest.fixture(scope="module")
def dpsgd_module():  # engine "auto": tensorflow-privacy on TF 2.15, tfdpmech's own on Keras 3
    from tfdpmech.mechanisms.dpsgd import ShuffledDPSGD
    return ShuffledDPSGD


def _dp(ShuffledDPSGD, **kw):
    args = dict(epsilon=2.0, delta=1e-3, batch_size=50, epochs=1, n=N)
    args.update(kw)
    dp = ShuffledDPSGD(**args)
    model = dp.compile(models.standard_mlp(CLASSES, input_shape=SHAPE, first_units=8))
    return dp, model


def test_dpsgd_callback_refuses_data_of_another_size(dpsgd_module, raw):
    x, y = raw
    dp, model = _dp(dpsgd_module)
    before = _weights(model)
    with pytest.raises(ValueError, match=r"runs 2 steps per epoch, but the ShuffledDPSGD noise was calibrated for n=200"):
        model.fit(x[:100], y[:100], batch_size=50, epochs=1, verbose=0, callbacks=[dp.callback(verbose=0)])
    assert all(np.array_equal(a, b) for a, b in zip(before, _weights(model)))
    history = model.fit(dp.dataset(x, y, seed=0), epochs=1, verbose=0, callbacks=[dp.callback(verbose=0)])
    assert history.history["epsilon_provable"][0] > 0


def test_dpsgd_integer_labels_and_nan(dpsgd_module, raw):
    x, y = raw
    dp, model = _dp(dpsgd_module)
    ids = y.argmax(1)
    with pytest.raises(ValueError, match=r"y holds integer class ids.*to_categorical"):
        model.fit(x, ids, batch_size=50, epochs=1, verbose=0)
    bad = x.copy()
    bad[7, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match=r"x contains 1 NaN or infinite value"):
        dp.dataset(bad, y)
    with pytest.raises(tf.errors.InvalidArgumentError, match="x holds NaN or inf"):
        model.fit(bad, y, batch_size=50, epochs=1, verbose=0, shuffle=False)  # NaN in the first batch
    assert int(model.optimizer.iterations.numpy()) == 0  # refused before the step
    with pytest.raises(ValueError, match=r"y has labels in \[0, 7\], outside \[0, 2\]"):
        dp.dataset(x, np.where(ids == 2, 7, ids))
    # integer labels through dataset() are one-hot encoded for the default loss and train
    history = model.fit(dp.dataset(x, ids, seed=0), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_dpsgd_integer_labels_before_compile_are_refused(dpsgd_module, raw):
    dp = dpsgd_module(2.0, 1e-3, 50, 1, N)
    with pytest.raises(ValueError, match=r"y holds integer class ids.*call compile first"):
        dp.dataset(raw[0], raw[1].argmax(1))


def test_dpsgd_refuses_a_batch_size_that_drops_records(dpsgd_module):
    with pytest.raises(ValueError, match=r"n=200 examples do not fill batches of batch_size=64: 8 examples .*"
                                         r"\(e\.g\. 40, 50, 100\), or drop_remainder=True"):
        dpsgd_module(2.0, 1e-3, 64, 1, N)


def test_dpsgd_drop_remainder_is_recorded_and_caps_the_passes(dpsgd_module, raw):
    x, y = raw
    dp, model = _dp(dpsgd_module, batch_size=64, epochs=1, drop_remainder=True)
    assert dp.release.details["records_dropped_per_epoch"] == 8
    assert dp.max_train_steps == 3  # one pass of full batches; the accounted ceil(200/64) = 4 steps would be 4/3 passes
    model.fit(dp.dataset(x, y, seed=0), epochs=1, verbose=0, callbacks=[dp.callback(verbose=0)])
    with pytest.raises(tf.errors.InvalidArgumentError, match="privacy budget spent"):
        model.fit(dp.dataset(x, y, seed=1), epochs=1, verbose=0)
