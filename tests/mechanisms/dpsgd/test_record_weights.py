"""Record weights (sample_weight, class_weight) and validation_split on a DP-SGD model: a weight scales a record's
loss before clipping, travels with the record through the sampler, and never lets a record past C; every bad
weight, class table or split is refused before the release."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfdpmech
from tfdpmech.mechanisms.dpsgd.clipping import clipped_gradient_sum, gradients, per_example_loss
from tfdpmech.mechanisms.dpsgd.sampling.poisson_sampling import poisson_batch, sampling_key
from tfdpmech.mechanisms.dpsgd.sampling.record_weights import (
    check_sample_weight,
    class_weight_to_sample_weight,
    split_for_validation,
)

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _model(seed=0):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(3)])


def _data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 6)).astype(np.float32), rng.integers(0, 3, n)


@pytest.mark.parametrize("path", ["fast_clipping", "vectorized"])
def test_a_weight_scales_the_loss_before_clipping_and_no_record_passes_c(path):
    model = _model()
    x, y = _data(8)
    weights = np.array([1e4, 1.0, 0.5, 3.0, 2.0, 1e-3, 1.0, 0.0], np.float32)  # the last row: padding
    fn = per_example_loss(LOSS)
    per_record = []
    for i in range(len(y)):
        with tf.GradientTape() as tape:
            loss = weights[i] * tf.reduce_sum(fn(y[i:i + 1], model(x[i:i + 1])))
        per_record.append([g.numpy().astype(np.float64) for g in gradients(tape, loss, model.trainable_variables)])
    norms = np.array([np.sqrt(sum(float(np.sum(g * g)) for g in grads)) for grads in per_record])
    clip = 0.5 * float(np.min(norms[:-3]))  # every record with a weight >= 0.5 is clipped
    got, _, got_norms = clipped_gradient_sum(model, fn, x, y, weights, clip, path, training=False)
    np.testing.assert_allclose(got_norms.numpy()[:-1], norms[:-1], rtol=1e-5)
    factors = np.minimum(1.0, clip / np.maximum(norms, 1e-30))
    for k, g in enumerate(got):
        want = sum(f * grads[k] for f, grads in zip(factors, per_record))
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-6, atol=1e-6 * clip)
    # removing the heaviest record moves the sum by at most C
    without = [sum(f * grads[k] for f, grads in list(zip(factors, per_record))[1:])
               for k in range(len(per_record[0]))]
    moved = np.sqrt(sum(float(np.sum((g.numpy() - w) ** 2)) for g, w in zip(got, without)))
    assert moved <= clip * (1 + 1e-6)
    assert moved == pytest.approx(clip, rel=1e-5)  # its weight of 1e4 took it to C, not past


def test_the_weights_travel_with_the_sampled_records():
    x, y = _data(50)
    weights = np.arange(1, 51, dtype=np.float32)
    key = sampling_key(3)
    for step in range(5):
        xb, _, mask = poisson_batch(x, y, 0.2, 16, key, step, weights)
        real = mask > 0
        rows = [int(np.flatnonzero((x == row).all(axis=1))[0]) for row in xb[real]]
        np.testing.assert_array_equal(mask[real], weights[rows])
        assert not mask[~real].any()


def test_fit_with_class_weight_and_validation_split_trains_the_records_it_accounts_for():
    x, y = _data(150)
    model = tfdpmech.make_private(_model(), tfdpmech.DPSGD(epsilon=1.0, delta=1e-5, n=120, expected_batch_size=24,
                                                           epochs=2, seed=0))
    model.compile(optimizer="sgd", loss=LOSS, metrics=["accuracy"])
    history = model.fit(x, y, validation_split=0.2, class_weight={0: 1.0, 1: 4.0, 2: 0.5}, verbose=0)
    assert "val_loss" in history.history and len(history.history["loss"]) == 2
    (release,) = model.privacy_ledger.releases
    assert release.guarantee == "proven" and "n=120" in model.privacy_ledger.summary()
    dp = model.dp_sgd
    assert dp.sampling_probability == pytest.approx(24 / 120) and dp.steps_taken() == dp.steps == 10
    assert model.privacy_ledger.epsilon_provable() <= 1.0


@pytest.mark.parametrize("weights, words", [
    (np.array([1.0, -1.0]), "sample_weight\\[1\\] = -1.0"),
    (np.array([1.0, np.nan]), "sample_weight\\[1\\] = nan"),
    (np.array([np.inf, 1.0]), "sample_weight\\[0\\] = inf"),
    (np.ones(3), "one weight per training record, shape \\(2,\\)"),
    (np.array(["a", "b"]), "real numbers"),
])
def test_a_bad_sample_weight_is_refused_naming_it(weights, words):
    with pytest.raises((ValueError, TypeError), match=words):
        check_sample_weight(weights, 2)


def test_class_weight_is_the_sample_weight_it_implies_and_bad_tables_are_refused():
    y = np.array([0, 2, 1, 2])
    np.testing.assert_array_equal(class_weight_to_sample_weight({0: 1.0, 1: 2.0, 2: 5.0}, y), [1, 5, 2, 5])
    np.testing.assert_array_equal(class_weight_to_sample_weight({0: 1.0, 1: 2.0, 2: 5.0}, np.eye(3)[y]), [1, 5, 2, 5])
    with pytest.raises(ValueError, match="no weight for class\\(es\\) \\[2\\]"):
        class_weight_to_sample_weight({0: 1.0, 1: 2.0}, y)
    with pytest.raises(ValueError, match="class_weight\\[1\\] = -2"):
        class_weight_to_sample_weight({0: 1.0, 1: -2, 2: 1.0}, y)
    with pytest.raises(TypeError, match="int class ids"):
        class_weight_to_sample_weight({"a": 1.0}, y)


def test_validation_split_is_keras_rule_and_bad_splits_are_refused():
    x, y = np.arange(10), np.arange(10) * 2
    xt, yt, wt, (xv, yv, wv) = split_for_validation(x, y, None, 0.25)
    np.testing.assert_array_equal(xt, np.arange(7))  # Keras: the first floor(n · (1 − split)) = 7 train
    np.testing.assert_array_equal(xv, np.arange(7, 10))
    np.testing.assert_array_equal(yv, np.arange(7, 10) * 2)
    assert wt is None and wv is None
    for bad, exc in ((1.0, ValueError), (-0.1, ValueError), ("0.2", TypeError), (0.99, ValueError)):
        with pytest.raises(exc, match="validation_split"):
            split_for_validation(x, y, None, bad)


@pytest.mark.parametrize("fit_kwargs, words", [
    ({"validation_split": 0.5}, "leaves 60 to train on, but the run's noise was calibrated for n=120"),
    ({"sample_weight": np.ones(120), "class_weight": {0: 1.0, 1: 1.0, 2: 1.0}}, "not both"),
    ({"sample_weight": -np.ones(120)}, "sample_weight\\[0\\]"),
    ({"class_weight": {0: 1.0}}, "no weight for class"),
    ({"validation_split": 0.2, "validation_data": (np.zeros((2, 6)), np.zeros(2))}, "not both"),
])
def test_bad_record_arguments_are_refused_before_the_release(fit_kwargs, words):
    x, y = _data(120)
    model = tfdpmech.make_private(_model(), tfdpmech.DPSGD(epsilon=1.0, delta=1e-5, n=120, expected_batch_size=24,
                                                           epochs=1))
    model.compile(optimizer="sgd", loss=LOSS)
    before = [v.numpy().copy() for v in model.trainable_variables]
    with pytest.raises((ValueError, TypeError), match=words):
        model.fit(x, y, verbose=0, **fit_kwargs)
    assert len(model.privacy_ledger) == 0
    assert all(np.array_equal(b, v.numpy()) for b, v in zip(before, model.trainable_variables))


# --- tf.data datasets of single records ---------------------------------------------------------------------------
def _private(n=120, **kwargs):
    model = tfdpmech.make_private(_model(), tfdpmech.DPSGD(epsilon=1.0, delta=1e-5, n=n, expected_batch_size=24,
                                                           epochs=1, seed=0, **kwargs))
    model.compile(optimizer="sgd", loss=LOSS)
    return model


def test_a_dataset_of_single_records_trains_as_its_arrays_do():
    x, y = _data(120)
    w = np.linspace(0.5, 2.0, 120).astype(np.float32)
    from_arrays, from_dataset = _private(), _private()
    from_arrays.fit(x, y, sample_weight=w, verbose=0)
    from_dataset.fit(tf.data.Dataset.from_tensor_slices((x, y, w)), verbose=0)
    for a, b in zip(from_arrays.trainable_variables, from_dataset.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())  # the same records, weights and Poisson batches
    assert len(from_dataset.privacy_ledger) == 1


def test_record_datasets_the_run_cannot_sample_are_refused_before_the_release():
    x, y = _data(120)
    cases = [
        (tf.data.Dataset.from_tensor_slices((x, y)).batch(24), "dataset of batches"),
        (tf.data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: True), "cardinality is unknown"),
        (tf.data.Dataset.from_tensor_slices((x, y)).repeat(), "cardinality is infinite"),
        (tf.data.Dataset.from_tensor_slices((x, y)).take(100), "n=120"),  # 100 records for a run of n=120
    ]
    for dataset, words in cases:
        model = _private()
        with pytest.raises(ValueError, match=words):
            model.fit(dataset, verbose=0)
        assert len(model.privacy_ledger) == 0


def test_a_record_dataset_over_the_memory_budget_is_refused_naming_the_memmap_way(monkeypatch):
    from tfdpmech.mechanisms.dpsgd.sampling import record_datasets

    monkeypatch.setattr(record_datasets, "MEMORY_BUDGET_BYTES", 1000)
    x, y = _data(120)
    model = _private()
    with pytest.raises(ValueError, match="mmap_mode='r'"):
        model.fit(tf.data.Dataset.from_tensor_slices((x, y)), verbose=0)
    assert len(model.privacy_ledger) == 0


def test_a_memmap_is_sampled_where_it_lies(tmp_path):
    x, y = _data(120)
    path = tmp_path / "x.npy"
    np.save(path, x)
    mapped = np.load(path, mmap_mode="r")
    model = _private()
    checked, _ = model.dp_sgd._checked_data(mapped, y)
    assert np.shares_memory(checked, mapped)  # checked in place, never copied into memory
    model.fit(mapped, y, verbose=0)
    assert len(model.privacy_ledger) == 1
