"""The authors' settings as a preset (mnist-papers-authors): the code's batch, optimiser, steps and split
reach the mechanism; the runner stores the run's own curve, continues a run with more steps, and refuses
bad step counts before any run."""

from __future__ import annotations

import types

import numpy as np
import pytest

import tfdpmech.experiments as experiments
from tfdpmech.cli import main
from tfdpmech.experiments import METHODS, PRESETS, preset_config, run_comparison
from tfdpmech.experiments.methods import adlm_authors
from tfdpmech.experiments.run_parts import PARTS_FOLDER
from tfdpmech.experiments.run_store import RunStore


def test_the_preset_holds_the_codes_settings_and_leaves_mnist_papers_as_it_was():
    config = preset_config("mnist-papers-authors")
    assert config.methods == ("adlm_reference_authors", "ilm_reference_authors", "afrrs_reference_authors")
    assert (config.batch_size, config.learning_rate) == (1800, 3e-4)
    assert config.options["steps"] == adlm_authors.CODE_STEPS == 80_001
    assert config.options["eval_every"] == 500 and config.options["validation_size"] == 5000
    assert config.resume and config.out == "docs/results/mnist-papers-authors"
    assert {p["paper"]: p["accuracy"] for p in config.published} == {"adlm": 0.902, "ilm": 0.8846, "afrrs": 0.988}
    # the 20-epoch rows keep their names, settings and so their stored runs' keys
    papers = PRESETS["mnist-papers"].settings
    assert papers["batch_size"] == 1000 and papers["options"]["reference_epochs"] == 20
    assert not set(config.methods) & set(papers["methods"])
    for name in config.methods:
        assert METHODS[name].mode == "reference" and set(METHODS[name].options) >= {"steps", "eval_every"}


def _context(public=1000, private=59_000, validation_size=5000, **options):
    """The whole-MNIST shapes without the images: zeros but for a marker on the public records."""
    config = preset_config("mnist-papers-authors", public=public, options={"gamma": 0.1, "steps": 8000, "eval_every": 500,
                                                            "validation_size": validation_size, **options})
    x_pub = np.ones((public, 28, 28, 1), np.float32)
    return types.SimpleNamespace(config=config, dataset="mnist", x_private=np.zeros((private, 28, 28, 1), np.float32),
                                 y_private=np.zeros((private, 10), np.float32), x_public=x_pub,
                                 y_public=np.zeros((public, 10), np.float32), n_private=private,
                                 x_test=np.zeros((10, 28, 28, 1), np.float32), y_test=np.zeros((10, 10), np.float32))


def test_the_settings_reach_the_mechanism_and_the_split_is_the_codes():
    ctx = _context()
    built = METHODS["ilm_reference_authors"].prepare.build(ctx, 0.25, 0)
    ref = built.mechanism
    assert (ref.batch_size, ref.learning_rate) == (1800, 3e-4)
    ref.build()
    assert float(ref.optimizer.learning_rate.numpy()) == pytest.approx(3e-4)
    assert type(ref.optimizer).__name__ == "Adam"
    assert built.options["steps"] == 8000 and built.options["eval_every"] == 500
    # 55,000 train; the 5,000 validation images are the first training images: the 1,000 public, then 4,000
    assert len(built.x) == 55_000 and len(built.options["x_val"]) == 5000
    assert built.options["x_val"][:1000].min() == 1.0 and built.options["x_val"][1000:].max() == 0.0
    assert built.options["state_path"].endswith(f"{PARTS_FOLDER}/mnist-ilm_reference_authors-eps0.25-seed0.npz")
    assert built.notes["steps_per_epoch"] == 500 and "55,000 training images" in built.notes["split"]


def test_public_records_outside_the_validation_set_are_refused():
    with pytest.raises(ValueError, match=r"public=6000.*5,000 validation"):
        adlm_authors.authors_split(_context(public=6000))


@pytest.mark.parametrize("bad", [0, -1, 2.5, "8000", True])
@pytest.mark.parametrize("option", ["steps", "eval_every"])
def test_bad_step_options_are_refused_before_any_run(option, bad, tmp_path, monkeypatch):
    config = preset_config("mnist-papers-authors", out=str(tmp_path), verbose=0)
    config.options = {**config.options, option: bad}
    trained = []
    monkeypatch.setattr(experiments.runner, "build_context", lambda *a: trained.append(a))
    with pytest.raises(ValueError, match=rf"options\['{option}'\]={bad!r}.*integer >= 1; .*pass"):
        run_comparison(config)
    assert not trained and not list(tmp_path.iterdir())


def test_the_steps_flag_reaches_the_options_and_a_bad_one_is_a_usage_error(tmp_path, monkeypatch, capsys):
    seen = []

    def fake(config, **kwargs):
        seen.append(config)
        raise RuntimeError("stop here")

    monkeypatch.setattr(experiments, "run_comparison", fake)
    assert main(["compare", "--preset", "mnist-papers-authors", "--steps", "8000", "--out", str(tmp_path)]) == 1
    assert seen[0].options["steps"] == 8000 and seen[0].batch_size == 1800
    assert main(["compare", "--preset", "mnist-papers-authors", "--steps", "0", "--out", str(tmp_path)]) == 2
    assert "options['steps']=0" in capsys.readouterr().err and len(seen) == 1


def _sample_config(out, steps, **changes):
    """The quick preset on the bundled MNIST sample: ILM (no relevance model), 1,000 training images."""
    options = {**PRESETS["mnist-papers-authors"].quick["options"], "steps": steps, "eval_every": 20}
    return preset_config("mnist-papers-authors", quick=True, datasets=("mnist_sample",),
                         methods=("ilm_reference_authors",), epsilons=(0.25,), seeds=(0,), verbose=0, out=str(out),
                         resume=True, **{"options": options, **changes})


@pytest.mark.slow  # three short reference trainings through the runner (~40 s on a loaded 2-core machine)
def test_the_runner_keeps_the_curve_and_a_larger_steps_continues_the_stored_run(tmp_path):
    short = run_comparison(_sample_config(tmp_path / "a", 20))["runs"][0]
    assert short["notes"]["curve_steps"] == [0, 20] and len(short["notes"]["validation_accuracy_curve"]) == 2
    state = tmp_path / "a" / PARTS_FOLDER / "mnist_sample-ilm_reference_authors-eps0.25-seed0.npz"
    assert state.exists()  # kept after the run is stored: a longer run goes on from it
    longer = run_comparison(_sample_config(tmp_path / "a", 60))["runs"][0]
    unbroken = run_comparison(_sample_config(tmp_path / "b", 60))["runs"][0]
    assert longer["notes"]["trained_in_parts"] == 2 and "trained_in_parts" not in unbroken["notes"]
    for key in ("accuracy", "accuracy_curve", "curve_epochs"):
        assert longer[key] == unbroken[key], key
    assert longer["notes"]["curve_steps"] == [0, 20, 40, 60]
    assert longer["notes"]["validation_accuracy_curve"] == unbroken["notes"]["validation_accuracy_curve"]
    assert longer["epsilon_provable"] is None and longer["epsilon_claimed"] == pytest.approx(0.25 * 0.75)
    # the two lengths are two stored runs (steps is in the key); the 20-step one is still found
    store = RunStore(tmp_path / "a", _sample_config(tmp_path / "a", 20))
    assert store.get(store.key("mnist_sample", "ilm_reference_authors", 0.25, 0))["run"]["accuracy"] == short["accuracy"]
    with pytest.raises(ValueError, match=r"batch_size.*differs"):
        run_comparison(_sample_config(tmp_path / "a", 80, batch_size=50))


def test_the_step_plot_draws_each_plotted_papers_claim_as_a_line(tmp_path, monkeypatch):
    from matplotlib.axes import Axes

    from tfdpmech.report.plots import has_step_curves, plot_accuracy_vs_step

    lines = []
    monkeypatch.setattr(Axes, "axhline", lambda self, y, **kw: lines.append((round(y, 2), kw["label"])))
    runs = [{"method": f"{p}_reference_authors", "paper": p, "epsilon_target": 0.25, "epsilon_claimed": 0.25,
             "epsilon_provable": None, "seed": 0, "accuracy_curve": [0.1, 0.5], "curve_epochs": [0.0, 1.0],
             "notes": {"curve_steps": [0, 500], "batch_size": 1800}} for p in ("adlm", "ilm")]
    assert has_step_curves(runs)
    published = preset_config("mnist-papers-authors").published
    plot_accuracy_vs_step(runs, str(tmp_path / "step.png"), published)
    assert sorted(y for y, _ in lines) == [88.46, 90.2]  # AFRRS has no curve here: no line
    assert all("claimed" in label for _, label in lines) and (tmp_path / "step.png").exists()
