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


def test_dpsgd_without_tensorflow_privacy_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow_privacy", None)  # makes the import fail
    assert main(["compare", "--methods", "dpsgd", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "needs tensorflow_privacy" in err and "pip install" in err
    assert not (tmp_path / "r").exists()


def test_preset_methods_skip_dpsgd_visibly_without_tensorflow_privacy(monkeypatch, capsys):
    from tfdpmech.experiments.registry import available_methods

    monkeypatch.setitem(sys.modules, "tensorflow_privacy", None)
    notes = []
    kept = available_methods(("nonprivate", "dpsgd", "outpert_private"), notes.append)
    assert kept == ("nonprivate", "outpert_private")
    assert len(notes) == 1 and "skipping dpsgd" in notes[0] and "pip install" in notes[0]


def test_tiny_comparison_writes_the_four_files(tmp_path):
    methods = "nonprivate,adlm_per_record,adlm_shared,outpert_reference,outpert_private"
    try:
        import tensorflow_privacy  # noqa: F401
        methods += ",dpsgd"
    except ImportError:
        pass
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
    assert len(runs) == 1 + 4 * 2 + (2 if "dpsgd" in methods else 0) + 1
    by = {(r["method"], r["epsilon_target"]): r for r in runs}
    assert by[("public_only", None)]["mode"] == "none"
    runs = [r for r in runs if r["method"] != "public_only"]  # trained once on the public records, no epochs here
    assert by[("adlm_shared", 1.0)]["epsilon_provable"] is None and by[("adlm_shared", 1.0)]["mode"] == "reference"
    assert by[("adlm_per_record", 8.0)]["epsilon_provable"] > 0
    assert by[("adlm_per_record", 8.0)]["epsilon_claimed"] == pytest.approx(8.0)
    for r in runs:
        assert len(r["accuracy_curve"]) == 2 and 0 <= r["accuracy"] <= 1
        assert r["examples_per_second"] > 0
    assert by[("outpert_reference", 8.0)]["per"] == "query"
    table = (out / "results.md").read_text()
    assert "none proven" in table and "claimed ε" in table and "provable ε" in table
    assert "8 per query (given the sensitivity bound)" in table


def test_methods_lists_modes_and_presets(capsys):
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    assert "[reference]" in out and "[private]" in out and "presets" in out and "dp_erm" in out
