"""People in a comparison: the Zipf assignment of records to users, user-level DP-SGD rows, and each record-level
row's group-privacy ε for the largest user, in the run's notes and the report."""

from __future__ import annotations

import numpy as np
import pytest

from tfdpmech.accounting.group_privacy import group_epsilon_delta
from tfdpmech.experiments import preset_config, run_comparison
from tfdpmech.experiments.runner import CompareConfig
from tfdpmech.experiments.users import largest_user_note, zipf_user_ids
from tfdpmech.report import write_report


def test_every_record_has_one_user_with_zipf_counts_and_the_same_draw_each_time():
    ids = zipf_user_ids(10_000, 100, 1.0)
    counts = np.bincount(ids, minlength=100)
    assert len(ids) == 10_000 and counts.min() >= 1 and counts.sum() == 10_000
    assert np.all(np.diff(counts) <= 0)  # user j holds a share ∝ 1/j: counts fall with j
    assert counts[0] == pytest.approx((10_000 - 100) / np.sum(1.0 / np.arange(1, 101)) + 1, abs=1)
    np.testing.assert_array_equal(ids, zipf_user_ids(10_000, 100, 1.0))
    assert not np.array_equal(ids[:100], np.sort(ids[:100]))  # which records a user holds is shuffled


@pytest.mark.parametrize("users,exponent,named", [(0, 1.0, "users"), (11, 1.0, "users"), (5, 0.0, "user_zipf")])
def test_an_assignment_that_cannot_be_made_is_refused_naming_the_option(users, exponent, named):
    with pytest.raises(ValueError, match=named):
        zipf_user_ids(10, users, exponent)


def test_the_largest_user_note_is_group_privacy_for_add_remove_record_runs_only():
    ids = np.array([0, 0, 0, 1, 2, 2])
    note = largest_user_note(ids, "add_remove", "record", 1.0, 1e-5)["largest_user"]
    assert note["records"] == 3
    assert (note["epsilon"], note["delta"]) == group_epsilon_delta(1.0, 1e-5, 3)
    assert largest_user_note(ids, "add_remove_user", "record", 1.0, 1e-5) == {}
    assert largest_user_note(ids, "replace_one", "record", 1.0, 1e-5) == {}
    assert largest_user_note(ids, "add_remove", "record", None, 1e-5) == {}
    assert largest_user_note(None, "add_remove", "record", 1.0, 1e-5) == {}


def test_dpsgd_user_without_users_is_refused_before_training():
    config = CompareConfig(methods=("dpsgd_user",), epsilons=(3.0,), seeds=(0,), model="tanh_cnn", public=0,
                           audit=(), verbose=0, options={"max_private": 200, "max_test": 100, "user_epochs": 1})
    with pytest.raises(ValueError, match="--users"):
        run_comparison(config)


@pytest.mark.slow  # two DP-SGD trainings of the tanh CNN (the users preset's quick variant on the embedded sample)
def test_a_comparison_with_users_runs_both_levels_and_reports_each_for_a_person(tmp_path):
    config = preset_config("users", quick=True, datasets=("mnist_sample",), verbose=0)
    results = run_comparison(config)
    by = {r["method"]: r for r in results["runs"]}
    record, user = by["dpsgd"], by["dpsgd_user"]
    assert user["notes"]["user_level"]["users"] == 60 and user["notes"]["user_level"]["records_per_user"] == 4
    assert "largest_user" not in user["notes"]
    assert user["ledger"]["releases"][-1]["neighbours"] == "add_remove_user"
    assert user["epsilon_provable"] <= 3.0 * (1 + 1e-9)
    note = record["notes"]["largest_user"]
    m = int(np.bincount(zipf_user_ids(600, 60)).max())
    assert note["records"] == m
    assert note["epsilon"] == pytest.approx(m * record["epsilon_provable"])
    text = open(write_report(results, str(tmp_path))["results.md"], encoding="utf-8").read()
    assert "## Privacy per person" in text
    assert "| mnist_sample | dpsgd | 0 |" in text and "none proven" in text  # m·ε at ε = 3 leaves δ_m ≥ 1
    assert "| mnist_sample | dpsgd_user | 0 | – (user level, up to 4 records" in text


def test_a_user_level_recipe_point_becomes_the_options_its_runs_read():
    from tfdpmech.experiments.methods.mnist_recipes import TANH_CNN_RECIPE, epochs_for, recipe_for
    from tfdpmech.experiments.users import user_level_options

    for point in ({"expected_users": 1024, "epochs": 10, "learning_rate": 0.5},
                  {"expected_users": 2048, "epochs": 20, "learning_rate": 4.0}):
        options = user_level_options(6000, 8, point)
        assert options["users"] == 6000 and options["records_per_user"] == 8
        recipe = recipe_for(options, 3.0, TANH_CNN_RECIPE, "user")
        # the point's users a step on 6,000 users, its epochs and step; the rest the record-level recipe's
        assert recipe.batch_for(6000) == point["expected_users"] and recipe.epochs == point["epochs"]
        assert recipe.learning_rate == point["learning_rate"] and recipe.l2_norm_clip == TANH_CNN_RECIPE.l2_norm_clip
        assert epochs_for(options, 3.0, 40, "user_epochs") == point["epochs"]


@pytest.mark.parametrize("args, exc, words", [
    ((6000, 8, {"expected_users": 1024, "epochs": 10}), ValueError, "learning_rate'\\] missing"),
    ((0, 8, {"expected_users": 1024, "epochs": 10, "learning_rate": 0.5}), ValueError, "users"),
    ((6000, 8, {"expected_users": 1024, "epochs": 0, "learning_rate": 0.5}), ValueError, "epochs"),
    ((6000, 8, {"expected_users": 1024, "epochs": 10, "learning_rate": float("nan")}), ValueError, "learning_rate"),
])
def test_a_bad_user_level_recipe_point_is_refused_naming_the_field(args, exc, words):
    from tfdpmech.experiments.users import user_level_options

    with pytest.raises(exc, match=words):
        user_level_options(*args)
