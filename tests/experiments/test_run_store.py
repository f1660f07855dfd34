"""A comparison with ``resume`` keeps every finished run as it ends and never runs it again."""

from __future__ import annotations

import json

import pytest

from tfdpmech.experiments import preset_config, run_comparison
from tfdpmech.experiments import runner as runner_module
from tfdpmech.experiments.run_store import RUNS_FILE, RunStore


def _config(out, **changes):
    settings = dict(methods=("nonprivate", "ip_private"), epsilons=(1.0,), seeds=(0,), audit=(), verbose=0,
                    out=str(out), resume=True)
    settings.update(changes)
    return preset_config("dp_erm", quick=True, **settings)


def test_a_second_comparison_reads_the_finished_runs_and_trains_nothing(tmp_path, monkeypatch):
    first = run_comparison(_config(tmp_path))
    lines = (tmp_path / RUNS_FILE).read_text().splitlines()
    assert len(lines) == len(first["runs"]) == 2  # written as each run ended

    def no_training(*args, **kwargs):
        raise AssertionError("a stored run was trained again")

    monkeypatch.setattr(runner_module, "run_one", no_training)
    again = run_comparison(_config(tmp_path))
    assert again["runs"] == json.loads(json.dumps(first["runs"]))


def test_a_run_cut_short_by_a_kill_is_run_again(tmp_path, monkeypatch):
    run_comparison(_config(tmp_path))
    path = tmp_path / RUNS_FILE
    first, second = path.read_text().splitlines()
    path.write_text(first + "\n" + second[: len(second) // 2])  # the last line was being written
    trained = []
    real = runner_module.run_one

    def counting(ctx, method, *args, **kwargs):
        trained.append(method.name)
        return real(ctx, method, *args, **kwargs)

    monkeypatch.setattr(runner_module, "run_one", counting)
    results = run_comparison(_config(tmp_path))
    assert trained == [json.loads(second)["run"]["method"]]  # only the run whose line was cut
    assert len(results["runs"]) == 2


def test_a_changed_setting_is_a_new_run(tmp_path):
    base = RunStore(tmp_path, _config(tmp_path))
    key = base.key("breast_cancer", "ip_private", 1.0, 0)
    assert key == RunStore(tmp_path, _config(tmp_path)).key("breast_cancer", "ip_private", 1.0, 0)
    for changes in ({"epochs": 21}, {"delta": 1e-6}, {"options": {"kifer_steps": 151}}):
        other = RunStore(tmp_path, _config(tmp_path, **changes))
        assert other.key("breast_cancer", "ip_private", 1.0, 0) != key, changes
    assert base.key("breast_cancer", "ip_private", 1.0, 1) != key
    # a per-ε option: this run's key reads its own ε's value only
    per_eps = RunStore(tmp_path, _config(tmp_path, options={"dpsgd_epochs": {1.0: 20, 0.5: 10}}))
    same = RunStore(tmp_path, _config(tmp_path, options={"dpsgd_epochs": {1.0: 20, 0.5: 40}}))
    other = RunStore(tmp_path, _config(tmp_path, options={"dpsgd_epochs": {1.0: 40, 0.5: 10}}))
    at_one = per_eps.key("breast_cancer", "ip_private", 1.0, 0)
    assert same.key("breast_cancer", "ip_private", 1.0, 0) == at_one != other.key("breast_cancer", "ip_private", 1.0, 0)
    assert base.key("breast_cancer", "ip_private", 0.5, 0) != key


def test_a_run_is_keyed_by_the_options_its_method_reads(tmp_path):
    """A method that declares its options (``register_method(..., options=...)``) is not made stale by an option
    for another method; one that declares none reads them all; the data caps count for every run."""
    def key(method, **options):
        return RunStore(tmp_path, _config(tmp_path, options=options)).key("mnist", method, 1.0, 0)

    dpsgd = key("dpsgd", dpsgd_epochs=20)
    assert key("dpsgd", dpsgd_epochs=20, scatter_epochs=20, nonprivate_epochs=5) == dpsgd
    assert key("dpsgd", dpsgd_epochs=20, dpsgd_recipe={0.25: {"lr_schedule": "cosine"}}) == dpsgd  # nothing at ε=1
    assert key("dpsgd", dpsgd_epochs=20, dpsgd_recipe={1.0: {"lr_schedule": "cosine"}}) != dpsgd
    assert key("dpsgd", dpsgd_epochs=40) != dpsgd
    assert key("dpsgd", dpsgd_epochs=20, max_private=600) != dpsgd
    assert key("fm_head_scatter", dpsgd_epochs=20) == key("fm_head_scatter")
    assert key("fm_head_scatter", scatter_units={3.0: 64}) == key("fm_head_scatter")  # nothing at ε=1
    assert key("fm_head_scatter", scatter_units=64) != key("fm_head_scatter")
    assert key("pcdbn_private", pcdbn_reference_epochs=2400) == key("pcdbn_private")  # the reference's own option
    assert key("pcdbn_reference", pcdbn_reference_epochs=2400) != key("pcdbn_reference")
    assert key("kifer", dpsgd_epochs=20) != key("kifer")  # undeclared: every option counts


def test_a_method_reads_its_own_entry_of_a_per_method_option(tmp_path):
    """``"option[entry]"``: the architectures' DP-SGD rows read their own model's recipe only, so choosing another
    model's learning rate leaves their finished runs valid; a dict with only the own entry keys as before."""
    import tfdpmech.experiments.methods.architectures  # noqa: F401  (registers dpsgd_<model>)

    def key(method, **options):
        return RunStore(tmp_path, _config(tmp_path, options=options)).key("mnist", method, 1.0, 0)

    lstm = {"lstm": {"learning_rate": 8e-3}}
    assert key("dpsgd_vit", architecture_recipes=lstm) == key("dpsgd_vit")
    assert key("dpsgd_lstm", architecture_recipes=lstm) != key("dpsgd_lstm")
    both = {**lstm, "vit": {"learning_rate": 1e-3}}
    assert key("dpsgd_lstm", architecture_recipes=both) == key("dpsgd_lstm", architecture_recipes=lstm)
    assert key("dpsgd_lstm", architecture_recipes={1.0: lstm, 3.0: {"lstm": {"epochs": 5}}}) == key(
        "dpsgd_lstm", architecture_recipes=lstm)  # per ε: its own ε's entry


def test_stored_only_without_stored_runs_says_where_it_looked(tmp_path):
    with pytest.raises(ValueError, match=r"stored_only: .*runs.jsonl holds no finished run"):
        run_comparison(_config(tmp_path, stored_only=True))
    assert not (tmp_path / RUNS_FILE).exists()


def test_without_resume_nothing_is_kept(tmp_path):
    run_comparison(_config(tmp_path, resume=False))
    assert not (tmp_path / RUNS_FILE).exists()


@pytest.mark.parametrize("flag, expected", [([], True), (["--no-resume"], False)])
def test_the_mnist_preset_resumes_by_default(flag, expected):
    from tfdpmech.cli import _parser

    args = _parser().parse_args(["compare", "--preset", "mnist", *flag])
    config = preset_config("mnist", resume=args.resume, out=args.out)
    assert config.resume is expected and config.out == "docs/results/mnist"


def test_a_method_can_run_on_part_of_the_grid(tmp_path):
    config = _config(tmp_path, resume=False, epsilons=(0.5, 1.0), seeds=(0, 1),
                     subsets={"ip_private": {"epsilons": (1.0,), "seeds": (1,)}})
    results = run_comparison(config)
    points = sorted((r["method"], r["epsilon_target"], r["seed"]) for r in results["runs"])
    assert points == [("ip_private", 1.0, 1), ("nonprivate", None, 0), ("nonprivate", None, 1)]
    with pytest.raises(ValueError, match="subsets"):
        _config(tmp_path, subsets={"ip_private": {"seed": (1,)}}).validate()


def test_stored_only_reports_what_is_finished_and_lists_the_rest(tmp_path, monkeypatch):
    from tfdpmech.report import write_report

    first = run_comparison(_config(tmp_path))

    def no_training(*args, **kwargs):
        raise AssertionError("stored_only trained a run")

    monkeypatch.setattr(runner_module, "run_one", no_training)
    partial = run_comparison(_config(tmp_path, epsilons=(0.5, 1.0), stored_only=True))
    assert partial["runs"] == json.loads(json.dumps(first["runs"]))
    assert partial["pending"] == [{"dataset": "breast_cancer", "method": "ip_private", "epsilon_target": 0.5,
                                   "seed": 0}]
    text = open(write_report(partial, str(tmp_path / "report"))["results.md"]).read()
    assert "Not run yet (1 runs of the plan" in text and "ip_private on breast_cancer at target ε=0.5" in text
    with pytest.raises(ValueError, match="stored_only"):
        _config(tmp_path, resume=False, stored_only=True).validate()


def test_stored_only_keeps_the_runs_of_a_method_this_installation_cannot_run(tmp_path, monkeypatch):
    """A report of stored runs trains nothing: runs made on another stack (tensorflow-privacy's) stay in it."""
    import dataclasses

    from tfdpmech.experiments.registry import METHODS

    first = run_comparison(_config(tmp_path))
    missing = dataclasses.replace(METHODS["ip_private"], requires=(("no_such_module_here", "pip install it"),))
    monkeypatch.setitem(METHODS, "ip_private", missing)
    with pytest.raises(ValueError, match="no_such_module_here"):  # training it is refused by name
        _config(tmp_path).validate()
    stored = run_comparison(_config(tmp_path, stored_only=True))
    assert stored["runs"] == json.loads(json.dumps(first["runs"]))
