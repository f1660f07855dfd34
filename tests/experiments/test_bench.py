"""The benchmark's arithmetic: time to a target accuracy, median and spread over repeats; one tiny run."""

import argparse
import json

import pytest

from tfdpmech.experiments.bench import main, summarize_repeats, time_to_accuracy


def test_time_to_accuracy_counts_preprocessing_and_stops_at_the_first_epoch_reaching_it():
    run = {"preprocessing_seconds": 2.0, "seconds_per_epoch": [1.0, 1.0, 1.0], "accuracy_curve": [0.5, 0.8, 0.9],
           "train_seconds": 3.0}
    assert time_to_accuracy(run, 0.8) == pytest.approx(4.0)
    assert time_to_accuracy(run, 0.95) is None


def test_time_to_accuracy_sums_every_epoch_up_to_an_evaluation_made_every_few_epochs():
    # accuracy measured after epochs 2 and 4 only (EpochRecorder's every=2): reaching 0.8 at epoch 4 costs
    # all four epochs, not the first two (the curve has fewer points than there are epochs)
    run = {"preprocessing_seconds": 0.5, "seconds_per_epoch": [3.0, 1.0, 1.0, 1.0], "accuracy_curve": [0.5, 0.8],
           "curve_epochs": [2, 4], "train_seconds": 6.0}
    assert time_to_accuracy(run, 0.8) == pytest.approx(6.5)
    assert time_to_accuracy(run, 0.5) == pytest.approx(4.5)
    assert time_to_accuracy(run, 0.9) is None


def test_time_to_accuracy_of_a_method_without_epochs_is_its_preprocessing_plus_train_time():
    run = {"preprocessing_seconds": 0.25, "seconds_per_epoch": [], "accuracy_curve": [0.9], "curve_epochs": [1],
           "train_seconds": 0.01}
    assert time_to_accuracy(run, 0.9) == pytest.approx(0.26)


def test_summary_of_repeats():
    s = summarize_repeats([3.0, 1.0, 2.0, None, float("nan"), 4.0])
    assert s == {"median": 2.5, "min": 1.0, "max": 4.0, "iqr": pytest.approx(1.5), "repeats": 4}
    assert summarize_repeats([None]) is None


@pytest.mark.slow
def test_tiny_bench_writes_ratios_with_spread(tmp_path, capsys):
    out = tmp_path / "bench.json"
    args = argparse.Namespace(out=str(out), repeats=2, epochs=1, epsilon=1.0, max_private=600,
                              methods=("nonprivate", "public_only", "ilm_per_record", "fm_head_gauss"), no_memory=True,
                              no_dpsgd_speed=True, no_sources=True)
    assert main(args) == 0
    result = json.loads(out.read_text())
    ratio = result["methods"]["ilm_per_record"]["throughput_ratio_to_baseline"]
    assert ratio["repeats"] == 2 and ratio["min"] <= ratio["median"] <= ratio["max"]
    assert result["environment"]["device"].startswith(("CPU", "GPU"))
    head = result["methods"]["fm_head_gauss"]  # the private part happens in preprocessing, once
    assert head["examples_per_second"] is None
    cost = head["preprocessing_over_one_baseline_epoch"]
    assert cost["repeats"] == 2 and cost["median"] > 0
    core = head["statistics_release_solve_over_one_baseline_epoch"]  # a part of the preprocessing
    assert core["repeats"] == 2 and 0 < core["median"] <= cost["median"]
    # the public model is trained once per seed outside every method's own time, and reported beside
    public = head["public_training_seconds"]
    assert public["repeats"] == 2 and public["min"] > 0
    assert result["methods"]["public_only"]["public_training_seconds"] == public
    assert result["methods"]["public_only"]["preprocessing_seconds"]["max"] == 0.0
    assert result["methods"]["ilm_per_record"]["public_training_seconds"] is None
    printed = capsys.readouterr().out
    assert "median [min–max]" in printed
    # every row shows claimed and provable ε and the neighbour relation; public_only is ε = 0, not "no privacy"
    privacy = head["privacy"]
    assert privacy["epsilon_claimed"] == privacy["epsilon_provable"] == 1.0 and privacy["delta"] == 1e-5
    assert (privacy["neighbours"], privacy["protects"]) == ("replace_one", "record")
    assert "| fm_head_gauss | 1 | 1 | replace-one, record |" in printed
    assert "| public_only | 0 (private data unused) | 0 (private data unused) | – (private data unused) |" in printed
    assert "| nonprivate | ∞ (no privacy) | ∞ (no privacy) | – (no privacy) |" in printed
    assert "| method | claimed ε | provable ε | neighbours, protects |" in printed


def test_printed_table_says_when_only_some_repeats_reached_the_target():
    from tfdpmech.experiments.bench import _print

    some = {"median": 0.12, "min": 0.12, "max": 0.12, "iqr": 0.0, "repeats": 1}
    every = {"median": 1.0, "min": 0.9, "max": 1.1, "iqr": 0.1, "repeats": 5}
    method = {"privacy": {"private": True, "per": "training", "epsilon_claimed": 1.0, "epsilon_provable": 1.0,
                          "neighbours": "replace_one",
                          "protects": "record"},
              "accuracy": every, "examples_per_second": None, "throughput_ratio_to_baseline": None,
              "preprocessing_seconds": every, "preprocessing_over_one_baseline_epoch": every,
              "time_to_dpsgd_accuracy_seconds": some, "time_to_accuracy_speedup_vs_dpsgd": some,
              "public_training_seconds": None, "time_to_dpsgd_accuracy_with_public_training_seconds": None,
              "time_to_accuracy_with_public_training_speedup_vs_dpsgd": None}
    lines = []
    _print({"baseline": "nonprivate", "settings": {"repeats": 5}, "methods": {"head": method}}, log=lines.append)
    row = next(line for line in lines if line.startswith("| head"))
    assert row.count("(1 of 5 repeats)") == 2 and "(5 of 5" not in row
