"""tfdpmech's DP-SGD engine under MirroredStrategy over 2 logical CPU devices: one noise draw per step.

The distributed case runs in a fresh process (``_distributed_worker.py``): logical devices must be
configured before TensorFlow initialises them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.mechanisms.dpsgd import DPSGD

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_distributed_worker.py")


@pytest.fixture(scope="module")
def two_replicas(tmp_path_factory):
    out = tmp_path_factory.mktemp("dpsgd_distributed") / "result.json"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(WORKER))))  # this checkout's package,
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)  # not an installed one
    proc = subprocess.run([sys.executable, WORKER, str(out)], capture_output=True, text=True, timeout=400,
                          env={**os.environ, "PYTHONPATH": path})
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out) as fh:
        return json.load(fh)


@pytest.mark.slow
def test_the_noise_of_one_step_under_two_replicas_has_variance_sigma_squared_c_squared(two_replicas):
    """Zero gradients: the update is the noise / L alone. Noise on both replicas, summed, would give
    σC·√2 (0.72 here); averaged, σC/√2 (0.36); one draw gives σC = 0.51."""
    assert two_replicas["replicas"] == 2
    noise = np.asarray(two_replicas["noise_two_replicas"])
    assert noise.size == 2000
    # sample sd of 2000 normals: SE ≈ 1.6 %; 10 % is beyond 6 SE, and √2 away from both pitfalls
    assert np.std(noise) == pytest.approx(1.7 * 0.3, rel=0.10)
    assert abs(np.mean(noise)) < 4 * 1.7 * 0.3 / np.sqrt(noise.size)


@pytest.mark.slow
def test_the_clipped_sum_under_two_replicas_equals_one_device(two_replicas):
    two, one = np.asarray(two_replicas["clipped_two_replicas"]), np.asarray(two_replicas["clipped_one_device"])
    assert np.abs(one).max() > 0
    assert np.abs(two - one).max() <= 1e-5 * np.abs(one).max()  # float32 sums in another order


@pytest.mark.slow
def test_poisson_dpsgd_trains_under_mirrored_strategy_with_one_release(two_replicas):
    run = two_replicas["poisson"]
    assert run["engine"] == "tfdpmech"  # engine='auto' under a strategy: the engine that adds the noise once
    assert run["releases"] == 1 and run["steps"] == 10 and run["padded"] % 2 == 0 and run["loss_finite"]


@pytest.mark.slow
def test_what_the_accounting_does_not_cover_is_refused_before_any_release(two_replicas):
    assert "batch_size=25 does not split evenly across the strategy's 2 replicas" in two_replicas["odd_batch_error"]
    assert two_replicas["odd_batch_releases"] == 0
    assert "DPSGD.dataset under MultiWorkerMirroredStrategy needs seed= (got None)" in \
        two_replicas["multiworker_seed_error"]
    assert "fit trains only on DPSGD.dataset(x, y, seed=...)" in two_replicas["multiworker_fit_error"]
    assert two_replicas["multiworker_releases"] == 0
    if "tf_privacy_error" in two_replicas:  # the TensorFlow 2.15 stack
        assert "Pass engine='tfdpmech'" in two_replicas["tf_privacy_error"]
        assert two_replicas["tf_privacy_releases"] == 0


def test_an_unsupported_strategy_is_refused_at_compile():
    dp = DPSGD(1.0, 1e-5, expected_batch_size=10, epochs=1, n=100, engine="tfdpmech")
    with tf.distribute.experimental.CentralStorageStrategy().scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        with pytest.raises(ValueError, match="does not support strategy=CentralStorageStrategy.*MirroredStrategy"):
            dp.compile(model)
    assert not dp.ledger.releases


@pytest.mark.slow
def test_bandmf_under_two_replicas_equals_one_device_and_several_workers_are_refused(two_replicas):
    two, one = two_replicas["bandmf_two_replicas"], two_replicas["bandmf_one_device"]
    assert two["steps"] == one["steps"] == 20 and two["mechanism"] == "dpsgd_bandmf"
    for got, want in zip(two["weights"], one["weights"]):  # one w_t per step, added once: the same run
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    assert "bands=3 (BandMF) trains on tfdpmech's engine on one machine" in two_replicas["multiworker_bandmf_error"]
    assert two_replicas["multiworker_bandmf_releases"] == 0
