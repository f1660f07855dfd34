"""Augmentation multiplicity (De et al. 2022): a sampled record's K views are K consecutive rows of the batch, each
weighted 1/K, augmented with seeds from the run's key, the step and the row; one clipping unit; every bad K or
augmentation refused before the release."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfdpmech
from tfdpmech.mechanisms.dpsgd.sampling import augmentation as aug
from tfdpmech.mechanisms.dpsgd.clipping.chunked_clipping import chunked_clipped_gradient_sum
from tfdpmech.mechanisms.dpsgd.clipping import per_example_loss

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
N, K = 64, 3


def _data():
    rng = np.random.default_rng(0)
    return rng.random((N, 8, 8, 1)).astype(np.float32), rng.integers(0, 3, N)


def _model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(4, 3, activation="tanh"),
                             keras.layers.Flatten(), keras.layers.Dense(3)])


def _run(**kwargs):
    options = dict(epsilon=1.0, delta=1e-5, n=N, expected_batch_size=16, epochs=1, seed=0,
                   augmentation=aug.compose(aug.random_crop(2), aug.random_flip()), augmentation_multiplicity=K)
    return tfdpmech.DPSGD(**(options | kwargs))


def _batches(dp, x, y, count=2):
    return [tuple(t.numpy() if hasattr(t, "numpy") else t for t in (b[0], b[1], b[2][0], b[2][1]))
            for b in dp.dataset(x, y).take(count)]


def test_the_views_of_a_record_are_consecutive_rows_weighted_one_over_k_each_augmented_apart():
    x, y = _data()
    model = tfdpmech.make_private(_model(), _run())
    model.compile(optimizer="sgd", loss=LOSS)
    (xb, yb, mask, ticket), (xb2, _, _, _) = _batches(model.dp_sgd, x, y)
    assert len(mask) % K == 0
    groups = mask.reshape(-1, K)
    assert np.all(groups == groups[:, :1])  # a record's views share its weight
    assert set(np.unique(groups)) <= {0.0, np.float32(1 / K)}
    real = groups[:, 0] > 0
    assert np.all(yb.reshape(-1, K)[real] == yb.reshape(-1, K)[real][:, :1])  # one label per record
    views = xb.reshape(-1, K, 8, 8, 1)[real]
    assert not np.allclose(views[:, 0], views[:, 1])  # the views differ
    again = _batches(model.dp_sgd, x, y, count=1)[0][0]
    np.testing.assert_array_equal(again, xb)  # the run's stream: the same step draws the same views
    assert not np.array_equal(xb2[:len(xb)], xb)  # another step, other records and views


def test_a_run_with_k_views_trains_and_chunks_hold_whole_records():
    x, y = _data()
    model = tfdpmech.make_private(_model(), _run(physical_batch_size=7))
    model.compile(optimizer="sgd", loss=LOSS)
    model.fit(x, y, verbose=0)
    (release,) = model.privacy_ledger.releases
    assert release.guarantee == "proven" and "K=3" in model.privacy_ledger.summary()
    xb, yb, mask = (tf.constant(t) for t in _batches(model.dp_sgd, x, y, count=1)[0][:3])
    fn = per_example_loss(LOSS)
    whole = chunked_clipped_gradient_sum(model, fn, xb, yb, mask, 0.01, "fast_clipping", None, group_size=K)
    chunked = tf.function(lambda: chunked_clipped_gradient_sum(model, fn, xb, yb, mask, 0.01, "fast_clipping", 7,
                                                               group_size=K), autograph=False)()
    for a, b in zip(whole[0], chunked[0]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("kwargs, exc, words", [
    ({"augmentation_multiplicity": 0}, ValueError, "augmentation_multiplicity must be >= 1"),
    ({"augmentation_multiplicity": 1.5}, TypeError, "augmentation_multiplicity must be an int"),
    ({"augmentation_multiplicity": True}, TypeError, "augmentation_multiplicity must be an int"),
    ({"augmentation": None}, ValueError, "needs an augmentation"),
    ({"augmentation": "flip"}, TypeError, "augmentation must be a Keras layer or a function"),
    ({"physical_batch_size": 2}, ValueError, "physical_batch_size=2 is smaller than augmentation_multiplicity=3"),
])
def test_a_bad_multiplicity_is_refused_naming_it(kwargs, exc, words):
    with pytest.raises(exc, match=words):
        _run(**kwargs)


@pytest.mark.parametrize("fn, words", [
    (lambda r, s: r[:4], "keep a record's shape and dtype"),
    (lambda r, s: tf.cast(r, tf.float64), "keep a record's shape and dtype"),
    (lambda r, s: r * np.nan, "NaN or inf"),
])
def test_an_augmentation_that_changes_a_record_is_refused_before_the_release(fn, words):
    x, y = _data()
    model = tfdpmech.make_private(_model(), _run(augmentation=fn))
    model.compile(optimizer="sgd", loss=LOSS)
    with pytest.raises(ValueError, match=words):
        model.fit(x, y, verbose=0)
    assert len(model.privacy_ledger) == 0


def _flip_only(record):
    return tf.image.flip_left_right(record)


class _Unreadable:
    """A callable whose signature Python cannot read, taking one argument."""

    __signature__ = "unreadable"

    def __call__(self, record):
        return record


@pytest.mark.parametrize("fn", [_flip_only, lambda record, seed, strength: record,
                                lambda record, *, seed: record])
def test_an_augmentation_with_another_signature_is_refused_naming_fn_record_seed(fn):
    ledger = tfdpmech.PrivacyLedger()
    with pytest.raises(TypeError, match=r"augmentation must be called as fn\(record, seed\) .* got .*\(record") as info:
        _run(augmentation=fn, ledger=ledger)
    assert "random_crop(4)" in str(info.value)
    assert len(ledger) == 0


def test_a_callable_whose_signature_cannot_be_read_fails_at_fit_naming_fn_record_seed_before_the_release():
    x, y = _data()
    model = tfdpmech.make_private(_model(), _run(augmentation=_Unreadable()))
    model.compile(optimizer="sgd", loss=LOSS)
    with pytest.raises(ValueError, match=r"augmentation failed on records of x, called as fn\(record, seed\) .*"
                                         r"TypeError"):
        model.fit(x, y, verbose=0)
    assert len(model.privacy_ledger) == 0


def test_a_function_of_a_record_and_a_seed_with_defaults_is_accepted():
    dp = _run(augmentation=lambda record, seed=None, strength=1: record)
    assert dp.augmentation_multiplicity == K
