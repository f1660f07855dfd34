"""The functional head under tf.distribute, really distributed: 2 logical CPU devices, 2 worker processes.

Each case runs in fresh processes (``_distributed_worker.py``): logical devices must be configured
before TensorFlow initialises them, and MultiWorkerMirroredStrategy needs one process per worker
(TF_CONFIG on 127.0.0.1, ports picked free). Every process is bounded by a timeout and killed on
failure.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from tfdpmech.mechanisms.functional_head import FunctionalHead

pytestmark = pytest.mark.slow  # fresh TensorFlow processes: about 10-30 s each on a 2-core machine

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_distributed_worker.py")
TIMEOUT = 240


def _data(n=2500, d=6, c=4, seed=0):  # the worker's data (same seeds)
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 1, (n, d)), rng.integers(c, size=n)


def _reference(mechanism):
    x, y = _data()
    kwargs = dict(delta=1e-5) if mechanism == "gaussian" else {}
    head = FunctionalHead(None, 4, mechanism=mechanism, epsilon=1.0, seed=7, **kwargs)
    head.fit(x, y)
    return head


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(procs):
    try:
        for proc in procs:
            proc.communicate(timeout=TIMEOUT)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def _result(path):
    with open(path) as fh:
        return json.load(fh)


def _assert_same_release(result, reference):
    assert "error" not in result, result["error"]
    stats = reference.statistics()
    for key in ("s1_bar", "s2_bar"):
        got = np.asarray(result[key])
        assert np.abs(got - stats[key]).max() <= 1e-9 * np.abs(stats[key]).max()
    assert result["n"] == reference.n == 2500
    np.testing.assert_allclose(result["kernel"], reference.kernel, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
def test_mirrored_over_two_logical_devices_releases_once_what_one_device_releases(tmp_path, mechanism):
    out = tmp_path / "mirrored.json"
    proc = subprocess.Popen([sys.executable, WORKER, "mirrored2", str(out)], env=dict(os.environ, MECH=mechanism),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _run([proc])
    result = _result(out)
    assert result["replicas"] == 2
    _assert_same_release(result, _reference(mechanism))
    assert result["releases"] == ["functional_head"]
    assert result["epsilon_spent"] == 1.0


def _cluster(tmp_path, kill_at=None):
    ports = [_free_port(), _free_port()]
    procs, outs = [], []
    for index in range(2):
        tf_config = {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]}, "task": {"type": "worker", "index": index}}
        out = tmp_path / f"worker{index}.json"
        args = [sys.executable, WORKER, "multiworker", str(out)] + ([str(kill_at)] if kill_at and index == 1 else [])
        procs.append(subprocess.Popen(args, env=dict(os.environ, TF_CONFIG=json.dumps(tf_config), MECH="gaussian"),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs.append(out)
    _run(procs)
    return procs, outs


def test_two_workers_release_once_on_the_chief_what_one_process_releases(tmp_path):
    procs, outs = _cluster(tmp_path)
    assert [p.returncode for p in procs] == [0, 0]
    chief, worker = _result(outs[0]), _result(outs[1])
    reference = _reference("gaussian")
    assert chief["replicas"] == worker["replicas"] == 2
    _assert_same_release(chief, reference)
    _assert_same_release(worker, reference)  # received from the chief: the same noisy statistics, no new draw
    # exactly one release in the whole cluster: the chief's
    assert chief["releases"] == ["functional_head"] and worker["releases"] == []
    assert chief["epsilon_spent"] + worker["epsilon_spent"] == 1.0


def test_a_worker_killed_mid_pass_leaves_no_release_and_no_charge(tmp_path):
    procs, outs = _cluster(tmp_path, kill_at=1000)
    assert procs[1].returncode == 3 and not outs[1].exists()  # died abruptly in its input pipeline
    chief = _result(outs[0])
    assert "error" in chief  # the chief's collective failed (bounded by the strategy's timeout)
    assert chief["releases"] == [] and chief["epsilon_spent"] == 0.0
    assert "s1_bar" not in chief
