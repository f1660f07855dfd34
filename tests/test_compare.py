"""The comparison runner: output perturbation (ε per query, claimed vs proven), the MIA audit, divergence."""

import dataclasses

import pytest

from tfdpmech.audit.membership_inference import tf_privacy_attacks_available
from tfdpmech.compare import CompareConfig, run_comparison
from tfdpmech.report import markdown_table, summarize


@pytest.fixture(scope="module")
def results():
    config = CompareConfig(methods=("nonprivate", "outpert", "outpert_all_logits"), epsilons=(0.01, 100.0),
                           seeds=(0,), epochs=2, verbose=0)
    return run_comparison(config)


def _by(results):
    return {(r["method"], r["epsilon_target"]): r for r in results["runs"]}


def test_epsilon_is_per_query_and_paper_mode_is_claimed_only(results):
    by = _by(results)
    for eps in (0.01, 100.0):
        paper, all_logits = by[("outpert", eps)], by[("outpert_all_logits", eps)]
        for run in (paper, all_logits):
            assert run["per"] == "query"
            assert run["epsilon_claimed"] == pytest.approx(eps)  # one query
            (release,) = run["ledger"]["releases"]
            assert release["details"]["queries"] == 1 and release["mechanism"].endswith("/laplace")
        assert paper["epsilon_provable"] is None and paper["reproduction"]
        assert all_logits["epsilon_provable"] == pytest.approx(eps) and not all_logits["reproduction"]
        assert all_logits["ledger"]["releases"][0]["details"]["conditional_on"] == "sensitivity bound"
    assert by[("nonprivate", None)]["per"] == "training"


def test_noise_scales_with_epsilon(results):
    by = _by(results)
    # at ε = 0.01 per query the Laplace scale is thousands of logit units: near chance (10 classes)
    assert by[("outpert_all_logits", 0.01)]["test_accuracy"] < 0.3
    assert by[("outpert_all_logits", 100.0)]["test_accuracy"] > 0.7
    assert by[("outpert", 100.0)]["test_accuracy"] > 0.7


def test_report_marks_per_query_and_the_conditional_proof(results):
    rows = summarize(results)
    table = markdown_table(rows)
    assert "100 per query (reproduction)" in table
    assert "100 per query (given the sensitivity bound)" in table
    assert "acc loss" in table and "MIA adv." in table
    nonprivate = next(r for r in rows if r["method"] == "nonprivate")
    assert nonprivate["accuracy_loss"] == pytest.approx(0.0)
    low = next(r for r in rows if r["method"] == "outpert_all_logits" and r["epsilon_target"] == 0.01)
    assert low["accuracy_loss"] == pytest.approx(1 - low["accuracy_mean"] / nonprivate["accuracy_mean"])


def test_membership_inference_audit(results):
    if not tf_privacy_attacks_available():
        assert results["membership_inference"].startswith("tensorflow-privacy's membership-inference attacks")
        assert all(r["membership_inference"] is None for r in results["runs"])
        pytest.skip("tensorflow-privacy's attack code is not installed (see the note in the results)")
    assert results["membership_inference"] == "run"
    floor = results["membership_inference_floor"]  # attacks on outputs with no membership signal
    assert 0 < floor["mean"] <= floor["max"] < 0.1
    for run in results["runs"]:
        mia = run["membership_inference"]
        assert set(mia["attacks"]) == {"THRESHOLD_ATTACK", "LOGISTIC_REGRESSION"}
        assert mia["advantage"] == max(a["advantage"] for a in mia["attacks"].values())
        assert 0 <= mia["advantage"] <= 1 and mia["members"] == mia["non_members"] == 2000


def test_audit_can_be_switched_off():
    config = CompareConfig(methods=("outpert_all_logits",), epsilons=(1.0,), seeds=(0,), epochs=1, verbose=0,
                           audit=False)
    res = run_comparison(config)
    assert res["membership_inference"] == "off (audit=False)"
    assert res["runs"][0]["membership_inference"] is None
    assert dataclasses.asdict(config)["audit"] is False


def test_nan_outputs_are_flagged_as_diverged_not_scored():
    import keras
    import numpy as np

    from tfdpmech.compare import EpochRecorder

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.set_weights([np.full((3, 2), np.nan, np.float32), np.zeros(2, np.float32)])
    recorder = EpochRecorder(np.ones((4, 3), np.float32), np.array([0, 1, 0, 1]))
    recorder.set_model(model)
    recorder.on_epoch_begin(0)
    recorder.on_epoch_end(0)
    assert recorder.non_finite == [True]
    rows = [{"method": "m", "epsilon_target": 1.0, "epsilon_claimed": 1.0, "epsilon_provable": None, "delta": 0.0,
             "reproduction": False, "private": True, "accuracy_mean": 0.5, "accuracy_std": 0.0, "seeds": 2,
             "diverged": 1, "seconds_per_epoch": 1.0, "examples_per_second": 1.0, "preprocessing_seconds": 0.0,
             "peak_memory_mb": 1.0}]
    assert "(1 diverged: NaN outputs)" in markdown_table(rows)
