"""User-level DP-SGD: users are Poisson-sampled, a sampled user's up-to-k records (cycled over the steps it is
sampled in) are one clipping unit, the ledger states the user neighbour relation; bad user settings are refused
before the release."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import tfdpmech
from tfdpmech.accounting import PrivacyLedger
from tfdpmech.mechanisms.dpsgd.clipping import clipped_gradient_sum, per_example_loss
from tfdpmech.mechanisms.dpsgd.sampling.poisson_sampling import PoissonSampler, sampling_key, step_rng
from tfdpmech.mechanisms.dpsgd.sampling.user_sampling import UserRecords

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _users(records=120, seed=0):
    rng = np.random.default_rng(seed)
    ids = (rng.zipf(1.7, records) - 1) % 25  # skewed: a few users hold many records
    return ids, len(np.unique(ids))


def test_each_step_samples_users_and_cycles_through_a_users_records():
    ids, n = _users()
    users, k, key, q = UserRecords(ids, 3), 3, sampling_key(5), 0.4
    used = {u: [] for u in range(users.n)}
    for step in range(12):
        index, real = users.rows(q, key, step)
        sampled = PoissonSampler(users.n, q, step_rng(key, step)).sample()
        assert len(index) == k * len(sampled)
        for g, u in enumerate(sampled):
            rows = index[g * k:(g + 1) * k][real[g * k:(g + 1) * k] > 0]
            assert set(rows) <= set(users.records[u])  # a group holds one user's records only
            assert len(rows) == min(k, len(users.records[u]))
            used[u].extend(rows.tolist())
    for u, rows in used.items():  # the cycle: every record of a user used before any is used again
        records = users.records[u].tolist()
        assert rows == [records[i % len(records)] for i in range(len(rows))]
    fresh = UserRecords(ids, 3)  # a stream started at step 12 recounts the cycle from the key
    np.testing.assert_array_equal(fresh.rows(q, key, 12)[0], users.rows(q, key, 12)[0])


def test_a_user_level_fit_records_the_user_neighbour_relation_and_does_not_compose_with_records():
    ids, n = _users()
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(len(ids), 5)).astype(np.float32), rng.integers(0, 3, len(ids))
    ledger = PrivacyLedger()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)])
    dp = tfdpmech.DPSGD(epsilon=2.0, delta=1e-5, n=n, expected_batch_size=5, epochs=1, seed=0, user_ids=ids,
                        records_per_user=4, ledger=ledger)
    model = tfdpmech.make_private(model, dp)
    model.compile(optimizer="sgd", loss=LOSS)
    model.fit(x, y, verbose=0)
    (release,) = ledger.releases
    assert release.neighbours == "add_remove_user" and release.guarantee == "proven"
    assert "add/remove one user (all of their records), every record in full" in ledger.summary()
    assert f"n={n} users" in ledger.summary()
    assert ledger.epsilon_provable() <= 2.0
    record_level = tfdpmech.DPSGD(epsilon=1.0, delta=1e-5, n=len(ids), expected_batch_size=10, epochs=1,
                                  ledger=ledger)
    record_level.ledger.record(record_level._make_release())
    assert ledger.epsilon_provable() is None  # user and record neighbours do not add up to one ε


def test_with_every_row_far_above_c_a_user_moves_the_sum_by_at_most_c():
    ids, n = _users()
    users = UserRecords(ids, 4)
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(len(ids), 5)).astype(np.float32) * 50, rng.integers(0, 3, len(ids))
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)])
    xb, yb, mask = users.batch(x, y, 0.5, 8, sampling_key(0), 0)
    fn, clip = per_example_loss(LOSS), 1e-4
    whole = clipped_gradient_sum(model, fn, xb, yb, mask, clip, "fast_clipping", group_size=4)[0]
    without = mask.copy()
    without[:4] = 0.0  # the first sampled user, with all of its records
    rest = clipped_gradient_sum(model, fn, xb, yb, without, clip, "fast_clipping", group_size=4)[0]
    moved = np.sqrt(sum(float(np.sum((a.numpy() - b.numpy()) ** 2)) for a, b in zip(whole, rest)))
    assert moved == pytest.approx(clip, rel=1e-5)


@pytest.mark.parametrize("kwargs, exc, words", [
    ({"records_per_user": 0}, ValueError, "records_per_user must be >= 1"),
    ({"records_per_user": 2.0}, TypeError, "records_per_user must be an int"),
    ({"n": 3}, ValueError, "holds \\d+ distinct users, n=3"),
    ({"user_ids": None}, ValueError, "pass user_ids"),
    ({"user_ids": np.zeros((4, 2))}, TypeError, "1-D array"),
    ({"physical_batch_size": 2}, ValueError, "physical_batch_size=2 is smaller than records_per_user=4"),
])
def test_bad_user_settings_are_refused_naming_them(kwargs, exc, words):
    ids, n = _users()
    options = dict(epsilon=1.0, delta=1e-5, n=n, expected_batch_size=5, epochs=1, user_ids=ids, records_per_user=4)
    with pytest.raises(exc, match=words):
        tfdpmech.DPSGD(**(options | kwargs))


def test_records_other_than_user_ids_describes_are_refused_before_the_release():
    ids, n = _users()
    model = tfdpmech.make_private(keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)]), tfdpmech.DPSGD(
        epsilon=1.0, delta=1e-5, n=n, expected_batch_size=5, epochs=1, user_ids=ids, records_per_user=4))
    model.compile(optimizer="sgd", loss=LOSS)
    with pytest.raises(ValueError, match=f"one id for each of {len(ids)} records, got 50"):
        model.fit(np.zeros((50, 5), np.float32), np.zeros(50, np.int64), verbose=0)
    assert len(model.privacy_ledger) == 0
