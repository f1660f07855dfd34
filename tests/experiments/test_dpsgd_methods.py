"""The DP-SGD methods in the runner: Poisson (proven) by default, shuffled (claimed vs any-order), public variants."""

from __future__ import annotations

import argparse
import json

import keras
import numpy as np
import pytest

from tfdpmech import models
from tfdpmech.mechanisms.dpsgd import ShuffledDPSGD, RECIPE, DPSGD, make_dpsgd
from tfdpmech.mechanisms.dpsgd.runs.paths import resolve_engine
from tfdpmech.experiments import preset_config, run_comparison
from tfdpmech.experiments.bench import main as bench_main
from tfdpmech.experiments.methods.dpsgd import _trainable_copy
from tfdpmech.experiments.registry import METHODS
from tfdpmech.report.writer import report_markdown

pytestmark = pytest.mark.dpsgd


def test_registration():
    for name in ("dpsgd", "dpsgd_shuffled", "dpsgd_head", "dpsgd_finetune"):
        assert METHODS[name].unavailable() is None  # engine "auto": tensorflow-privacy or tfdpmech's own, everywhere
    assert METHODS["dpsgd"].mode == "private" and not METHODS["dpsgd"].uses_public
    assert "Poisson" in METHODS["dpsgd"].description
    assert "any-order" in METHODS["dpsgd_shuffled"].description
    assert METHODS["dpsgd_head"].uses_public and METHODS["dpsgd_finetune"].uses_public


def test_make_dpsgd_samplings_share_the_recipe():
    poisson = make_dpsgd(1.0, 1e-5, 7000, accountant="rdp")
    shuffled = make_dpsgd(1.0, 1e-5, 7000, sampling="shuffled")
    assert isinstance(poisson, DPSGD) and type(shuffled) is ShuffledDPSGD
    assert shuffled.batch_size == poisson.expected_batch_size == RECIPE.expected_batch_size
    assert shuffled.epochs == poisson.epochs == RECIPE.epochs
    assert shuffled.learning_rate == poisson.learning_rate and shuffled.l2_norm_clip == poisson.l2_norm_clip
    with pytest.raises(ValueError, match="sampling must be one of"):
        make_dpsgd(1.0, 1e-5, 7000, sampling="uniform")
    with pytest.raises(ValueError, match="has no \\['ema_momentum'\\]"):
        make_dpsgd(1.0, 1e-5, 7000, sampling="shuffled", recipe=RECIPE.replace(ema_momentum=0.9))


def test_finetune_copy_is_the_public_model_with_per_example_layers():
    keras.utils.set_random_seed(0)
    public = models.mlp(10)
    x = np.random.default_rng(0).random((64, 28, 28, 1)).astype(np.float32)
    public.layers[1].kernel.assign(public.layers[1].kernel * 3.0)
    public.get_layer("private_bias").bias.assign(np.linspace(-0.5, 0.5, 128).astype(np.float32))
    public(x, training=True)  # sets the batch min-max's moving estimates
    copy = _trainable_copy(public)
    np.testing.assert_allclose(copy(x, training=True).numpy(), public(x, training=False).numpy(), atol=1e-5)
    names = [type(layer).__name__ for layer in copy.layers]
    assert "BatchMinMax" not in names and "PerturbedBias" not in names
    # training mode is per-example: one record's output does not depend on the rest of the batch
    np.testing.assert_allclose(copy(x[:1], training=True).numpy(), copy(x, training=True).numpy()[:1], atol=1e-6)


@pytest.mark.slow  # four short trainings through the runner (~40 s on a loaded 2-core machine)
def test_quick_demo_rows():
    config = preset_config("demo", quick=True, methods=("dpsgd", "dpsgd_shuffled", "dpsgd_head", "dpsgd_finetune"),
                           audit=(), verbose=0)
    results = run_comparison(config)
    runs = {r["method"]: r for r in results["runs"]}
    engine = resolve_engine("auto")  # tensorflow_privacy on the TensorFlow 2.15 stack, tfdpmech on Keras 3
    dpsgd_runs = [runs[name] for name in ("dpsgd", "dpsgd_shuffled", "dpsgd_head", "dpsgd_finetune")]
    assert {run["notes"]["engine"] for run in dpsgd_runs} == {engine}
    assert [release["details"]["engine"] for run in dpsgd_runs for release in run["ledger"]["releases"]
            if release["mechanism"] == "dpsgd"] == [engine] * 4
    assert f"DP-SGD engine: {engine}" in report_markdown(results)
    poisson, shuffled = runs["dpsgd"], runs["dpsgd_shuffled"]
    # proven: the ledger's dp_accounting composition of the run's event, at most the calibrated ε
    assert poisson["epsilon_provable"] <= poisson["epsilon_claimed"] <= 1.0
    assert poisson["epsilon_provable"] == pytest.approx(poisson["epsilon_claimed"], rel=1e-2)
    assert poisson["notes"]["sampling"] == "poisson" and "Poisson sampling" in poisson["provable_basis"]
    assert shuffled["epsilon_claimed"] <= 1.0 < shuffled["epsilon_provable"]  # any-order bound
    assert shuffled["notes"]["sampling"] == "shuffled"
    for name in ("dpsgd_head", "dpsgd_finetune"):
        run = runs[name]
        assert run["epsilon_provable"] <= run["epsilon_claimed"] <= 1.0
        assert run["epsilon_provable"] == pytest.approx(run["epsilon_claimed"], rel=1e-2)
        components = [r["component"] for r in run["ledger"]["releases"]]
        assert components == ["public_pretraining", "dpsgd_training"]
        assert run["ledger"]["releases"][0]["epsilon_provable"] == 0.0
    for run in runs.values():
        assert 0.0 <= run["accuracy"] <= 1.0 and not run["diverged"]


@pytest.mark.slow  # a tiny benchmark (~30 s on a loaded 2-core machine)
def test_bench_reports_poisson_over_shuffled(tmp_path):
    out = tmp_path / "bench.json"
    args = argparse.Namespace(out=str(out), repeats=2, epochs=1, epsilon=1.0, max_private=1400,
                              methods=("dpsgd", "dpsgd_shuffled"), no_memory=True, no_dpsgd_speed=True, no_scale=True,
                              no_sources=True)
    assert bench_main(args) == 0
    ratio = json.loads(out.read_text())["dpsgd_poisson_over_shuffled_throughput"]
    assert ratio["repeats"] == 2 and 0 < ratio["min"] <= ratio["median"] <= ratio["max"]
