"""Tests for tfdpmech.baselines.dpsgd: σ calibration, both training paths, ledger, guards, bad input.

Needs tensorflow-privacy (TensorFlow 2.15 stack); skipped with a reason elsewhere. Models are tiny
(300 MNIST examples, an MLP with 32 hidden units, one epoch).
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.dpsgd
pytest.importorskip(
    "tensorflow_privacy",
    reason="tensorflow-privacy is not installed or does not import (it needs TensorFlow 2.15 / Keras 2)",
)

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow_privacy.privacy.analysis import compute_dp_sgd_privacy_lib  # noqa: E402
from tensorflow_privacy.privacy.optimizers import dp_optimizer_keras  # noqa: E402

from tfdpmech import data, models  # noqa: E402
from tfdpmech.baselines import dpsgd  # noqa: E402
from tfdpmech.baselines import (  # noqa: E402
    DPSGD,
    epsilon_for_noise_multiplier,
    noise_multiplier_for_epsilon,
    supports_fast_clipping,
)
from tfdpmech.callbacks import PrivacyBudget  # noqa: E402
from tfdpmech.ledger import PrivacyLedger, Release  # noqa: E402

N, BATCH, DELTA = 300, 50, 1e-3


@pytest.fixture(scope="module")
def mnist_small():
    splits = data.load("mnist_sample")
    return splits.x_train[:N], splits.y_train[:N]


def tiny_mlp():
    return models.standard_mlp(first_units=32)


def tiny_conv():
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(2, 3, strides=4, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(10),
    ], name="tiny_conv")


# --- accounting -----------------------------------------------------------------------------

def test_noise_multiplier_is_monotone_in_epsilon():
    sigmas = [noise_multiplier_for_epsilon(eps, 1e-5, 1000, 50, 2) for eps in (0.3, 1.0, 8.0)]
    assert sigmas[0] > sigmas[1] > sigmas[2] > 0


@pytest.mark.parametrize("eps", [0.3, 1.0, 8.0])
def test_round_trip_meets_target_and_is_tight(eps):
    sigma = noise_multiplier_for_epsilon(eps, 1e-5, 1000, 50, 2)
    achieved = epsilon_for_noise_multiplier(sigma, 1e-5, 1000, 50, 2)
    assert achieved <= eps
    assert achieved == pytest.approx(eps, rel=1e-3)
    # a slightly smaller σ no longer meets the target: σ is (near) the smallest one
    assert epsilon_for_noise_multiplier(sigma * 0.99, 1e-5, 1000, 50, 2) > eps


def test_anchor_matches_tensorflow_privacy():
    # Classic MNIST setting: n=60000, batch 256, σ=1.1, 60 epochs, δ=1e-5.
    ours = epsilon_for_noise_multiplier(1.1, 1e-5, 60000, 256, 60)
    theirs = compute_dp_sgd_privacy_lib._compute_dp_sgd_example_privacy(  # pylint: disable=protected-access
        60, 1.1, 1e-5, used_microbatching=False, poisson_subsampling_probability=256 / 60000
    )
    assert ours == pytest.approx(theirs, rel=1e-12)
    statement = compute_dp_sgd_privacy_lib.compute_dp_sgd_privacy_statement(
        60000, 256, 60, 1.1, 1e-5, used_microbatching=False
    )
    poisson = float(re.search(r"Epsilon assuming Poisson sampling \(\*\):\s+([0-9.]+)", statement).group(1))
    assert round(ours, 3) == poisson
    assert ours == pytest.approx(2.5967, abs=1e-4)  # regression anchor of the above


def test_microbatching_doubles_sensitivity():
    plain = epsilon_for_noise_multiplier(1.2, 1e-5, 1000, 50, 2)
    doubled = epsilon_for_noise_multiplier(2.4, 1e-5, 1000, 50, 2, used_microbatching=True)
    assert doubled == pytest.approx(plain, rel=1e-12)
    theirs = compute_dp_sgd_privacy_lib._compute_dp_sgd_example_privacy(  # pylint: disable=protected-access
        2, 2.4, 1e-5, used_microbatching=True, poisson_subsampling_probability=50 / 1000
    )
    assert doubled == pytest.approx(theirs, rel=1e-12)


def test_steps_use_integer_ceiling():
    assert dpsgd.dpsgd_steps(300, 50, 1) == 6
    assert dpsgd.dpsgd_steps(310, 50, 3) == 19  # ceil(930 / 50)
    assert epsilon_for_noise_multiplier(0.0, 1e-5, 300, 50, 1) == math.inf


# --- path choice ----------------------------------------------------------------------------

def test_supports_fast_clipping():
    assert supports_fast_clipping(models.standard_mlp())
    assert not supports_fast_clipping(models.standard_cnn())  # Conv2D is not in 0.9.0's registry
    unsupported = dpsgd.fast_clipping_layers(models.standard_cnn())
    assert len(unsupported) == 2 and all("(Conv2D)" in name for name in unsupported)  # the Dense layers are fine

    class Subclassed(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(10)

        def call(self, x):
            return self.dense(x)

    sub = Subclassed()
    sub.build((None, 4))
    assert not supports_fast_clipping(sub)  # no internal compute graph
    with pytest.raises(ValueError, match="Sequential or functional"):
        DPSGD(2.0, DELTA, BATCH, 1, N, path="vectorized").compile(sub)


def test_auto_picks_vectorized_for_unsupported_layer_and_fast_refuses_it():
    dp = DPSGD(2.0, DELTA, BATCH, 1, N)
    model = dp.compile(tiny_conv())
    assert dp.path == "vectorized"
    assert dp.requested_path == "auto"
    assert not model._enable_fast_peg_computation  # pylint: disable=protected-access
    dp = DPSGD(2.0, DELTA, BATCH, 1, N, path="microbatch")
    model = dp.compile(tiny_conv())
    assert isinstance(model.optimizer, dp_optimizer_keras.GenericDPAdamOptimizer)
    assert model.loss.reduction == "none"
    with pytest.raises(ValueError, match=r"Conv2D.*path='vectorized'"):
        DPSGD(2.0, DELTA, BATCH, 1, N, path="fast_clipping").compile(tiny_conv())
    dp = DPSGD(2.0, DELTA, BATCH, 1, N, path="vectorized")
    model = dp.compile(tiny_conv())
    assert dp.path == "vectorized" and not model._enable_fast_peg_computation  # pylint: disable=protected-access


# --- training -------------------------------------------------------------------------------

@pytest.mark.parametrize("path, num_microbatches, expected", [
    ("auto", None, "fast_clipping"),
    ("microbatch", None, "microbatch"),
    pytest.param("microbatch", 25, "microbatch", marks=pytest.mark.slow),
    ("vectorized", None, "vectorized"),
    ("fast_clipping", 25, "fast_clipping"),
])
def test_paths_train_one_epoch(mnist_small, path, num_microbatches, expected):
    x, y = mnist_small
    dp = DPSGD(2.0, DELTA, BATCH, 1, N, path=path, num_microbatches=num_microbatches, optimizer="sgd")
    model = dp.compile(tiny_mlp)  # a builder is accepted
    assert dp.path == expected
    callback = dp.callback(verbose=0)
    assert isinstance(callback, PrivacyBudget)
    history = model.fit(dp.dataset(x, y, seed=0), epochs=1, verbose=0, callbacks=[callback])
    assert np.isfinite(history.history["loss"][0])
    assert history.history["epsilon_claimed"][0] == pytest.approx(dp.epsilon_achieved)
    assert history.history["epsilon_provable"][0] == pytest.approx(dp.release.details["epsilon_any_order"])
    assert 0 < history.history["dpsgd_epsilon_spent"][0] <= dp.epsilon_achieved + 1e-12
    assert int(model.optimizer.iterations.numpy()) == N // BATCH
    # the accounted steps are spent: one more step is refused
    with pytest.raises(tf.errors.InvalidArgumentError, match="privacy budget spent"):
        model.fit(dp.dataset(x, y, seed=1), epochs=1, verbose=0)


def test_partial_batch_is_refused(mnist_small):
    x, y = mnist_small
    dp = DPSGD(2.0, DELTA, BATCH, 1, N, path="microbatch")
    model = dp.compile(tiny_mlp())
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"drop_remainder=True"):
        model.fit(x, y, batch_size=40, epochs=1, verbose=0)


def test_fast_clipping_shares_weights_with_the_given_model():
    base = tiny_mlp()
    dp = DPSGD(2.0, DELTA, BATCH, 1, N)
    model = dp.compile(base)
    assert model is not base
    assert [id(v) for v in model.trainable_variables] == [id(v) for v in base.trainable_variables]


# --- ledger ---------------------------------------------------------------------------------

def test_ledger_records_proven_release():
    shared = PrivacyLedger([Release("other", "laplace", 0.5, 0.5, "Laplace mechanism")])
    dp = DPSGD(1.0, 1e-4, BATCH, 3, N, ledger=shared, l2_norm_clip=0.7)
    assert len(shared) == 1  # nothing recorded before compile
    dp.compile(tiny_mlp())
    release = dp.release
    assert shared.releases[-1] is release and dp.ledger is shared
    assert release.guarantee == "proven"
    assert release.mechanism == "dpsgd"
    assert release.delta == 1e-4
    assert release.epsilon_claimed == pytest.approx(dp.epsilon_achieved) and dp.epsilon_achieved <= 1.0
    # provable for shuffled fixed-size batches: `epochs` Gaussian mechanisms, no amplification
    assert release.epsilon_provable == pytest.approx(release.details["epsilon_any_order"])
    assert release.noise_scale == dp.noise_multiplier and release.sensitivity == 0.7
    assert "RDP" in release.basis and "Poisson" in release.basis
    assert release.details["steps"] == dpsgd.dpsgd_steps(N, BATCH, 3)
    assert release.epsilon_provable > release.epsilon_claimed
    assert shared.epsilon_provable() == pytest.approx(0.5 + release.epsilon_provable)
    with pytest.raises(RuntimeError, match="new DPSGD"):
        dp.compile(tiny_mlp())


# --- bad input ------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(epsilon=0.0), ValueError, "epsilon"),
    (dict(epsilon=-1.0), ValueError, "epsilon"),
    (dict(delta=0.0), ValueError, "delta"),
    (dict(delta=1.0), ValueError, "delta"),
    (dict(n=0), ValueError, "n must be"),
    (dict(epochs=0), ValueError, "epochs"),
    (dict(batch_size=N + 1), ValueError, "exceeds the number of training records"),
    (dict(num_microbatches=7), ValueError, "does not divide into num_microbatches=7"),
    (dict(path="fast"), ValueError, "path must be one of"),
    (dict(optimizer="rmsprop"), ValueError, "optimizer must be one of"),
    (dict(l2_norm_clip=0.0), ValueError, "l2_norm_clip"),
    (dict(epochs=1.5), TypeError, "epochs"),
])
def test_bad_input(kwargs, exc, match):
    args = dict(epsilon=1.0, delta=DELTA, batch_size=BATCH, epochs=1, n=N)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        DPSGD(**args)


def test_bad_input_to_accounting():
    with pytest.raises(ValueError, match="epsilon"):
        noise_multiplier_for_epsilon(0.0, 1e-5, 100, 10, 1)
    with pytest.raises(ValueError, match="exceeds"):
        noise_multiplier_for_epsilon(1.0, 1e-5, 100, 200, 1)
    with pytest.raises(ValueError, match="noise_multiplier"):
        epsilon_for_noise_multiplier(-1.0, 1e-5, 100, 10, 1)


def test_bad_models_are_refused(mnist_small):
    dp = DPSGD(1.0, DELTA, BATCH, 1, N)
    softmax = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(),
                                keras.layers.Dense(10, activation="softmax")])
    with pytest.raises(ValueError, match="logits"):
        dp.compile(softmax)
    batchnorm = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(),
                                  keras.layers.BatchNormalization(), keras.layers.Dense(10)])
    with pytest.raises(ValueError, match="mixes the examples of a batch"):
        dp.compile(batchnorm)
    with pytest.raises(ValueError, match="not built"):
        dp.compile(keras.Sequential([keras.layers.Dense(10)]))
    with pytest.raises(ValueError, match="n=300"):
        dp.dataset(*[a[:100] for a in mnist_small])
    assert dp.release is None  # nothing was compiled, nothing recorded


def test_missing_tensorflow_privacy_gives_one_line_hint(monkeypatch):
    for name in [m for m in list(sys.modules) if m == "tensorflow_privacy" or m.startswith("tensorflow_privacy.")]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError) as info:
        DPSGD(1.0, DELTA, BATCH, 1, N)
    message = str(info.value)
    assert "pip install tfdpmech[dpsgd] (needs TensorFlow 2.15)" in message and "\n" not in message
    with pytest.raises(ImportError, match=re.escape("pip install tfdpmech[dpsgd]")):
        supports_fast_clipping(tiny_mlp())


@pytest.mark.slow
def test_import_tfdpmech_does_not_need_tensorflow_privacy():
    code = textwrap.dedent("""
        import sys
        sys.modules["tensorflow_privacy"] = None  # as if it were not installed
        import tfdpmech, tfdpmech.baselines
        from tfdpmech.baselines import DPSGD
        try:
            DPSGD(1.0, 1e-5, 10, 1, 100)
        except ImportError as exc:
            print("HINT:", exc)
    """)
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=root)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "HINT:" in out.stdout and "pip install tfdpmech[dpsgd] (needs TensorFlow 2.15)" in out.stdout


def test_uncertifiable_target_gives_a_clear_error():
    # the RDP bound levels off above 0.01 at δ = 1/n² (found by the DP-ERM comparison)
    with pytest.raises(ValueError, match="cannot be certified"):
        noise_multiplier_for_epsilon(0.01, 1 / 20000**2, 20000, 256, 20)


def test_repr_shows_claimed_and_provable():
    text = repr(DPSGD(1.0, 1e-5, 50, 2, 1000))
    assert "claimed ε=" in text and "provable ε=" in text
