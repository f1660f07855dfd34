"""The `tfdpmech compare` command: a tiny real run, and one-line errors for bad arguments."""

import json
import os
import subprocess
import sys

import pytest

from tfdpmech.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_cli(*args, timeout=600):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-m", "tfdpmech", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("args, message", [
    (["--methods", "adlm,nope"], "unknown method"),
    (["--dataset", "imagenet"], "unknown dataset"),
    (["--epsilons", ""], "ε list is empty"),
    (["--epsilons", "1,-2"], "epsilon must be finite and > 0"),
    (["--preset", "nope"], "unknown preset"),
    (["--public", "-5"], "public=-5"),
    (["--audit", "psychic"], "unknown audit"),
    (["--delta", "1.5"], "delta must lie in (0, 1)"),
    (["--out", "/proc/forbidden/results"], "cannot be written"),
    (["--out", "{tmp}/a_file/results"], "cannot be written"),
])
def test_bad_arguments_one_line_no_traceback(args, message, tmp_path, capsys):
    (tmp_path / "a_file").write_text("not a directory")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    out = ["--out", str(tmp_path / "r")] if "--out" not in args else []
    methods = [] if "--methods" in args else ["--methods", "nonprivate,adlm_per_record"]  # no tensorflow-privacy
    assert main(["compare", *args, *methods, *out]) == 2  # returns instead of raising: no traceback
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("tfdpmech: error")
    assert not (tmp_path / "r").exists()  # nothing half-written
    assert [p.name for p in tmp_path.iterdir()] == ["a_file"]  # the writability probe left nothing


def _without_tensorflow_privacy(monkeypatch):
    """As on Keras 3: every tensorflow-privacy import fails (submodules already loaded included)."""
    for name in [m for m in list(sys.modules) if m.startswith("tensorflow_privacy.")] + ["tensorflow_privacy"]:
        monkeypatch.setitem(sys.modules, name, None)


def test_kifer_without_tensorflow_privacy_is_refused_and_dpsgd_is_not(tmp_path, capsys, monkeypatch):
    from tfdpmech.experiments import CompareConfig

    _without_tensorflow_privacy(monkeypatch)
    assert main(["compare", "--methods", "kifer", "--dataset", "iris", "--model", "linear", "--public", "0",
                 "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "needs tensorflow_privacy" in err and "pip install 'tfdpmech[tfprivacy]'" in err
    assert not (tmp_path / "r").exists()
    # DP-SGD runs with tfdpmech's own engine where tensorflow-privacy does not import
    CompareConfig(methods=("dpsgd",), verbose=0).validate()


def test_preset_methods_skip_kifer_visibly_without_tensorflow_privacy(monkeypatch, capsys):
    from tfdpmech.experiments.registry import available_methods

    _without_tensorflow_privacy(monkeypatch)
    notes = []
    kept = available_methods(("nonprivate", "dpsgd", "kifer", "outpert_paper_bound"), notes.append)
    assert kept == ("nonprivate", "dpsgd", "outpert_paper_bound")
    assert len(notes) == 1 and "skipping kifer" in notes[0] and "pip install" in notes[0]


@pytest.mark.slow  # the quick dp_erm preset (four small tabular trainings)
def test_a_preset_method_left_out_is_listed_in_results_md(tmp_path, monkeypatch, capsys):
    _without_tensorflow_privacy(monkeypatch)
    out = tmp_path / "r"
    assert main(["compare", "--preset", "dp_erm", "--quick", "--quiet", "--out", str(out)]) == 0
    assert "skipping kifer" in capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert "kifer" not in {r["method"] for r in results["runs"]} and "dpsgd" in {r["method"] for r in results["runs"]}
    assert "needs tensorflow_privacy" in results["config"]["left_out"]["kifer"]
    report = (out / "results.md").read_text()
    assert "- **left out** kifer: method 'kifer' needs tensorflow_privacy" in report
    assert "DP-SGD engine: tfdpmech" in report


def test_tiny_comparison_writes_the_four_files(tmp_path):
    methods = "nonprivate,adlm_per_record,adlm_shared,outpert_reference,outpert_paper_bound,dpsgd"  # DP-SGD: engine auto
    out = tmp_path / "run"
    result = run_cli("compare", "--quick", "--methods", methods, "--epsilons", "1,8", "--audit", "none",
                     "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ETA" in result.stderr and "[1/" in result.stderr  # the progress line (one per run off a terminal)
    for name in ("results.json", "results.md", "accuracy_vs_epsilon.png", "accuracy_vs_epoch.png"):
        assert (out / name).stat().st_size > 0
    results = json.loads((out / "results.json").read_text())
    runs = results["runs"]
    # + public_only: added because adlm_per_record uses the public records
    assert len(runs) == 1 + 5 * 2 + 1
    by = {(r["method"], r["epsilon_target"]): r for r in runs}
    assert by[("public_only", None)]["mode"] == "none"
    runs = [r for r in runs if r["method"] != "public_only"]  # trained once on the public records, no epochs here
    assert by[("adlm_shared", 1.0)]["epsilon_provable"] is None and by[("adlm_shared", 1.0)]["mode"] == "reference"
    assert by[("adlm_per_record", 8.0)]["epsilon_provable"] > 0
    assert by[("adlm_per_record", 8.0)]["epsilon_claimed"] == pytest.approx(8.0)
    for r in runs:  # the quick preset trains 2 epochs, the non-private reference 60 (its curve: every 3rd epoch)
        assert r["curve_epochs"] == ([3 * k for k in range(1, 21)] if r["method"] == "nonprivate" else [1, 2])
        assert len(r["accuracy_curve"]) == len(r["curve_epochs"]) and 0 <= r["accuracy"] <= 1
        assert r["examples_per_second"] > 0
    assert by[("outpert_reference", 8.0)]["per"] == "query"
    assert by[("dpsgd", 8.0)]["notes"]["engine"] in ("tensorflow_privacy", "tfdpmech")
    table = (out / "results.md").read_text()
    assert "none proven" in table and "claimed ε" in table and "provable ε" in table
    # Lu et al.'s Δz_T is no proven bound, so none proven
    assert by[("outpert_paper_bound", 8.0)]["epsilon_provable"] is None and by[("outpert_paper_bound", 8.0)]["per"] == "query"
    assert "given the" not in table


def test_methods_lists_modes_and_presets(capsys):
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    assert "[reference]" in out and "[private]" in out and "presets" in out and "dp_erm" in out


def test_a_resumed_preset_narrowed_to_some_methods_keeps_the_whole_presets_report(tmp_path, monkeypatch):
    """``--preset P --methods m`` on a resumable preset trains m, and P's report holds every finished run of P."""
    from tfdpmech.experiments import presets

    out = tmp_path / "preset"
    monkeypatch.setitem(presets.PRESETS, "resumable_erm", presets.Preset(
        "resumable_erm", "dp_erm's quick runs, resumable", {
            "datasets": ("breast_cancer",), "methods": ("nonprivate", "ip_private"), "epsilons": (1.0,),
            "seeds": (0,), "epochs": 20, "model": "linear", "public": 0, "audit": (), "out": str(out),
            "resume": True}, {}))
    assert main(["compare", "--preset", "resumable_erm", "--quiet", "--methods", "nonprivate"]) == 0
    first = json.loads((out / "results.json").read_text())
    assert [r["method"] for r in first["runs"]] == ["nonprivate"]
    assert "ip_private" in (out / "results.md").read_text()  # listed among the runs still to come
    assert main(["compare", "--preset", "resumable_erm", "--quiet", "--methods", "ip_private"]) == 0
    whole = json.loads((out / "results.json").read_text())
    assert sorted(r["method"] for r in whole["runs"]) == ["ip_private", "nonprivate"]
    # with another output folder the report is this invocation's alone
    other = tmp_path / "other"
    assert main(["compare", "--preset", "resumable_erm", "--quiet", "--methods", "ip_private",
                 "--out", str(other)]) == 0
    assert [r["method"] for r in json.loads((other / "results.json").read_text())["runs"]] == ["ip_private"]
