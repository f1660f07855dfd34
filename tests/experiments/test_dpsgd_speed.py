"""The DP-SGD engine speed table: every variant that runs here, ratios taken within a repeat."""

from __future__ import annotations

import json

import numpy as np

import pytest

from tfdpmech.mechanisms.dpsgd.runs.paths import tf_privacy_available
from tfdpmech.experiments import dpsgd_speed
from tfdpmech.mechanisms.dpsgd.sampling.position_weights import split_position_weights


def test_variants_name_tensorflow_privacy_only_where_it_imports():
    labels = [label for label, _, _ in dpsgd_speed.variants("cnn")]
    assert labels[:4] == ["nonprivate", "tfdpmech fast_clipping", "tfdpmech fast_clipping, padded to P",
                          "tfdpmech vectorized"]
    assert any(label.startswith("tensorflow_privacy") for label in labels) == tf_privacy_available()
    assert "tensorflow_privacy fast_clipping" not in labels  # no Conv2D rule in tensorflow-privacy



def test_the_five_applications_are_timed_at_the_batches_users_train_with():
    from tfdpmech.experiments.speed_models import KERAS_3, MODELS

    if not KERAS_3:
        pytest.skip("the keras.applications entries are Keras 3's")
    names = ("mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "resnet50", "convnext_tiny")
    for rows in (32, 128):
        for name in names:
            spec = MODELS[f"{name}_b{rows}"]
            assert (spec.kind, spec.expected) == ("image32", rows)
            assert [label for label, _, _ in dpsgd_speed.variants(f"{name}_b{rows}")] == [
                "nonprivate", "tfdpmech fast_clipping"]
    assert any("physical batch" in label for label, _, _ in dpsgd_speed.variants("mobilenet_v2"))

@pytest.mark.slow
def test_a_tiny_run_reports_every_variant_with_ratios():
    result = dpsgd_speed.run(models=("mlp",), repeats=1, steps={"mlp": 2}, memory=False, log=lambda *_: None)
    rows = result["models"]["mlp"]["variants"]
    assert set(rows) == {label for label, _, _ in dpsgd_speed.variants("mlp")}
    assert rows["nonprivate"]["ratio_to_nonprivate"]["median"] == pytest.approx(1.0)
    assert rows["nonprivate"]["rows"] == 1750 and rows["tfdpmech fast_clipping"]["rows"] == 1752  # a multiple of 8
    assert rows["tfdpmech fast_clipping, padded to P"]["rows"] == dpsgd_speed.padded_batch_size(7000, 0.25)
    assert rows["tfdpmech fast_clipping"]["path"] == "fast_clipping"
    for label, row in rows.items():
        assert row["examples_per_second"]["median"] > 0
        assert ("ratio_to_tensorflow_privacy" in row) == (label.startswith("tfdpmech") and tf_privacy_available())
    table = dpsgd_speed.format_table(result)
    assert "tfdpmech fast_clipping" in table and result["tensorflow"] in table


@pytest.mark.parametrize("argv, named", [(["--models", "mlp,resnet"], "resnet"), (["--models", ","], "--models"),
                                         (["--repeats", "0"], "--repeats=0")])
def test_the_command_refuses_an_unknown_model_or_no_repeats_before_timing(argv, named, capsys):
    with pytest.raises(SystemExit) as exit_info:
        dpsgd_speed.main(argv)
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err


@pytest.mark.slow
def test_the_command_writes_its_table_and_numbers(tmp_path, monkeypatch):
    original = dpsgd_speed.run_isolated
    monkeypatch.setattr(dpsgd_speed, "run_isolated", lambda models, repeats, memory, **kw: original(
        models, repeats=repeats, memory=memory, steps={"mlp": 2}, **kw))
    assert dpsgd_speed.main(["--models", "mlp", "--repeats", "1", "--no-memory", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "--models mlp --repeats 1" in text and "tfdpmech fast_clipping" in text
    assert json.loads((tmp_path / "results.json").read_text())["models"]["mlp"]["steps"] == 2


def test_memory_per_record_is_the_peak_growth_from_batch_l_to_4l_per_added_record(monkeypatch):
    peaks = {1: 300.0, 4: 300.0 + 3 * 512 * 0.25 / 1024}  # MiB at L and 4L: 0.25 KiB per added record
    monkeypatch.setattr(dpsgd_speed, "_peak_rss_growth", lambda name, label, steps, batch_scale=1: peaks[batch_scale])
    assert dpsgd_speed.MODELS["tanh_cnn"].expected == 512
    assert dpsgd_speed._memory_per_record("tanh_cnn", "nonprivate", 2, peaks[1]) == pytest.approx(0.25)
    assert dpsgd_speed._memory_per_record("tanh_cnn", "nonprivate", 2, None) is None


@pytest.mark.parametrize("models, repeats, named", [(("mlp", "resnet"), 1, "resnet"), ((), 1, "models="),
                                                    (("mlp",), 0, "repeats=0")])
def test_run_isolated_refuses_an_unknown_model_or_no_repeats_before_starting_a_process(models, repeats, named):
    with pytest.raises(ValueError, match=named):
        dpsgd_speed.run_isolated(models, repeats=repeats, memory=False)


@pytest.mark.skipif(not dpsgd_speed.KERAS_3, reason="the application models are listed on Keras 3")
def test_the_applications_are_timed_on_the_ghost_path_with_and_without_a_physical_batch():
    labels = [label for label, _, _ in dpsgd_speed.variants("mobilenet_v2")]
    assert labels == ["nonprivate", "tfdpmech fast_clipping",
                      f"tfdpmech fast_clipping, physical batch {dpsgd_speed.PHYSICAL_BATCH}"]
    x, y, mask = dpsgd_speed._batch(dpsgd_speed.MODELS["resnet50"], 8)
    assert x.shape == (8, 32, 32, 3) and y.shape == (8, 10) and mask.sum() == 8


def test_the_group_variants_clip_units_of_four_rows_on_as_many_rows_as_the_others():
    spec = dpsgd_speed.MODELS["mlp"]
    for label in (dpsgd_speed.VIEWS, dpsgd_speed.USERS):
        assert label in [lab for lab, _, _ in dpsgd_speed.variants("mlp")]
        dp = dpsgd_speed._grouped_run(label, spec)
        assert dp.group_size == 4 and dp.expected_batch_size == spec.expected // 4
        assert dpsgd_speed._rows(spec, label) == dpsgd_speed._rows(spec, "tfdpmech fast_clipping")
    assert dpsgd_speed._grouped_run(dpsgd_speed.USERS, spec).n == spec.n // 4  # users of 4 records each
    assert dpsgd_speed.VIEWS not in [lab for lab, _, _ in dpsgd_speed.variants("cnn")]


def test_the_command_keeps_each_model_as_it_finishes_and_resumes(tmp_path, monkeypatch):
    import subprocess
    import sys

    import keras
    import tensorflow as tf

    measured = []

    def fake_run(argv, **kwargs):  # one model's fresh process: a result of the shape run() gives
        name = argv[-1].split("models=('")[1].split("'")[0]
        measured.append(name)
        one = {"tensorflow": tf.__version__, "keras": keras.__version__,
               "python": ".".join(map(str, sys.version_info[:3])), "repeats": 1,
               "models": {name: {"expected_batch": 8, "padded_rows": 8, "n": 80, "policy": "float32", "steps": 1,
                                 "variants": {}}}}
        return subprocess.CompletedProcess(argv, 0, stdout=json.dumps(one) + "\n")

    monkeypatch.setattr(dpsgd_speed.subprocess, "run", fake_run)
    out = ["--repeats", "1", "--no-memory", "--out", str(tmp_path)]
    assert dpsgd_speed.main(["--models", "mlp,cnn", *out]) == 0
    assert measured == ["mlp", "cnn"]
    assert dpsgd_speed.main(["--models", "mlp,cnn,tanh_cnn", *out]) == 0  # the two kept, the third measured
    assert measured == ["mlp", "cnn", "tanh_cnn"]
    assert set(json.loads((tmp_path / "results.json").read_text())["models"]) == {"mlp", "cnn", "tanh_cnn"}
    with pytest.raises(SystemExit):  # another number of repeats does not mix with the kept ones
        dpsgd_speed.main(["--models", "mlp", "--repeats", "2", "--no-memory", "--out", str(tmp_path)])
    assert dpsgd_speed.main(["--models", "mlp", *out, "--no-resume"]) == 0
    assert measured[-1] == "mlp"


@pytest.mark.skipif(not dpsgd_speed.keras_hub_available(), reason="the text models need the text extra (keras-hub)")
def test_the_text_models_are_timed_against_keras_on_their_own_inputs_and_position_weights():
    spec = dpsgd_speed.MODELS["gpt2_lm"]
    assert [label for label, _, _ in dpsgd_speed.variants("gpt2_lm")] == ["nonprivate", "tfdpmech fast_clipping"]
    x, y, mask = dpsgd_speed._batch(spec, 40)
    assert x["token_ids"].shape == (40, 128) and mask.sum() == spec.expected
    targets, weights = split_position_weights(y)
    assert targets.shape == weights.shape == (40, 128) and set(np.unique(weights)) == {0.0, 1.0}
    np.testing.assert_array_equal(targets[:, :-1], x["token_ids"][:, 1:])  # the next token
    x, y, _ = dpsgd_speed._batch(dpsgd_speed.MODELS["bert_classifier"], 8)
    assert set(x) == {"token_ids", "padding_mask", "segment_ids"} and y.shape == (8,)
