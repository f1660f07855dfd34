"""The dpsgd row with BandMF's correlated noise or a warmed-up weight average (methods.dpsgd_variants), their rows in
the mnist and fashion presets (the stored runs of the other rows unchanged) and their validation grids."""

from __future__ import annotations

import json
import math
import os
import sys
import types
from pathlib import Path

import keras
import pytest

from tfdpmech.mechanisms.dpsgd.runs.paths import resolve_engine
from tfdpmech.experiments import PRESETS, build_context, preset_config, run_comparison
from tfdpmech.experiments.methods.dpsgd_variants import BANDMF_BANDS, EMA_DECAY, _augmult_combined, _bandmf, _ema
from tfdpmech.experiments.options import check_options
from tfdpmech.experiments.registry import METHODS
from tfdpmech.experiments.run_store import RunStore
from tfdpmech.experiments.runner import _plan

pytestmark = pytest.mark.dpsgd

ROOT = Path(__file__).resolve().parents[2]
NEW_ROWS = ("dpsgd_bandmf", "dpsgd_ema")
# De et al.'s warm-up of the average needs Keras 3 (ema_warmup=True is refused on Keras 2.15 by name)
needs_keras_3 = pytest.mark.skipif(int(keras.__version__.split(".")[0]) < 3, reason="ema_warmup needs Keras 3")
STORED = {"mnist": ROOT / "docs" / "results" / "mnist", "fashion": ROOT / "docs" / "results" / "fashion-mnist"}


def _tools():
    """tools/mnist_tuning.py and tools/fashion_tuning.py as modules (tools/ is not a package)."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import fashion_tuning
        import mnist_tuning
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return mnist_tuning, fashion_tuning


def _planned(name: str) -> dict:
    """``{run key: (method, ε, seed)}`` of every run preset ``name`` plans (its data are images)."""
    config = preset_config(name)
    store = RunStore(STORED[name], config, enabled=False)
    return {store.key(dataset, method.name, epsilon, seed): (method.name, epsilon, seed)
            for dataset in config.datasets
            for method, epsilon, seed in _plan(config, types.SimpleNamespace(kind="image"))}


def _stored_keys(name: str) -> set:
    lines = (STORED[name] / "runs.jsonl").read_text().splitlines()
    return {json.loads(line)["key"] for line in lines if line.strip()}


def test_the_rows_declare_the_options_they_read_and_the_dpsgd_row_reads_none_of_them():
    assert "bands" in METHODS["dpsgd_bandmf"].options and "ema_decay" in METHODS["dpsgd_ema"].options
    assert {"augmult_bands", "augmult_ema_decay"} <= set(METHODS["dpsgd_augmult_combined"].options)
    for row in ("dpsgd", "dpsgd_augmult", "dpsgd_tfprivacy"):
        assert not {"bands", "ema_decay", "augmult_bands", "augmult_ema_decay"} & set(METHODS[row].options), row
    check_options({"bands": {1.0: 4, 3.0: 8}, "ema_decay": 0.999, "augmult_ema_decay": {3.0: 0.99}})
    with pytest.raises(ValueError, match=r"options\['ema_decay'\]\[3\.0\] = 1\.0: a weight average's decay is in"):
        check_options({"ema_decay": {1.0: 0.99, 3.0: 1.0}})
    with pytest.raises(ValueError, match=r"options\['augmult_ema_decay'\]"):
        check_options({"augmult_ema_decay": 0.0})
    with pytest.raises(ValueError, match=r"options\['bands'\]"):
        check_options({"bands": 0})


@pytest.mark.parametrize("name, epsilon, key", [
    ("mnist", 1.0, "a89cca097ebd1c4ab64c"), ("mnist", 3.0, "30f4d72c2f23ba832b90"),
    ("fashion", 1.0, "ead44d428282a3b475b0"), ("fashion", 3.0, "b8e0ddf169463cf21c66")])
def test_the_dpsgd_rows_run_key_is_the_one_it_had_before_the_new_rows(name, epsilon, key):
    """The key of the dpsgd row's seed-0 run, as computed before dpsgd_bandmf and dpsgd_ema joined the presets."""
    config = preset_config(name)
    assert RunStore(STORED[name], config, enabled=False).key(config.datasets[0], "dpsgd", epsilon, 0) == key


@pytest.mark.parametrize("name", sorted(STORED))
def test_the_preset_plans_every_stored_run_of_its_other_rows_as_done(name):
    """Every run the preset plans for its rows other than the new ones is found in its committed runs.jsonl (so a
    resumed preset trains only the new rows), and the new rows run at ε = 1 and 3 over three seeds."""
    planned, stored = _planned(name), _stored_keys(name)
    old = {key: run for key, run in planned.items() if run[0] not in NEW_ROWS}
    missing = sorted(run for key, run in old.items() if key not in stored)
    assert old and not missing, f"{name}: planned runs of the existing rows not in runs.jsonl: {missing}"
    for row in NEW_ROWS:
        runs = {(e, s) for m, e, s in planned.values() if m == row}
        assert runs == {(e, s) for e in (1.0, 3.0) for s in (0, 1, 2)}, (name, row)


@needs_keras_3
def test_the_rows_build_the_dpsgd_run_with_their_bands_or_average(mnist_sample):
    config = preset_config("mnist", quick=True, audit=(), verbose=0, datasets=("mnist_sample",))
    config.options = {**config.options, "bands": {3.0: 8}, "ema_decay": {1.0: 0.99},
                      "augmult_bands": 2, "augmult_ema_decay": 0.9}
    ctx = build_context(config, "mnist_sample")
    plain = _bandmf(ctx, 1.0, 0)  # no bands at ε = 1: the stated default
    assert plain.mechanism.bands == BANDMF_BANDS and plain.notes["bands"] == BANDMF_BANDS
    chosen = _bandmf(ctx, 3.0, 0)
    assert chosen.mechanism.bands == 8 and chosen.mechanism.ema_momentum is None
    assert "BandMF, 8 bands" in chosen.notes["noise"] and chosen.notes["weights_scored"] == "the raw weights of the last step"
    assert chosen.notes["epochs"] == chosen.mechanism.epochs == 2  # the dpsgd row's recipe (the quick epochs)
    for epsilon, decay in ((1.0, 0.99), (3.0, EMA_DECAY)):
        averaged = _ema(ctx, epsilon, 0)
        assert averaged.mechanism.ema_momentum == decay and averaged.mechanism.ema_warmup is True
        assert averaged.mechanism.bands == 1 and averaged.notes["weights_scored"] == "the weight average"
    both = _augmult_combined(ctx, 3.0, 0)
    assert (both.mechanism.bands, both.mechanism.ema_momentum, both.mechanism.ema_warmup) == (2, 0.9, True)
    assert both.notes["augmentation_multiplicity"] == both.mechanism.augmentation_multiplicity


@needs_keras_3
@pytest.mark.slow  # six short trainings of the MLP through the runner (~40 s on a loaded 2-core machine)
def test_one_band_is_the_dpsgd_row_and_the_rows_prove_their_epsilon():
    options = {"max_private": 1200, "max_test": 400, "dpsgd_epochs": 3}  # 4 steps an epoch (q = 1/4)
    runs = {}
    for bands in (1, 4):
        config = preset_config("demo", quick=True, methods=("dpsgd", "dpsgd_bandmf", "dpsgd_ema"), audit=(),
                               verbose=0, options={**options, "bands": bands, "ema_decay": 0.99})
        for run in run_comparison(config)["runs"]:
            runs[(run["method"], bands)] = run
    dpsgd, one_band = runs[("dpsgd", 1)], runs[("dpsgd_bandmf", 1)]
    if resolve_engine("auto") == "tfdpmech":  # the dpsgd row on the same engine (TensorFlow 2.15: tensorflow-privacy)
        assert one_band["accuracy"] == dpsgd["accuracy"]  # bands = 1: DP-SGD's batches and noise, draw for draw
    assert one_band["ledger"]["releases"][-1]["mechanism"] == "dpsgd"
    banded = runs[("dpsgd_bandmf", 4)]
    release = banded["ledger"]["releases"][-1]
    assert release["mechanism"] == "dpsgd_bandmf" and release["details"]["bands"] == 4
    assert banded["epsilon_provable"] <= 1.0 + 1e-9 and banded["notes"]["bands"] == 4
    averaged = runs[("dpsgd_ema", 1)]
    assert averaged["notes"]["weights_scored"] == "the weight average"
    assert averaged["ledger"]["releases"][-1]["mechanism"] == "dpsgd"  # never charged: DP-SGD's release
    assert averaged["epsilon_provable"] == pytest.approx(dpsgd["epsilon_provable"])
    assert averaged["accuracy"] != dpsgd["accuracy"]  # the average is what was scored, not the raw weights


def _warmup(decay: float, steps: int) -> list:
    return [min(decay, (1 + t) / (10 + t)) for t in range(steps)]


def test_the_grids_are_stated_and_every_point_trains_another_run():
    """The bands fit an epoch of every row they run at and are not DP-SGD's 1; each decay of the grid gives another
    average within the runs' steps (with the warm-up, a decay the run never reaches would repeat a point)."""
    mnist_tuning, fashion_tuning = _tools()
    for tool, preset in ((mnist_tuning, "mnist"), (fashion_tuning, "fashion")):
        assert tool.GRID["dpsgd_bandmf"] == mnist_tuning.BANDS_GRID and tool.GRID["dpsgd_ema"] == mnist_tuning.EMA_GRID
        assert mnist_tuning.BANDS_GRID[0] == {"bands": BANDMF_BANDS}  # the stated default is the first point
        assert mnist_tuning.EMA_GRID[0] == {"ema_decay": EMA_DECAY}
        options = PRESETS[preset].settings["options"]
        for epsilon in (1.0, 3.0):
            from tfdpmech.experiments.methods.mnist_recipes import TANH_CNN_RECIPE, recipe_for

            recipe = recipe_for(options, epsilon, TANH_CNN_RECIPE)
            per_epoch = math.ceil(recipe.reference_n / recipe.expected_batch_size)
            steps = recipe.epochs * per_epoch
            assert all(1 < p["bands"] <= per_epoch for p in mnist_tuning.BANDS_GRID), (preset, epsilon)
            schedules = {tuple(_warmup(p["ema_decay"], steps)) for p in mnist_tuning.EMA_GRID}
            assert len(schedules) == len(mnist_tuning.EMA_GRID), (preset, epsilon, steps)
    assert _warmup(0.999, 4720) == _warmup(0.9999, 4720)  # why 0.9999 is not a point: the same run as 0.999


def test_the_sweeps_grid_points_take_the_dpsgd_rows_chosen_recipe():
    mnist_tuning, _ = _tools()
    mnist = PRESETS["mnist"].settings["options"]
    assert mnist_tuning._options("dpsgd_bandmf", {"bands": 8}) == {
        "dpsgd_epochs": mnist["dpsgd_epochs"], "dpsgd_recipe": mnist["dpsgd_recipe"], "bands": 8}
    fashion = PRESETS["fashion"].settings["options"]
    assert mnist_tuning._options("dpsgd_ema", {"ema_decay": 0.99}, "fashion") == {
        "dpsgd_epochs": fashion["dpsgd_epochs"], "dpsgd_recipe": fashion["dpsgd_recipe"], "ema_decay": 0.99}
    assert mnist_tuning._options("dpsgd", {"epochs": 20}) == {"dpsgd_epochs": 20}  # the other rows as before


@pytest.mark.parametrize("tool_name", ["mnist", "fashion"])
def test_stored_only_tabulates_the_new_rows_without_training(tool_name, tmp_path, monkeypatch):
    """--stored-only on a folder without their runs trains nothing and lists nothing for them."""
    from tfdpmech import data

    dataset = "mnist_validation" if tool_name == "mnist" else "fashion_mnist_validation"
    try:
        data.load(dataset)
    except (RuntimeError, ValueError) as exc:
        pytest.skip(f"{dataset} is not here ({exc}); set $TFDPMECH_DATA_DIR")
    from tfdpmech.experiments import runner

    def trains(*args, **kwargs):
        raise AssertionError("--stored-only trained a run")

    monkeypatch.setattr(runner, "run_one", trains)
    mnist_tuning, fashion_tuning = _tools()
    grid = (mnist_tuning if tool_name == "mnist" else fashion_tuning).GRID
    settings = {} if tool_name == "mnist" else dict(preset="fashion", dataset=dataset, grid=grid,
                                                     base_options=fashion_tuning.FASHION_PUBLISHED)
    result = mnist_tuning.sweep(list(NEW_ROWS), [3.0, 1.0], out=str(tmp_path), stored_only=True, **settings)
    assert result["runs"] == [] and result["chosen"] == {}
    assert not os.path.exists(tmp_path / "runs.jsonl")
