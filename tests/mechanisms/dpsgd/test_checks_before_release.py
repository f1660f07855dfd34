"""Every check that can run before the release runs before it: a refusal leaves the ledger empty.

Out-of-range labels, a layer passed as the model, a seed that is not one, δ ≥ 1/n; and, under a
one-worker MultiWorkerMirroredStrategy, a private model's fit that trains with one release.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from tfdpmech.accounting import PrivacyLedger
from tfdpmech.mechanisms.dpsgd import ShuffledDPSGD
from tfdpmech import DPSGD, make_private

N = 100
LOSS = keras.losses.CategoricalCrossentropy(from_logits=True)


def _model(classes=3):
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(classes)])


def _x():
    return np.random.default_rng(0).random((N, 4)).astype(np.float32)


@pytest.mark.parametrize("loss", [None, keras.losses.SparseCategoricalCrossentropy(from_logits=True)])
def test_labels_out_of_range_are_refused_by_prepare_before_the_release(loss):
    dp = DPSGD(2.0, 1e-3, expected_batch_size=10, epochs=1, n=N, engine="tfdpmech")
    with pytest.raises(ValueError, match=r"y has labels in \[7, 7\], outside \[0, 2\]"):
        dp.prepare(_model(), _x(), np.full(N, 7), loss=loss)
    assert len(dp.ledger) == 0 and dp.release is None and dp.model is None
    prepared = dp.prepare(_model(), _x(), np.arange(N) % 3, loss=loss)  # the same run, good labels: trains
    prepared.fit(verbose=0)
    assert len(dp.ledger) == 1 and dp.steps_taken() == dp.steps


def test_a_layer_passed_as_the_model_is_a_type_error_naming_model():
    with pytest.raises(TypeError, match=r"model must be a built keras.Model, got Dense"):
        make_private(keras.layers.Dense(3), DPSGD(epsilon=1.0, delta=1e-3, n=N, expected_batch_size=10, epochs=1))
    dp = DPSGD(1.0, 1e-3, expected_batch_size=10, epochs=1, n=N)
    with pytest.raises(TypeError, match="model must be a keras.Model.*got Dense"):
        dp.compile(keras.layers.Dense(3))
    assert len(dp.ledger) == 0


@pytest.mark.parametrize("delta", [1.0 / N, 0.05])
def test_delta_not_below_one_over_n_is_refused(delta):
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match=r"delta=.* is not below 1/n = 0.01 \(n=100\).*e.g. delta=0.001"):
        make_private(_model(), DPSGD(epsilon=1.0, delta=delta, n=N, expected_batch_size=10, epochs=1, ledger=ledger))
    with pytest.raises(ValueError, match="not below 1/n"):
        ShuffledDPSGD(1.0, delta, 10, 1, N)
    assert len(ledger) == 0
    make_private(_model(), DPSGD(epsilon=1.0, delta=1e-3, n=N, expected_batch_size=10, epochs=1))  # well below: fine


_ONE_WORKER = r"""
import json, os, sys
os.environ.pop("TF_CONFIG", None)
import numpy as np, keras, tensorflow as tf
from tfdpmech import DPSGD, make_private
strategy = tf.distribute.MultiWorkerMirroredStrategy()
rng = np.random.default_rng(0)
x, y = rng.random((64, 4)).astype(np.float32), keras.utils.to_categorical(rng.integers(0, 3, 64), 3)
with strategy.scope():
    model = make_private(keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)]),
                         DPSGD(epsilon=2.0, delta=1e-3, n=64, expected_batch_size=16, epochs=1, seed=7))
    model.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True))
before = len(model.privacy_ledger)
model.fit(x, y, verbose=0)
print(json.dumps({"before_fit": before, "releases": len(model.privacy_ledger), "steps": model.dp_sgd.steps_taken(),
                  "planned": model.dp_sgd.steps}))
"""


@pytest.mark.slow
def test_make_private_under_a_one_worker_multi_worker_strategy_trains_with_one_release():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""), TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-c", _ONE_WORKER], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"before_fit": 0, "releases": 1, "steps": result["planned"], "planned": 4}


def test_a_step_that_fails_on_the_data_applies_nothing_and_a_corrected_fit_continues_the_run():
    """An error inside a DP step (an id outside an Embedding's table: found only when the step runs) applies no
    update and leaves the optimizer's step count as it was: the run stays at its step, its one release unchanged,
    and fit on corrected records trains the whole run."""
    keras.utils.set_random_seed(0)
    ids = keras.Input((5,), dtype="int32")
    model = keras.Model(ids, keras.layers.Dense(2)(keras.layers.GlobalAveragePooling1D()(
        keras.layers.Embedding(10, 4)(ids))))
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 10, (64, 5)).astype(np.int32), rng.integers(0, 2, 64).astype(np.int32)
    bad = x.copy()
    bad[:, 0] = 50
    private = make_private(model, DPSGD(epsilon=2.0, delta=1e-3, n=64, expected_batch_size=16, epochs=1, seed=0))
    private.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = [w.copy() for w in model.get_weights()]
    with pytest.raises(ValueError, match=r"failed on the data \(indices\[\d+,0\] = 50 is not in \[0, 10\)\).*step 0 of 4"):
        private.fit(bad, y, verbose=0)
    assert private.dp_sgd.steps_taken() == 0 and len(private.privacy_ledger) == 1
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    private.fit(x, y, verbose=0)
    assert private.dp_sgd.steps_taken() == private.dp_sgd.steps == 4 and len(private.privacy_ledger) == 1
