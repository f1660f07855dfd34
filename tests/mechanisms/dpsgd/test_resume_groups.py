"""A run with augmentation multiplicity or at user level survives save, load and resume: the augmentation or the
user ids are given again (code and data are not saved with a model), and the run goes on as if never stopped."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfdpmech
from tfdpmech import DPSGD, make_private

N = 256
IDS = np.arange(N) % 64  # 64 users of 4 records each
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 8)).astype("float32")
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0).astype("int64")


def _jitter(record, seed):
    return record + 0.1 * tf.random.stateless_normal(tf.shape(record), seed)


# 4 epochs of 8 steps: views of records (n = 256, 32 a step) and users (n = 64, 8 a step)
VIEWS = dict(n=N, expected_batch_size=32, augmentation=_jitter, augmentation_multiplicity=2)
USERS = dict(n=64, expected_batch_size=8, user_ids=IDS, records_per_user=2)


def _compiled(units: dict):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(2)])
    model = make_private(model, DPSGD(epsilon=4.0, delta=1e-5, epochs=4, seed=1, **units))
    model.compile(loss=LOSS)
    return model


def _again(units: dict) -> dict:
    """What resume needs given again: the augmentation or the user ids."""
    return {"augmentation": units["augmentation"]} if "augmentation" in units else {"user_ids": units["user_ids"]}


@pytest.mark.slow  # three fits of a grouped run, each traced
@pytest.mark.parametrize("units", [VIEWS, USERS], ids=["views", "users"])
def test_a_resumed_grouped_run_equals_one_uninterrupted_run(units, tmp_path):
    x, y = _data()
    whole = _compiled(units)
    whole.fit(x, y, verbose=0)
    half = _compiled(units)
    half.fit(x, y, epochs=2, verbose=0)
    half.save(tmp_path / "half.keras")
    resumed = tfdpmech.resume(keras.models.load_model(tmp_path / "half.keras"), seed=1, **_again(units))
    assert len(resumed.privacy_ledger) == 1  # the same release, nothing charged again
    assert len(resumed.fit(x, y, verbose=0).history["loss"]) == 2
    # the same views (seeded by the run's key, the step and the row) or the same users and cycle positions
    for got, want in zip(resumed.get_weights(), whole.get_weights()):
        np.testing.assert_array_equal(got, want)
    assert resumed.privacy_ledger.releases[0].neighbours == whole.privacy_ledger.releases[0].neighbours == (
        "add_remove_user" if "user_ids" in units else "add_remove")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """``{"plain" | "views" | "users": path}`` of runs saved after their first epoch."""
    x, y = _data()
    folder, paths = tmp_path_factory.mktemp("saved"), {}
    for name, units in (("plain", dict(n=N, expected_batch_size=32)), ("views", VIEWS), ("users", USERS)):
        model = _compiled(units)
        model.fit(x, y, epochs=1, verbose=0)
        paths[name] = folder / f"{name}.keras"
        model.save(paths[name])
    return paths


@pytest.mark.parametrize("name, kwargs, words", [
    ("views", {}, "averaged 2 augmented views.*augmentation="),
    ("users", {}, "user-level.*user_ids="),
    ("plain", {"augmentation": _jitter}, "one view per record.*augmentation"),
    ("plain", {"user_ids": IDS}, "record level.*user_ids"),
    ("users", {"user_ids": IDS % 32}, "32 distinct users, n=64"),
    ("users", {"user_ids": "ids"}, "user_ids must be a 1-D array"),
    ("users", {"user_ids": IDS, "augmentation": _jitter}, "one view per record.*augmentation"),
])
def test_resume_refuses_a_grouped_run_without_its_units_or_with_others(saved, name, kwargs, words):
    with pytest.raises((ValueError, TypeError), match=words):
        tfdpmech.resume(keras.models.load_model(saved[name]), **kwargs)
