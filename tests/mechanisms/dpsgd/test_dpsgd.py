"""Tests for tfdpmech.mechanisms.dpsgd.ShuffledDPSGD: training on every path, ledger, guards, bad input.

``engine="auto"`` throughout: tensorflow-privacy on the TensorFlow 2.15 stack, tfdpmech's own engine on
Keras 3. Only the tensorflow-privacy cross-checks (its DP optimizers' microbatch path, its rebuilt
DPModel) skip where it does not import. Models are tiny (300 MNIST examples, an MLP with 32 hidden
units, one epoch).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tfdpmech import models
from tfdpmech.accounting import PrivacyBudget, PrivacyLedger, Release
from tfdpmech.accounting.dpsgd import dpsgd_steps
from tfdpmech.mechanisms.dpsgd import ShuffledDPSGD, supports_fast_clipping
from tfdpmech.mechanisms.dpsgd.runs.paths import tf_privacy_available

pytestmark = pytest.mark.dpsgd
TF_PRIVACY_CROSS_CHECK = pytest.mark.skipif(
    not tf_privacy_available(),
    reason="tensorflow-privacy cross-check: its DP optimizers' microbatch path runs on the TensorFlow 2.15 stack only",
)

N, BATCH, DELTA = 300, 50, 1e-3


@pytest.fixture(scope="module")
def mnist_small(mnist_sample):
    return mnist_sample.x_train[:N], mnist_sample.y_train[:N]


def tiny_mlp():
    return models.standard_mlp(first_units=32)


# --- training -------------------------------------------------------------------------------

@pytest.mark.parametrize("path, num_microbatches, expected", [
    ("auto", None, "fast_clipping"),
    pytest.param("microbatch", None, "microbatch", marks=TF_PRIVACY_CROSS_CHECK),
    pytest.param("microbatch", 25, "microbatch", marks=[pytest.mark.slow, TF_PRIVACY_CROSS_CHECK]),
    ("vectorized", None, "vectorized"),
    pytest.param("fast_clipping", 25, "fast_clipping", marks=TF_PRIVACY_CROSS_CHECK),
])
def test_paths_train_one_epoch(mnist_small, path, num_microbatches, expected):
    x, y = mnist_small
    dp = ShuffledDPSGD(2.0, DELTA, BATCH, 1, N, path=path, num_microbatches=num_microbatches, optimizer="sgd")
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


@pytest.mark.parametrize("path", ["auto", pytest.param("microbatch", marks=TF_PRIVACY_CROSS_CHECK)])
def test_partial_batch_is_refused(mnist_small, path):
    x, y = mnist_small
    dp = ShuffledDPSGD(2.0, DELTA, BATCH, 1, N, path=path)
    model = dp.compile(tiny_mlp())
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"drop_remainder=True"):
        model.fit(x, y, batch_size=40, epochs=1, verbose=0)


def test_fast_clipping_shares_weights_with_the_given_model():
    base = tiny_mlp()
    dp = ShuffledDPSGD(2.0, DELTA, BATCH, 1, N)
    model = dp.compile(base)
    if dp.engine == "tensorflow_privacy":
        assert model is not base  # tensorflow-privacy rebuilds the layers into a DPSequential
    else:
        assert dp.engine == "tfdpmech" and model is base  # tfdpmech trains the user's own model
    assert [id(v) for v in model.trainable_variables] == [id(v) for v in base.trainable_variables]


# --- ledger ---------------------------------------------------------------------------------

def test_ledger_records_proven_release():
    shared = PrivacyLedger([Release("other", "laplace", 0.5, 0.5, "Laplace mechanism", neighbours="add_remove")])
    dp = ShuffledDPSGD(1.0, 1e-4, BATCH, 3, N, ledger=shared, l2_norm_clip=0.7)
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
    assert release.details["steps"] == dpsgd_steps(N, BATCH, 3)
    assert release.epsilon_provable > release.epsilon_claimed
    assert shared.epsilon_provable() == pytest.approx(0.5 + release.epsilon_provable)
    with pytest.raises(RuntimeError, match="new ShuffledDPSGD"):
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
        ShuffledDPSGD(**args)


def test_missing_tensorflow_privacy_gives_one_line_hint(monkeypatch):
    for name in [m for m in list(sys.modules) if m == "tensorflow_privacy" or m.startswith("tensorflow_privacy.")]:
        monkeypatch.setitem(sys.modules, name, None)
    assert ShuffledDPSGD(1.0, DELTA, BATCH, 1, N).engine == "tfdpmech"  # "auto" falls back to tfdpmech's own
    with pytest.raises(ImportError) as info:
        ShuffledDPSGD(1.0, DELTA, BATCH, 1, N, engine="tensorflow_privacy")
    message = str(info.value)
    assert "pip install 'tfdpmech[tfprivacy]' on Python 3.11 (TensorFlow 2.15;" in message and "\n" not in message
    assert "engine='tfdpmech'" in message
    with pytest.raises(ImportError, match=re.escape("pip install 'tfdpmech[tfprivacy]'")):
        supports_fast_clipping(tiny_mlp())


@pytest.mark.slow
def test_import_tfdpmech_does_not_need_tensorflow_privacy():
    code = textwrap.dedent("""
        import sys
        sys.modules["tensorflow_privacy"] = None  # as if it were not installed
        import tfdpmech, tfdpmech.mechanisms.dpsgd
        from tfdpmech.mechanisms.dpsgd import ShuffledDPSGD
        print("ENGINE:", ShuffledDPSGD(1.0, 1e-5, 10, 1, 100).engine)
        try:
            ShuffledDPSGD(1.0, 1e-5, 10, 1, 100, engine="tensorflow_privacy")
        except ImportError as exc:
            print("HINT:", exc)
    """)
    root = Path(__file__).resolve().parents[3]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=root)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ENGINE: tfdpmech" in out.stdout
    assert "HINT:" in out.stdout and "pip install 'tfdpmech[tfprivacy]' on Python 3.11" in out.stdout


def test_repr_shows_claimed_and_provable():
    text = repr(ShuffledDPSGD(1.0, 1e-5, 50, 2, 1000))
    assert "claimed ε=" in text and "provable ε=" in text
