"""The one runner: ε per query vs per training, claimed vs proven, the MIA audit, divergence, bad config."""

import numpy as np
import pytest

from tfdpmech.audit.mia_run import mia_implementation
from tfdpmech.experiments import CompareConfig, run_comparison
from tfdpmech.experiments.measuring import EpochRecorder
from tfdpmech.report import markdown_table, summarize

SMALL = {"max_private": 2000, "max_test": 1000}


@pytest.fixture(scope="module")
def results():
    config = CompareConfig(methods=("nonprivate", "outpert_reference", "outpert_paper_bound"), epsilons=(0.01, 100.0),
                           seeds=(0,), epochs=2, verbose=0, options=SMALL)
    return run_comparison(config)


def _by(results):
    return {(r["method"], r["epsilon_target"]): r for r in results["runs"]}


def test_epsilon_is_per_query_and_neither_lu_mode_is_proven(results):
    by = _by(results)
    assert results["config"]["methods"] == ("nonprivate", "outpert_reference", "outpert_paper_bound")
    for eps in (0.01, 100.0):
        reference, private = by[("outpert_reference", eps)], by[("outpert_paper_bound", eps)]
        for run in (reference, private):
            assert run["per"] == "query"
            assert run["epsilon_claimed"] == pytest.approx(eps)  # one query
            (release,) = run["ledger"]["releases"]
            assert release["details"]["queries"] == 1 and release["mechanism"].endswith("/laplace")
            assert run["epsilon_provable"] is None and run["mode"] == "reference"
            assert release["neighbours"] == "add_remove"  # Lu et al. §3
        assert reference["provable_basis"]  # the reason there is no proof
        # noise on every logit would be ε-DP if Δz_T were a bound; it is not, and a conditional proof is none
        assert "Δz_T" in private["provable_basis"] and "no proof" in private["provable_basis"]
        assert private["ledger"]["releases"][0]["details"]["epsilon_if_the_bound_held"] == pytest.approx(eps)
    assert by[("nonprivate", None)]["per"] == "training" and by[("nonprivate", None)]["mode"] == "none"


def test_noise_scales_with_epsilon(results):
    by = _by(results)
    # at ε = 0.01 per query the Laplace scale is thousands of logit units: near chance (10 classes)
    assert by[("outpert_paper_bound", 0.01)]["accuracy"] < 0.3
    assert by[("outpert_paper_bound", 100.0)]["accuracy"] > 0.6
    assert by[("outpert_reference", 100.0)]["accuracy"] > 0.6


def test_report_marks_per_query_none_proven_and_the_neighbour_relation(results):
    rows = summarize(results)
    table = markdown_table(rows)
    assert "| outpert_paper_bound | reference | 100 | 100 per query | none proven | add/remove, record |" in table
    assert "given the" not in table  # no proof conditional on an unproven bound is shown as a proof
    assert "| nonprivate | none | – | ∞ (no privacy) | ∞ (no privacy) | – (no privacy) |" in table
    nonprivate = next(r for r in rows if r["method"] == "nonprivate")
    assert nonprivate["accuracy_loss"] == pytest.approx(0.0)
    low = next(r for r in rows if r["method"] == "outpert_paper_bound" and r["epsilon_target"] == 0.01)
    assert low["accuracy_loss"] == pytest.approx(1 - low["accuracy_mean"] / nonprivate["accuracy_mean"])


def test_membership_inference_audit(results):
    """Runs on every stack: tensorflow-privacy's attacks where they import, tfdpmech's scikit-learn ones elsewhere."""
    from tfdpmech.report.writer import report_markdown

    mia = results["audit"]["mia"]
    assert mia["status"] == "run"
    assert mia["implementation"] == mia_implementation() in ("tensorflow_privacy", "tfdpmech")
    who = "tensorflow-privacy" if mia["implementation"] == "tensorflow_privacy" else "tfdpmech"
    assert f"- audit mia: the threshold and logistic-regression attacks of {who}" in report_markdown(results)
    floor = results["audit"]["mia"]["floor"]["mnist_sample"]  # attacks on outputs with no membership signal
    assert 0 < floor["mean"] <= floor["max"] < 0.15
    assert floor["implementation"] == mia["implementation"]
    for run in results["runs"]:
        assert 0 <= run["mia_advantage"] <= 1


def test_audit_can_be_switched_off():
    res = run_comparison(CompareConfig(methods=("outpert_paper_bound",), epsilons=(1.0,), seeds=(0,), epochs=1, verbose=0,
                                       audit=(), options=SMALL))
    assert res["audit"] == {} and res["runs"][0]["mia_advantage"] is None


def test_examples_per_second_leave_out_the_first_epoch_of_every_part():
    """A resumed run traces its model again: that epoch is not a steady one, whichever part it starts."""
    scores = lambda x: np.eye(2)[np.zeros(len(x), int)]  # noqa: E731
    first = EpochRecorder(np.ones((2, 1)), np.array([0, 1]), scores)
    assert first.part_starts == [0] and first.steady_seconds() == []
    for epoch in range(2):
        first.on_epoch_begin(epoch)
        first.on_epoch_end(epoch)
    assert first.steady_seconds() == first.seconds[1:]
    before = {"epochs_done": 2, "seconds": [9.0, 1.0], "accuracy": [0.5, 0.5], "curve_epochs": [1, 2],
              "part_starts": first.part_starts}
    resumed = EpochRecorder(np.ones((2, 1)), np.array([0, 1]), scores, before=before)
    for epoch in range(2):
        resumed.on_epoch_begin(epoch)
        resumed.on_epoch_end(epoch)
    assert resumed.part_starts == [0, 2] and resumed.epochs == [1, 2, 3, 4]
    assert resumed.steady_seconds() == [1.0, resumed.seconds[3]]
    # a part saved before part starts were kept: the current part's start is still left out
    legacy = EpochRecorder(np.ones((2, 1)), np.array([0, 1]), scores, before={k: v for k, v in before.items()
                                                                                if k != "part_starts"})
    assert legacy.part_starts == [0, 2]


def test_nan_outputs_are_flagged_as_diverged_not_scored():
    import keras

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.set_weights([np.full((3, 2), np.nan, np.float32), np.zeros(2, np.float32)])
    recorder = EpochRecorder(np.ones((4, 3), np.float32), np.array([0, 1, 0, 1]),
                             lambda x: model.predict(x, verbose=0))
    recorder.on_epoch_begin(0)
    recorder.on_epoch_end(0)
    assert recorder.accuracy == [0.5]  # argmax of NaN is 0: the runner flags this via `diverged`
    rows = [{"dataset": "d", "method": "m", "mode": "private", "epsilon_target": 1.0, "epsilon_claimed": 1.0,
             "epsilon_provable": None, "epsilon_lower_bound": None, "delta": 0.0, "private": True, "per": "training",
             "conditional_on": [], "accuracy_mean": 0.5, "accuracy_std": 0.0, "seeds": 2, "diverged": 1,
             "accuracy_loss": None, "mia_advantage": None, "train_seconds": 1.0, "examples_per_second": 1.0,
             "preprocessing_seconds": 0.0, "peak_memory_mb": 1.0}]
    assert "(1 diverged: NaN outputs)" in markdown_table(rows)


@pytest.mark.parametrize("changes, message", [
    (dict(methods=()), "no methods"),
    (dict(methods=("nope",)), "unknown method 'nope'"),
    (dict(datasets=("imagenet",)), "unknown dataset 'imagenet'"),
    (dict(epsilons=()), "ε list is empty"),
    (dict(epsilons=(1.0, -2.0)), "epsilon"),
    (dict(delta=1.5), "delta"),
    (dict(model="resnet"), "model='resnet'"),
    (dict(audit=("psychic",)), "unknown audit"),
    (dict(public=-3), "public=-3"),
    (dict(methods=("ip_private",)), "runs on tabular data"),
    (dict(methods=("adlm_per_record",), public=0), "needs public data"),
    (dict(published=({"label": "P", "epsilon": 1.0, "accuracy": None, "source": "s"},)), "'claim' saying why"),
    (dict(published=({"label": "P", "epsilon": 1.0, "accuracy": 1.5, "source": "s"},)), "accuracy in"),
])
def test_bad_configuration_is_refused_before_any_training(changes, message):
    config = CompareConfig(**{**dict(methods=("nonprivate",), verbose=0), **changes})
    with pytest.raises((ValueError, TypeError), match=message):
        config.validate()


@pytest.mark.dpsgd
def test_a_run_whose_epsilon_no_noise_certifies_is_skipped_with_the_reason_and_the_rest_go_on():
    from tfdpmech.report.writer import report_markdown

    config = CompareConfig(datasets=("breast_cancer",), methods=("nonprivate", "dpsgd"), epsilons=(0.001, 1.0),
                           seeds=(0,), epochs=20, model="linear", public=0, audit=(), verbose=0)
    results = run_comparison(config)
    assert [(r["method"], r["epsilon_target"]) for r in results["runs"]] == [("nonprivate", None), ("dpsgd", 1.0)]
    (skip,) = results["skipped"]
    assert (skip["method"], skip["epsilon_target"], skip["seed"]) == ("dpsgd", 0.001, 0)
    assert "cannot be certified" in skip["reason"]
    assert "**skipped** dpsgd on breast_cancer at target ε=0.001" in report_markdown(results)


def test_per_record_modes_at_a_batch_size_that_cannot_meet_the_target_are_skipped_before_training():
    """At batch 1,000 and ε = 0.6 (reproduce-afrrs) the per-record modes prove 3.49 per record on the CNN (ILM:
    3.34 for the 0.45 it spends) whatever the number of records: 2,000 of them give the refusal of 59,000."""
    config = CompareConfig(methods=("afrrs_per_record", "adlm_per_record", "ilm_per_record"), epsilons=(0.6,),
                           seeds=(0,), epochs=1, batch_size=1000, model="cnn", public=300, audit=(), verbose=0,
                           options={"max_private": 2000, "max_test": 200, "gamma": 0.1})
    results = run_comparison(config)
    assert [r["method"] for r in results["runs"]] == ["public_only"]
    skipped = {s["method"]: s["reason"] for s in results["skipped"]}
    assert set(skipped) == {"afrrs_per_record", "adlm_per_record", "ilm_per_record"}
    assert "ε = 3.49 per record" in skipped["afrrs_per_record"] and "batch_size <= 135" in skipped["afrrs_per_record"]
    assert "ε = 3.34 per record" in skipped["ilm_per_record"]  # ε2 + ε3 = 0.45 asked: no relevance step
