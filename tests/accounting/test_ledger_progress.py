"""The ledger shows which releases were followed by fewer steps than planned (the charge stays the plan's)."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest

from tfdpmech.accounting.ledger import PrivacyLedger, Release
from tfdpmech.mechanisms.dpsgd import ShuffledDPSGD
from tfdpmech import DPSGD, make_private

LOSS = keras.losses.CategoricalCrossentropy(from_logits=True)


def _planned(steps=40):
    return Release("dpsgd_training", "dpsgd", 1.0, 1.0, "Poisson DP-SGD", delta=1e-5, details={"steps_planned": steps})


def test_a_release_followed_by_fewer_steps_is_shown_with_its_full_charge():
    ledger = PrivacyLedger()
    release = ledger.record(_planned())
    full = ledger.summary()
    ledger.record_progress(release, 12)
    summary = ledger.summary()
    assert "steps: 12 of the 40 planned ran" in summary and "steps:" not in full
    assert summary.splitlines()[-1] == full.splitlines()[-1]  # the total is unchanged: charged for all 40
    assert ledger.epsilon_provable() == 1.0
    ledger.record_progress(release, 40)
    assert "steps:" not in ledger.summary()
    with pytest.raises(ValueError, match="step count must be an int >= 0"):
        ledger.record_progress(release, -1)
    with pytest.raises(ValueError, match="not in this ledger"):
        ledger.record_progress(_planned(), 3)


def test_the_counts_are_saved_and_a_bound_file_holds_them(tmp_path):
    ledger = PrivacyLedger()
    release = ledger.record(_planned())
    ledger.record_progress(release, 7)
    ledger.save(tmp_path / "saved.json")
    assert "7 of the 40 planned" in PrivacyLedger.load(tmp_path / "saved.json").summary()
    bound = PrivacyLedger.open(tmp_path / "bound.json")
    release = bound.record(_planned(10))
    bound.record_progress(release, 3)  # written to the file at once: what a killed process leaves behind
    assert json.loads((tmp_path / "bound.json").read_text())["progress"] == {"0": 3}
    assert "3 of the 10 planned" in PrivacyLedger.load(tmp_path / "bound.json").summary()
    bad = json.loads((tmp_path / "bound.json").read_text())
    bad["progress"] = {"5": 1}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="names release '5', but the ledger holds 1"):
        PrivacyLedger.load(tmp_path / "bad.json")


def test_a_private_model_that_stopped_early_shows_its_steps(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.random((80, 4)).astype(np.float32), keras.utils.to_categorical(rng.integers(0, 2, 80), 2)
    ledger = PrivacyLedger.open(tmp_path / "ledger.json")
    model = make_private(keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]), DPSGD(epsilon=2.0, delta=1e-3, n=80,
                         expected_batch_size=20, epochs=3, seed=0, ledger=ledger))
    model.compile(loss=LOSS)
    assert len(ledger) == 0  # compiled, nothing run: make_private's model records its release at the first fit
    model.fit(x, y, epochs=1, verbose=0)
    assert "steps: 4 of the 12 planned ran" in ledger.summary()
    assert "steps: 4 of the 12 planned ran" in PrivacyLedger.load(tmp_path / "ledger.json").summary()
    model.fit(x, y, epochs=2, verbose=0)
    assert "steps:" not in ledger.summary()


def test_a_shuffled_run_that_ran_its_whole_plan_shows_no_shortfall():
    rng = np.random.default_rng(1)
    x, y = rng.random((90, 4)).astype(np.float32), keras.utils.to_categorical(rng.integers(0, 2, 90), 2)
    dp = ShuffledDPSGD(2.0, 1e-3, 20, 1, 90, drop_remainder=True, engine="tfdpmech")  # 4 full batches, 10 records sit out
    model = dp.compile(keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]))
    assert "steps: 0 of the 4 planned ran" in dp.ledger.summary()
    model.fit(dp.dataset(x, y), epochs=1, verbose=0)
    assert dp.steps_taken() == 4 and "steps:" not in dp.ledger.summary()
