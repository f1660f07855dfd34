"""The report writer keeps what a diverged run produced instead of failing on it."""

import json
import math

import numpy as np

from tfdpmech.report.writer import json_safe


def test_non_finite_values_are_kept_as_text_and_the_rest_untouched():
    raw = {"loss": [1.5, float("nan"), np.float32("inf")], "delta": -math.inf, "n": 3, "ok": True,
           "nested": ({"a": np.float64(0.25)},), "name": "pcdbn"}
    safe = json_safe(raw)
    text = json.dumps(safe, allow_nan=False)  # strict JSON: would raise on a NaN left behind
    assert json.loads(text) == {"loss": [1.5, "NaN", "Infinity"], "delta": "-Infinity", "n": 3, "ok": True,
                                "nested": [{"a": 0.25}], "name": "pcdbn"}


def test_a_method_with_its_own_batch_and_epochs_says_what_it_ran():
    """The header's shared setting (batch, epochs) must not stand for a reference mode that trains with its own."""
    from tfdpmech.report.writer import _own_setting

    results = {"config": {"batch_size": 200, "epochs": 15},
               "runs": [{"method": "pcdbn_reference", "curve_epochs": [120, 2400], "seconds_per_epoch": [0.1] * 2400,
                         "notes": {"batch_size": 3500, "steps_per_epoch": 2, "pretrain_epochs": 10}},
                        {"method": "dpsgd", "curve_epochs": [15], "seconds_per_epoch": [0.1] * 15,
                         "notes": {"batch_size": 200}},
                        {"method": "fm_head", "curve_epochs": [1], "seconds_per_epoch": [], "notes": {}}]}
    assert _own_setting(results, "pcdbn_reference") == (
        " — this run: batch 3500, 2400 epochs, 4800 steps, 10 pre-training epochs per layer")
    assert _own_setting(results, "dpsgd") == ""  # the shared setting is what it ran
    assert _own_setting(results, "fm_head") == ""  # closed form: no epochs to state
    assert _own_setting(results, "absent") == ""


def test_run_length_is_what_ran_not_the_last_point_of_the_sampled_curve():
    """A long run's accuracy is sampled every ceil(epochs/20) epochs: 429 epochs are sampled at 22, 44, ..., 418.
    The report states the 429 epochs (3,003 steps of 7) that ran, not 418 (2,926 steps)."""
    from tfdpmech.report.writer import _own_setting

    sampled = list(range(22, 430, 22))
    assert sampled[-1] == 418
    results = {"config": {"batch_size": 1000, "epochs": 429},
               "runs": [{"method": "adlm_reference", "curve_epochs": sampled, "seconds_per_epoch": [1.0] * 429,
                         "notes": {"batch_size": 1000, "steps_per_epoch": 7}},
                        {"method": "afrrs_per_record", "curve_epochs": sampled, "seconds_per_epoch": [1.0] * 429,
                         "notes": {}},
                        {"method": "short", "curve_epochs": [2, 4], "seconds_per_epoch": [1.0] * 5, "notes": {}}]}
    assert _own_setting(results, "adlm_reference") == " — this run: batch 1000, 429 epochs, 3003 steps"
    assert _own_setting(results, "afrrs_per_record") == ""  # 429 epochs: the header's setting is what ran
    assert _own_setting(results, "short") == " — this run: 5 epochs"


def test_learning_curve_legend_shows_claimed_and_provable_epsilon():
    from tfdpmech.report.plots import step_label

    ref = {"method": "pcdbn_reference", "epsilon_target": 0.5, "epsilon_claimed": 0.5, "epsilon_provable": None,
           "seed": 0, "notes": {"batch_size": 3500}}
    assert step_label(ref) == "pcdbn_reference, claimed ε=0.5 | provable none proven (seed 0, batch 3500)"
    proven = {**ref, "method": "dpsgd", "epsilon_provable": 0.5}
    assert "claimed ε=0.5 | provable ε=0.5" in step_label(proven)
    # the legend's ε are upper bounds: rounded up, never to nearest
    assert "claimed ε=1.12 | provable ε=1 " in step_label({**proven, "epsilon_claimed": 1.1113, "epsilon_provable": 0.9999})


def test_the_header_sums_every_run_s_own_seconds_rounded_up_to_the_minute():
    from tfdpmech.report.writer import runs_time_markdown

    runs = [{"train_seconds": 3000.0, "preprocessing_seconds": 600.0},  # 1 h
            {"train_seconds": 61.0, "preprocessing_seconds": None},  # a closed-form head: train seconds only
            {"train_seconds": None, "preprocessing_seconds": 0.5}]
    (blank, line) = runs_time_markdown({"runs": runs})
    assert blank == ""
    assert line.startswith("The 3 runs in this report took 1 h 02 min of training and private preprocessing in all")
    assert runs_time_markdown({"runs": []}) == []
    assert runs_time_markdown({"runs": runs[1:2]})[1].startswith("The one run in this report took 0 h 02 min")


def test_a_new_report_replaces_a_compressed_earlier_one_in_its_folder(tmp_path):
    """One report per folder: writing results.json removes the results.json.gz of an earlier report there."""
    import gzip
    import os

    from tfdpmech.report import write_report

    committed = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "results", "mnist_head_ceiling")
    with open(os.path.join(committed, "results.json"), encoding="utf-8") as fh:
        results = json.load(fh)
    (tmp_path / "results.json.gz").write_bytes(gzip.compress(b'{"runs": []}'))
    files = write_report(results, str(tmp_path))
    assert not (tmp_path / "results.json.gz").exists()
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in files.values())
    with open(files["results.json"], encoding="utf-8") as fh:
        assert len(json.load(fh)["runs"]) == len(results["runs"]) > 0


def test_the_header_names_the_shared_recipe_only_where_some_run_trained_with_it():
    from tfdpmech.report.writer import _header_setting

    cfg = {"model": "bert_tiny", "epochs": 15, "batch_size": 200}
    own = {"method": "dpsgd_text_head", "notes": {"recipe": "TEXT_DPSGD_RECIPE"}}
    public = {"method": "public_only", "notes": {"private_records_used": 0}}
    assert _header_setting(cfg, [own, public]).startswith("each method's own network and recipe")
    shared = {"method": "dpsgd", "notes": {}}
    assert _header_setting(cfg, [own, public, shared]) == "model bert_tiny, 15 epochs, batch 200"
    assert _header_setting(cfg, []) == "model bert_tiny, 15 epochs, batch 200"
