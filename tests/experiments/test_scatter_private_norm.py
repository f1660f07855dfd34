"""``dpsgd_scatter`` with ``options["scatter_norm"] = "private_bn"``: two proven releases composed to the target ε,
the stored runs' keys unchanged, bad input refused before anything is released."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("dp_accounting")
pytest.importorskip("kymatio")

import dp_accounting  # noqa: E402

from tfdpmech.accounting.events import compose_events, event_from_json  # noqa: E402
from tfdpmech.accounting.sigma_search import NotCertifiableError  # noqa: E402
from tfdpmech.experiments import preset_config, run_comparison  # noqa: E402
from tfdpmech.experiments.methods import scatter_bn  # noqa: E402
from tfdpmech.experiments.methods.mnist_recipes import SCATTER_LINEAR_RECIPE  # noqa: E402
from tfdpmech.experiments.run_store import RunStore  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.dpsgd


def _config(tmp_path, **options):
    return preset_config("mnist", quick=True, datasets=("mnist_sample",), methods=("dpsgd_scatter",),
                         epsilons=(3.0,), seeds=(0,), audit=(), verbose=0, out=str(tmp_path), resume=False,
                         options={"max_private": 300, "max_test": 200, "scatter_epochs": 1, **options})


def test_private_bn_spends_the_target_in_two_proven_releases(tmp_path):
    (run,) = run_comparison(_config(tmp_path, scatter_norm="private_bn"))["runs"]
    releases = run["ledger"]["releases"]
    assert [r["component"] for r in releases] == ["scatter_normalisation", "dpsgd_training"]
    assert all(r["epsilon_provable"] is not None and r["neighbours"] == "add_remove" for r in releases)
    bn, dpsgd = releases
    assert bn["noise_scale"] == 8.0 and bn["details"]["records"] == 300
    # the composed ε: the target within the σ search's tolerance, never above it
    assert 0.99 * 3.0 <= run["epsilon_provable"] <= 3.0
    assert run["epsilon_provable"] > max(bn["epsilon_provable"], dpsgd["epsilon_provable"])
    events = [event_from_json(r["event"]) for r in releases]
    assert run["epsilon_provable"] == pytest.approx(compose_events(events, 1e-5)[0], rel=1e-9)
    # DP-SGD alone at its σ spends less than the target: the normalisation took the rest
    assert dpsgd["epsilon_provable"] < 0.99 * 3.0
    assert run["notes"]["scatter_norm"] == "private_bn" and "private per-channel" in run["notes"]["features"]
    assert 0.0 <= run["accuracy"] <= 1.0 and not run["diverged"]


def test_the_default_normalisation_keeps_the_stored_runs_keys(tmp_path):
    # the fashion preset's stored dpsgd_scatter runs are found under the keys computed today
    config = preset_config("fashion")
    store = RunStore(os.path.join(ROOT, "docs", "results", "fashion-mnist"), config)
    for epsilon in (1.0, 3.0):
        entry = store.get(store.key("fashion_mnist", "dpsgd_scatter", epsilon, 0))
        assert entry is not None and entry["run"]["method"] == "dpsgd_scatter", epsilon
    # the new options are read by dpsgd_scatter only: set, they change its key and no other method's
    changed = preset_config("fashion", options={**config.options, "scatter_norm": "private_bn"})
    other = RunStore(tmp_path, changed)
    assert other.key("fashion_mnist", "dpsgd_scatter", 3.0, 0) != store.key("fashion_mnist", "dpsgd_scatter", 3.0, 0)
    assert other.key("fashion_mnist", "dpsgd", 3.0, 0) == store.key("fashion_mnist", "dpsgd", 3.0, 0)


def _no_release(*args, **kwargs):
    raise AssertionError("the statistics were released")


@pytest.mark.parametrize("bad", [0.0, -8.0])
def test_a_bad_noise_multiplier_is_refused_before_any_release(monkeypatch, bad):
    monkeypatch.setattr(scatter_bn, "private_scatter_statistics", _no_release)
    x = np.zeros((20, 28, 28, 1), np.float32)
    with pytest.raises(ValueError, match=r"scatter_bn_noise"):
        scatter_bn.private_bn_run(x, 3.0, 1e-5, 0, SCATTER_LINEAR_RECIPE.replace(epochs=1), bn_noise=bad)


def test_a_budget_the_release_spends_is_refused_before_any_release(monkeypatch):
    monkeypatch.setattr(scatter_bn, "private_scatter_statistics", _no_release)
    x = np.zeros((20, 28, 28, 1), np.float32)
    with pytest.raises(NotCertifiableError, match="scatter_bn_noise"):
        scatter_bn.private_bn_run(x, 0.5, 1e-5, 0, SCATTER_LINEAR_RECIPE.replace(epochs=1), bn_noise=0.3)


@pytest.mark.parametrize("options, name", [({"scatter_norm": "batch"}, "scatter_norm"),
                                           ({"scatter_norm": "private_bn", "scatter_bn_noise": 0}, "scatter_bn_noise"),
                                           ({"scatter_norm": "private_bn", "scatter_bn_noise": -1.0},
                                            "scatter_bn_noise")])
def test_bad_options_are_refused_before_any_run(tmp_path, monkeypatch, options, name):
    monkeypatch.setattr(scatter_bn, "private_scatter_statistics", _no_release)
    with pytest.raises(ValueError, match=name):
        run_comparison(_config(tmp_path, **options))


def test_the_calibration_composes_with_the_prior_release():
    prior = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(8.0), 2)
    q, steps = 4096 / 55_000, 40 * 14
    sigma = scatter_bn.composed_noise_multiplier(3.0, 1e-5, q=q, steps=steps, prior_events=[prior])
    alone = scatter_bn.composed_noise_multiplier(3.0, 1e-5, q=q, steps=steps, prior_events=[])
    assert sigma > alone  # the normalisation's share is paid by more DP-SGD noise
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)
    spent = compose_events([prior, event], 1e-5)[0]
    assert 0.99 * 3.0 <= spent <= 3.0


def test_the_sweep_grid_is_small_and_its_group_points_are_the_other_sweeps_stored_runs(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "tools"))
    monkeypatch.chdir(ROOT)  # the sweeps' folders are relative to the repository root
    import scatter_tuning

    grid = scatter_tuning.GRID["dpsgd_scatter"]
    assert len(grid) <= 8 and {p.get("scatter_norm", "group") for p in grid} == {"group", "private_bn"}
    assert {p["epochs"] for p in grid} >= {40, 60}
    # the group points stored by tools/mnist_tuning.py (20 and 40 epochs at ε = 3) are found under the new
    # sweep's keys: copied, not trained again
    settings = {**scatter_tuning.DATASETS["mnist"], "out": str(tmp_path)}
    assert scatter_tuning.copy_stored(settings, None) == 2
    stored = RunStore(tmp_path, preset_config("mnist"))
    assert len(stored) == 2
    assert scatter_tuning.copy_stored(settings, None) == 0  # already there
