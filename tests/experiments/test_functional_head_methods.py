"""The functional head in the runner: public_only shown alongside, proven ledgers, --public digits."""

import pytest

from tfdpmech.experiments import CompareConfig, run_comparison
from tfdpmech.experiments.context import PUBLIC_SOURCES, build_context
from tfdpmech.report import markdown_table, summarize

SMALL = {"max_private": 1500, "max_test": 500}


@pytest.fixture(scope="module")
def results():
    config = CompareConfig(methods=("fm_head", "fm_head_gauss"), epsilons=(1.0, 8.0), seeds=(0,),
                           epochs=1, public=400, audit=(), verbose=0, options=SMALL)
    return run_comparison(config)


def test_public_only_is_added_and_every_head_is_proven(results):
    by = {(r["method"], r["epsilon_target"]): r for r in results["runs"]}
    public = by[("public_only", None)]
    assert public["mode"] == "none" and public["ledger"] is None and public["notes"]["private_records_used"] == 0
    for eps in (1.0, 8.0):
        for name, mech, delta in (("fm_head", "laplace", 0.0), ("fm_head_gauss", "gaussian", 1e-5)):
            run = by[(name, eps)]
            assert run["mode"] == "private"
            assert run["epsilon_provable"] == pytest.approx(eps) == run["epsilon_claimed"]
            assert run["delta"] == delta
            features, head = run["ledger"]["releases"]
            assert features["epsilon_provable"] == 0.0 and "trained on public data only" in features["basis"]
            assert head["mechanism"] == mech
            assert head["details"]["n"] == SMALL["max_private"]
    # the Gaussian head at ε = 8 learns from the private records (10 classes: chance is 0.1)
    assert by[("fm_head_gauss", 8.0)]["accuracy"] > 0.6
    assert by[("fm_head", 8.0)]["accuracy"] > by[("fm_head", 1.0)]["accuracy"] - 0.05
    assert [r["method"] for r in results["runs"]].count("fm_head") == 2  # ε = 1, 8
    table = markdown_table(summarize(results))
    assert "public_only" in table and "fm_head_gauss" in table and "0 (private data unused)" in table


def test_public_digits_source():
    assert "digits" in PUBLIC_SOURCES
    ctx = build_context(CompareConfig(public="digits", options=SMALL), "mnist_sample")
    assert ctx.x_public.shape == (1797, 28, 28, 1) and ctx.public_source == "digits"
    assert len(ctx.x_private) == SMALL["max_private"]


def test_heads_need_public_data():
    with pytest.raises(ValueError, match="needs public data"):
        CompareConfig(methods=("fm_head_gauss",), public=0).validate()


def test_scatter_head_needs_no_public_data_and_is_proven():
    pytest.importorskip("tfdpmech.features.kymatio_compat", reason="kymatio is the optional extra tfdpmech[scatter]")
    config = CompareConfig(methods=("fm_head_scatter",), epsilons=(8.0,), seeds=(0,), epochs=1, public=0, audit=(),
                           verbose=0, options={"max_private": 600, "max_test": 200})
    (run,) = run_comparison(config)["runs"]  # no public_only row: no public data is used
    assert run["mode"] == "private" and run["epsilon_provable"] == pytest.approx(8.0) == run["epsilon_claimed"]
    features, head = run["ledger"]["releases"]
    assert features["epsilon_provable"] == 0.0 and "scattering transform" in features["basis"]
    assert head["mechanism"] == "gaussian" and head["details"]["n"] == 600
    assert run["accuracy"] > 0.3  # learns from 600 private records (chance 0.1)
    assert run["notes"]["features"] == "scatter:J2:512"  # the default projection


def test_scatter_head_projects_to_the_dimension_its_option_names_at_each_epsilon():
    pytest.importorskip("tfdpmech.features.kymatio_compat", reason="kymatio is the optional extra tfdpmech[scatter]")
    config = CompareConfig(methods=("fm_head_scatter",), epsilons=(2.0, 8.0), seeds=(0,), epochs=1, public=0,
                           audit=(), verbose=0,
                           options={"max_private": 300, "max_test": 100, "scatter_units": {8.0: 64}})
    runs = {run["epsilon_target"]: run for run in run_comparison(config)["runs"]}
    assert runs[8.0]["notes"]["features"] == "scatter:J2:64"
    assert runs[2.0]["notes"]["features"] == "scatter:J2:512"  # no value at this ε: the default


@pytest.mark.parametrize("units, error", [(0, ValueError), (2.5, TypeError), ("256", TypeError)])
def test_a_bad_projection_dimension_is_refused_naming_the_option_before_any_run(units, error):
    config = CompareConfig(methods=("fm_head_scatter",), epsilons=(1.0,), public=0,
                           options={"scatter_units": {1.0: units}})
    with pytest.raises(error, match=r"options\['scatter_units'\]\[1\.0\]"):
        config.validate()


@pytest.fixture
def public_fits(monkeypatch):
    """The public models trained from here on (one entry per ``fit``), none kept in this process yet; 1 epoch."""
    import keras
    from tfdpmech.experiments import context as context_module

    monkeypatch.setattr(context_module, "_TRAINED_PUBLIC", {})
    monkeypatch.setitem(context_module.PUBLIC_RECIPES, "image", {"epochs": 1, "learning_rate": 1e-3, "batch_size": 32})
    fits = []
    real_fit = keras.Model.fit
    monkeypatch.setattr(keras.Model, "fit", lambda self, *a, **k: fits.append(1) or real_fit(self, *a, **k))
    return fits


def test_a_second_context_on_the_same_public_records_reuses_the_trained_public_model(public_fits):
    import numpy as np

    fits = public_fits
    small = {"max_private": 300, "max_test": 100}
    first = build_context(CompareConfig(model="mlp", public=200, options=small), "mnist_sample").public_model(0)
    again = build_context(CompareConfig(model="mlp", public=200, options=small), "mnist_sample").public_model(0)
    assert len(fits) == 1 and again is not first
    assert all(np.array_equal(a, b) for a, b in zip(first.get_weights(), again.get_weights()))
    other_seed = build_context(CompareConfig(model="mlp", public=200, options=small), "mnist_sample").public_model(1)
    other_records = build_context(CompareConfig(model="mlp", public=300, options=small), "mnist_sample").public_model(0)
    assert len(fits) == 3 and other_seed is not None and other_records is not None


def test_a_resumable_comparison_keeps_its_public_model_for_the_processes_that_continue_it(public_fits, tmp_path):
    import numpy as np
    from tfdpmech.experiments import context as context_module

    fits = public_fits
    small = {"max_private": 300, "max_test": 100}

    def public(out, resume=True, public=200):
        config = CompareConfig(model="mlp", public=public, options=small, out=str(out), resume=resume)
        return build_context(config, "mnist_sample").public_model(0)

    first = public(tmp_path)
    kept = list((tmp_path / "parts").glob("public-*.npz"))
    assert len(fits) == 1 and len(kept) == 1
    context_module._TRAINED_PUBLIC.clear()  # as in a new process
    again = public(tmp_path)
    assert len(fits) == 1  # loaded, not trained again
    assert all(np.array_equal(a, b) for a, b in zip(first.get_weights(), again.get_weights()))
    context_module._TRAINED_PUBLIC.clear()
    public(tmp_path, public=300)  # other public records: another model, kept beside the first
    assert len(fits) == 2 and len(list((tmp_path / "parts").glob("public-*.npz"))) == 2
    context_module._TRAINED_PUBLIC.clear()
    public(tmp_path / "fresh", resume=False)  # without resume nothing is kept
    assert len(fits) == 3 and not (tmp_path / "fresh").exists()
