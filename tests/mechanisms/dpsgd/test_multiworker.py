"""DP-SGD under MultiWorkerMirroredStrategy, really distributed: two worker processes on 127.0.0.1.

Each cluster runs in fresh processes (``_multiworker_worker.py``, one CPU device each, TF_CONFIG with free
ports). The pure functions that make every worker draw the same global batch and take its own slice are
tested here directly (fast).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfdpmech.mechanisms.dpsgd.runs.run_engines as engines
from tfdpmech.mechanisms.dpsgd import ShuffledDPSGD, OptimizerSettings, DPSGD
from tfdpmech.mechanisms.dpsgd.sampling.poisson_sampling import run_element, tagged_poisson_batch
from tfdpmech.mechanisms.dpsgd.runs.multiworker import (
    check_sampling_seed,
    fingerprint,
    poisson_batch,
    replica_slice,
    seed_words,
    shuffled_batch,
)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _multiworker_worker as worker_module  # noqa: E402  (its data, model and seed; main() does not run)

WORKER = os.path.join(HERE, "_multiworker_worker.py")
TIMEOUT = 300


# -- fast: the shared batches and the refusals -------------------------------------------------------
def test_every_worker_derives_the_same_global_batch_and_each_row_lands_on_one_replica():
    x, y = worker_module.data()
    words = seed_words(check_sampling_seed(7, "test"))
    for step in range(3):
        a, b = poisson_batch(x, y, 0.25, 40, words, step), poisson_batch(x.copy(), y.copy(), 0.25, 40, words, step)
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)  # the same on every worker: a function of (seed, step) only
        slices = [replica_slice(a, r, 4) for r in range(4)]
        for k in range(3):
            np.testing.assert_array_equal(np.concatenate([s[k] for s in slices]), a[k])
    assert not np.array_equal(poisson_batch(x, y, 0.25, 40, words, 0)[2], poisson_batch(x, y, 0.25, 40, words, 1)[2])
    other = seed_words(check_sampling_seed(8, "test"))
    assert not np.array_equal(poisson_batch(x, y, 0.25, 40, words, 0)[2], poisson_batch(x, y, 0.25, 40, other, 0)[2])


def test_shuffled_global_batches_are_one_permutation_per_epoch():
    x, y = worker_module.data()
    words = seed_words(check_sampling_seed(7, "test"))
    rows = [shuffled_batch(np.arange(64), y, 16, 4, words, t)[0] for t in range(8)]
    assert sorted(np.concatenate(rows[:4])) == list(range(64)) == sorted(np.concatenate(rows[4:]))
    assert not np.array_equal(np.concatenate(rows[:4]), np.concatenate(rows[4:]))  # reshuffled each epoch


@pytest.mark.parametrize("seed", [None, -1, 1.5, True, "7"])
def test_a_missing_or_bad_shared_seed_is_refused(seed):
    with pytest.raises(ValueError, match=r"MultiWorkerMirroredStrategy needs seed= \(got .*\).*same non-negative int"):
        check_sampling_seed(seed, "DPSGD.dataset")


def test_the_fingerprint_sees_the_records_their_order_and_the_seed():
    x, _ = worker_module.data()
    assert fingerprint(x, 1) == fingerprint(x.copy(), 1)
    assert len({fingerprint(x, 1), fingerprint(x[::-1], 1), fingerprint(x[:-1], 1), fingerprint(x, 2)}) == 4


# -- slow: two worker processes ---------------------------------------------------------------------
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster(tmp_path, mode):
    ports = [_free_port(), _free_port()]
    procs, outs = [], []
    for index in range(2):
        tf_config = {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]}, "task": {"type": "worker", "index": index}}
        out = tmp_path / f"{mode}{index}.json"
        procs.append(subprocess.Popen([sys.executable, WORKER, mode, str(out)],
                                      env=dict(os.environ, TF_CONFIG=json.dumps(tf_config), CUDA_VISIBLE_DEVICES=""),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs.append(out)
    errors = []
    try:
        for proc in procs:
            errors.append(proc.communicate(timeout=TIMEOUT)[1])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return procs, outs, errors


def _result(path, stderr=""):
    assert path.exists(), stderr[-3000:]
    with open(path) as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def trained_cluster(tmp_path_factory):
    procs, outs, errors = _cluster(tmp_path_factory.mktemp("mw_train"), "train")
    assert [p.returncode for p in procs] == [0, 0], errors[0][-3000:] + errors[1][-3000:]
    return [_result(o, e) for o, e in zip(outs, errors)]


def _reference(dp, batches):
    """One process, no strategy, σ = 0: the same run trained on the same global batches."""
    floatx = keras.backend.floatx()
    keras.backend.set_floatx("float64")  # the losses' dtype (the model states its own)
    install = engines.install_dp_train_step
    engines.install_dp_train_step = worker_module.noise_off(install)
    try:
        model = dp.compile(worker_module.small_model())
        signature = tf.nest.map_structure(lambda a: tf.TensorSpec((None,) + a.shape[1:], tf.as_dtype(a.dtype)),
                                          batches[0])
        ds = tf.data.Dataset.from_generator(lambda: iter(batches), output_signature=signature)
        model.fit(ds, epochs=dp.epochs, steps_per_epoch=len(batches) // dp.epochs, verbose=0)
        return model.get_weights()
    finally:
        engines.install_dp_train_step = install
        keras.backend.set_floatx(floatx)


def _assert_same(got, want):
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert np.abs(g - w).max() <= 1e-9 * np.abs(w).max()


@pytest.mark.slow
def test_two_workers_train_noise_free_exactly_what_one_process_trains(trained_cluster):
    x, y = worker_module.data()
    words = seed_words(check_sampling_seed(worker_module.SEED, "test"))
    for result in trained_cluster:
        assert result["replicas"] == 2
    # Poisson: the constructor's seed is the shared sampling seed
    dp = DPSGD(2.0, 1e-5, expected_batch_size=16, epochs=1, n=64, seed=worker_module.SEED,
                      optimizer=OptimizerSettings("sgd", learning_rate=0.5), engine="tfdpmech")
    pwords = seed_words(dp._sampler_seed)
    want = _reference(dp, [run_element(tagged_poisson_batch(x, y, dp.sampling_probability, dp.padded_batch_size,
                                                            pwords, t, dp.run_id)) for t in range(dp.steps)])
    assert dp.steps == 4 and not np.allclose(want[0], worker_module.initial_weights()[0])
    for result in trained_cluster:
        assert result["poisson"]["steps"] == 4
        _assert_same(result["poisson"]["weights"], want)
    dp = ShuffledDPSGD(2.0, 1e-5, 16, 1, 64, optimizer=OptimizerSettings("sgd", learning_rate=0.5), engine="tfdpmech")
    want = _reference(dp, [shuffled_batch(x, y, 16, 4, words, t) for t in range(4)])
    for result in trained_cluster:
        assert result["shuffled"]["steps"] == 4
        _assert_same(result["shuffled"]["weights"], want)


@pytest.mark.slow
def test_two_workers_hold_exactly_one_release_on_the_chief(trained_cluster):
    chief, other = trained_cluster
    assert chief["chief"] and not other["chief"]
    for run in ("poisson", "shuffled"):
        assert chief[run]["releases"] == 1 and other[run]["releases"] == 0
        assert chief[run]["epsilon"] > 0 and other[run]["epsilon"] == 0
    assert chief["noise_releases"] == 1 and other["noise_releases"] == 0


@pytest.mark.slow
def test_the_noise_of_one_global_step_over_two_workers_has_variance_sigma_squared_c_squared(trained_cluster):
    """Zero inputs: the update is the noise / L alone. Noise on both workers, summed, would give σC·√2 (0.72);
    averaged, σC/√2 (0.36); one draw for the global step gives σC = 0.51."""
    chief, other = trained_cluster
    noise = np.asarray(chief["noise"])
    np.testing.assert_array_equal(noise, other["noise"])  # one model: the same update on both workers
    assert noise.size == 8000
    # sample sd of 8000 normals: SE ≈ 0.8 %; 10 % is beyond 12 SE, and 29 % / 41 % away from both pitfalls
    assert np.std(noise) == pytest.approx(1.7 * 0.3, rel=0.10)
    assert abs(np.mean(noise)) < 5 * 1.7 * 0.3 / np.sqrt(noise.size)


@pytest.mark.slow
def test_a_worker_lost_before_training_leaves_no_release_and_no_charge(tmp_path):
    procs, outs, errors = _cluster(tmp_path, "kill_before")
    assert procs[1].returncode == 3 and not outs[1].exists()
    chief = _result(outs[0], errors[0])
    assert "error" in chief and chief["steps"] == 0  # fit's join of the workers failed: no noisy step
    assert chief["releases"] == 0 and chief["epsilon"] == 0


@pytest.mark.slow
def test_a_worker_lost_after_noisy_steps_leaves_the_one_charge_standing(tmp_path):
    procs, outs, errors = _cluster(tmp_path, "kill_during")
    assert procs[1].returncode == 3 and not outs[1].exists()
    chief = _result(outs[0], errors[0])
    assert "error" in chief and chief["steps"] < 8  # the run did not finish
    assert chief["releases"] == 1 and chief["epsilon"] > 0  # recorded once, when every worker had joined fit
