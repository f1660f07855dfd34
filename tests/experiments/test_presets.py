"""Every preset's quick run goes through the one runner and writes results in the one schema."""

import json

import pytest

from tfdpmech.experiments import PRESETS, METHODS, preset_config, run_comparison
from tfdpmech.report import RUN_FIELDS, SCHEMA_VERSION, check_results_schema, summarize, write_report
from tfdpmech.report.tables import ordering_notes


def _runnable(config):
    config.methods = tuple(m for m in config.methods if METHODS[m].unavailable() is None)
    return config


def _needs_whole_mnist(config):
    for name in ("mnist", "fashion_mnist"):
        if name in config.datasets:
            from tfdpmech import data

            try:
                data.load(name)
            except (RuntimeError, ValueError) as exc:
                pytest.skip(f"the whole {name} is not here ({exc}); set $TFDPMECH_DATA_DIR (.ci/run does)")


def _needs_text(config):
    if "sentiment_snippets" in config.datasets:
        pytest.importorskip("keras_hub", reason="the text preset needs the text extra (keras-hub)")
        from tfdpmech import data_text

        try:
            data_text.load_sentiment_snippets()
        except ValueError as exc:
            pytest.skip(f"the sentiment snippets are not here ({exc}); set $TFDPMECH_DATA_DIR (.ci/run does)")


def _whole(name) -> bool:
    return bool({"mnist", "fashion_mnist", "sentiment_snippets"} & set(PRESETS[name].settings.get("datasets", ())))


# the presets on the whole MNIST or Fashion-MNIST load 70,000 images and run every row, the text preset learns a
# vocabulary and trains a BERT on public text first: slow (and skipped without the data)
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if _whole(name) else name
                                  for name in sorted(PRESETS)])
def test_quick_run_of_each_preset_has_the_one_schema(name, tmp_path):
    config = _runnable(preset_config(name, quick=True, audit=(), verbose=0))
    _needs_whole_mnist(config)
    _needs_text(config)
    results = run_comparison(config)
    check_results_schema(results)
    files = write_report(results, str(tmp_path / name))
    on_disk = json.loads(open(files["results.json"]).read())
    assert on_disk["schema"] == SCHEMA_VERSION and on_disk["preset"] == name
    assert len(on_disk["runs"]) > 0
    for run in on_disk["runs"]:
        assert set(RUN_FIELDS) <= set(run)
        assert 0.0 <= run["accuracy"] <= 1.0
        assert run["mode"] in ("reference", "private", "none")
        if run["mode"] == "none":
            assert run["epsilon_claimed"] is None and run["epsilon_provable"] is None and run["ledger"] is None
        else:  # a private run always has a claimed ε; a provable one only where an argument holds
            assert run["epsilon_claimed"] > 0 and run["provable_basis"]
        if run["mode"] == "reference":
            assert run["epsilon_provable"] is None, f"{run['method']} is a reference (claimed) mode"
        if run["mode"] == "private" and run["epsilon_provable"] is not None:  # meets its target, or was skipped
            assert run["epsilon_provable"] <= run["epsilon_target"] * (1 + 1e-9), run["method"]
    text = open(files["results.md"]).read()
    assert "claimed ε" in text and "provable ε" in text
    # the order a reader expects: the non-private reference on top, or a note in the table saying it is not
    rows = summarize(results)
    notes = ordering_notes(rows)
    assert all(note in text for note in notes)
    if name == "demo":  # the first run a newcomer makes (tfdpmech compare --quick): the order holds
        nonprivate = next(r["accuracy_mean"] for r in rows if r["method"] == "nonprivate")
        others = {r["method"]: r["accuracy_mean"] for r in rows if r["method"] != "nonprivate"}
        assert "public_only" in others and all(acc <= nonprivate for acc in others.values()), (nonprivate, others)
        assert not notes


def test_flags_override_the_preset():
    config = preset_config("dp_erm", epsilons=(0.5,), seeds=(3,))
    assert config.epsilons == (0.5,) and config.seeds == (3,) and config.datasets[0] == "breast_cancer"
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        preset_config("nope")


def test_the_users_preset_takes_the_user_level_recipe_chosen_on_the_validation_split():
    """The users preset's user-level recipe is the point tools/users_tuning.py chose (never the test set)."""
    from pathlib import Path

    from tfdpmech.experiments.users import user_level_options

    tuning = Path(__file__).resolve().parents[2] / "docs" / "results" / "users" / "tuning" / "tuning.json"
    recorded = json.loads(tuning.read_text())
    settings = PRESETS["users"].settings
    options = settings["options"]
    assert len(recorded["runs"]) == len(recorded["grid"])  # the whole grid ran before the choice
    assert options == user_level_options(options["users"], options["records_per_user"], recorded["chosen"]["3.0"])
    assert options["user_recipe"]["expected_batch_size"] == recorded["chosen"]["3.0"]["expected_users"]
    assert settings["datasets"] == ("mnist",)


def test_the_mnist_preset_takes_the_recipe_chosen_on_the_validation_split():
    """Every per-ε DP-SGD recipe of the mnist preset is the one tools/mnist_tuning.py chose (never the test set)."""
    from pathlib import Path

    from tfdpmech.experiments.methods.mnist_recipes import SCATTER_LINEAR_RECIPE, TANH_CNN_RECIPE, recipe_for

    tuning = Path(__file__).resolve().parents[2] / "docs" / "results" / "mnist" / "tuning" / "tuning.json"
    chosen = json.loads(tuning.read_text())["chosen"]
    settings = PRESETS["mnist"].settings
    for method, published, prefix in (("dpsgd", TANH_CNN_RECIPE, "dpsgd"),
                                      ("dpsgd_scatter", SCATTER_LINEAR_RECIPE, "scatter")):
        assert {float(eps) for eps in chosen[method]} == set(settings["epsilons"]), method  # every ε was tuned
        for eps, point in chosen[method].items():
            assert recipe_for(settings["options"], float(eps), published, prefix) == published.replace(**point), \
                (method, eps)
    from tfdpmech.experiments.methods.functional_head import SCATTER_UNITS
    from tfdpmech.experiments.options import option_at

    assert {float(eps) for eps in chosen["fm_head_scatter"]} == set(settings["epsilons"])
    for eps, point in chosen["fm_head_scatter"].items():  # the head's projection dimension, chosen the same way
        assert option_at(settings["options"], float(eps), "scatter_units", SCATTER_UNITS) == point["units"], eps
    assert "mnist_validation" not in settings["datasets"] and settings["datasets"] == ("mnist",)


def test_the_mnist_preset_takes_the_views_per_record_chosen_on_the_validation_split():
    """At each ε where dpsgd_augmult's grid of K (tools/mnist_tuning.py) has run in full, the mnist preset takes the
    chosen K; elsewhere the K stated before any run (AUGMULT_K)."""
    from pathlib import Path

    from tfdpmech.experiments.methods.dpsgd import AUGMULT_K
    from tfdpmech.experiments.options import option_at

    tuning = Path(__file__).resolve().parents[2] / "docs" / "results" / "mnist" / "tuning" / "tuning.json"
    recorded = json.loads(tuning.read_text())
    grid = [json.dumps(p, sort_keys=True) for p in recorded["grid"]["dpsgd_augmult"]]
    assert {json.loads(p)["augmult_k"] for p in grid} >= {AUGMULT_K}  # the stated K is a point of the grid
    settings = PRESETS["mnist"].settings
    for eps in settings["subsets"]["dpsgd_augmult"]["epsilons"]:
        ran = {json.dumps(r["point"], sort_keys=True) for r in recorded["runs"]
               if r["method"] == "dpsgd_augmult" and r["epsilon"] == eps}
        expected = recorded["chosen"]["dpsgd_augmult"][str(eps)]["augmult_k"] if ran >= set(grid) else AUGMULT_K
        assert option_at(settings["options"], eps, "augmult_k", AUGMULT_K) == expected, eps


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_quick_run_never_adds_runs_to_a_committed_report(name):
    """A preset that resumes from docs/results/<name>/runs.jsonl must not let its quick variant (the tests') add
    its few-hundred-record runs there."""
    config = preset_config(name, quick=True)
    assert not (config.resume and config.out.startswith("docs")), (config.out, config.resume)


@pytest.mark.parametrize("name", sorted(name for name, preset in PRESETS.items() if preset.settings.get("resume")))
def test_every_row_of_a_resuming_preset_declares_the_options_it_reads(name):
    """A method that declares none is keyed by every option of the preset: adding an option for another row
    would make its finished runs stale and run them again."""
    undeclared = [m for m in PRESETS[name].settings["methods"] if METHODS[m].options is None]
    assert not undeclared, f"{name}: {undeclared} read options they do not declare (register_mechanism options=)"


def test_the_fashion_preset_takes_the_recipe_chosen_on_the_validation_split():
    """Each (method, ε) of the fashion preset whose validation grid has run in full (tools/fashion_tuning.py) takes
    the chosen point over the published recipe; the others keep the published one; the views are the chosen ones."""
    from pathlib import Path

    from tfdpmech.experiments.methods.mnist_recipes import SCATTER_LINEAR_RECIPE, TANH_CNN_RECIPE, recipe_for
    from tfdpmech.experiments.options import option_at
    from tfdpmech.experiments.presets import FASHION_PUBLISHED

    tuning = Path(__file__).resolve().parents[2] / "docs" / "results" / "fashion-mnist" / "tuning" / "tuning.json"
    recorded = json.loads(tuning.read_text())
    ran = {(run["method"], run["epsilon"], json.dumps(run["point"], sort_keys=True)) for run in recorded["runs"]}
    settings = PRESETS["fashion"].settings
    decided = 0
    methods = (("dpsgd", TANH_CNN_RECIPE, "dpsgd"), ("dpsgd_scatter", SCATTER_LINEAR_RECIPE, "scatter"))
    for method, base, prefix in methods:
        for eps in settings["epsilons"]:
            published = recipe_for(FASHION_PUBLISHED, eps, base, prefix)
            if all((method, eps, json.dumps(p, sort_keys=True)) in ran for p in recorded["grid"][method]):
                decided += 1
                expected = published.replace(**recorded["chosen"][method][str(eps)])
            else:
                expected = published
            assert recipe_for(settings["options"], eps, base, prefix) == expected, (method, eps)
    assert decided >= 3  # dpsgd at ε = 1 and 3, dpsgd_scatter at ε = 3 have run in full
    views = recorded["chosen"]["nonprivate_augmented"]["None"]["augmentation"]
    assert option_at(settings["options"], 3.0, "augmentation", None) == views == "crop"
    assert settings["datasets"] == ("fashion_mnist",)


# the rows whose one setting the validation sweeps choose: (the option, the stated default before the sweep)
def _variant_settings():
    from tfdpmech.experiments.methods.dpsgd_variants import BANDMF_BANDS, EMA_DECAY

    return {"dpsgd_bandmf": ("bands", BANDMF_BANDS), "dpsgd_ema": ("ema_decay", EMA_DECAY)}


def _tuning_grid(tool: str) -> dict:
    """The GRID stated in tools/<tool>.py (tools/ is not a package)."""
    import importlib
    import sys
    from pathlib import Path

    folder = str(Path(__file__).resolve().parents[2] / "tools")
    sys.path.insert(0, folder)
    try:
        return importlib.import_module(tool).GRID
    finally:
        sys.path.remove(folder)


@pytest.mark.parametrize("name, tool, folder", [("mnist", "mnist_tuning", "mnist"),
                                                ("fashion", "fashion_tuning", "fashion-mnist")])
def test_the_bandmf_and_ema_rows_take_the_setting_chosen_on_the_validation_split(name, tool, folder):
    """dpsgd_bandmf's bands and dpsgd_ema's decay: at each ε of the row where its grid (stated in the tool) has run
    in full, the preset takes the chosen value; elsewhere the default stated before the sweep, and the test says
    so (a warning naming the command that decides it)."""
    import warnings
    from pathlib import Path

    from tfdpmech.experiments.options import option_at

    tuning = Path(__file__).resolve().parents[2] / "docs" / "results" / folder / "tuning" / "tuning.json"
    recorded = json.loads(tuning.read_text())
    grid = _tuning_grid(tool)
    settings = PRESETS[name].settings
    for method, (option, default) in _variant_settings().items():
        assert method in settings["methods"] and {option: default} in grid[method]  # the default is a grid point
        epsilons = settings.get("subsets", {}).get(method, {}).get("epsilons", settings["epsilons"])
        assert tuple(sorted(epsilons)) == (1.0, 3.0), (name, method)
        for eps in epsilons:
            ran = {json.dumps(r["point"], sort_keys=True) for r in recorded["runs"]
                   if r["method"] == method and r["epsilon"] == eps}
            if ran >= {json.dumps(p, sort_keys=True) for p in grid[method]}:
                expected = recorded["chosen"][method][str(eps)][option]
            else:
                expected = default
                warnings.warn(f"{name}: {method} at ε = {eps:g} keeps the stated default {option} = {default}: its "
                              f"validation grid has not run in full (python tools/{tool}.py --methods {method} "
                              f"--epsilons {eps:g})")
            assert option_at(settings["options"], eps, option, default) == expected, (name, method, eps)
