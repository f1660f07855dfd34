"""Separate processes sharing one budget / ledger file, and kill -9 at random moments.

The workers are real OS processes (``subprocess`` running ``_state_worker.py``), so these tests
exercise the file lock across processes, not a thread lock. Each worker starts in well under a
second (it does not import TensorFlow).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from tfdpmech.accounting.atomic_file import read_json_strictly
from tfdpmech.accounting.ledger import PrivacyLedger
from tfdpmech.accounting.query_budget import QueryBudgetAccountant

# real OS processes, some killed at random moments: minutes on a loaded 2-core machine (make test-slow; CI runs it)
pytestmark = pytest.mark.slow

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_state_worker.py")


def _start(mode, path, go, count=0, **kwargs):
    kwargs.setdefault("text", True)
    return subprocess.Popen([sys.executable, WORKER, mode, str(path), str(go), str(count)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def _finish(proc, timeout=120):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return out


def _wait_until_ready(go, workers, timeout=120.0):
    """Wait until every worker has finished importing, so that GO starts them all at once."""
    deadline = time.monotonic() + timeout
    while len([n for n in os.listdir(go.parent) if n.startswith(go.name + ".ready.")]) < workers:
        assert time.monotonic() < deadline, f"{workers} workers did not start within {timeout} s"
        time.sleep(0.01)


def _temporaries(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith(".tmp"))


@pytest.mark.parametrize("workers", [2, 4])
@pytest.mark.parametrize("stagger", [False, True], ids=["together", "staggered"])
def test_processes_sharing_a_budget_answer_exactly_the_budget(tmp_path, workers, stagger):
    budget = 200
    path, go = tmp_path / "budget.json", tmp_path / "go"
    procs = []
    for i in range(workers):
        procs.append(_start("budget", path, go, budget))
        if stagger and i == 0:
            go.touch()  # the first one is already charging when the others open the file
            time.sleep(0.05)
    if not stagger:
        _wait_until_ready(go, workers)  # on a loaded machine a late starter would find the budget spent
    go.touch()
    answered = [int(_finish(p).split()[-1]) for p in procs]
    assert sum(answered) == budget, answered
    assert json.loads(path.read_text())["queries_answered"] == budget
    assert QueryBudgetAccountant(1.0, max_queries=budget, state_path=path).remaining_queries == 0
    if not stagger:
        assert sum(a > 0 for a in answered) >= 2, answered  # they really ran concurrently
    assert _temporaries(tmp_path) == []


@pytest.mark.parametrize("workers", [2, 4])
def test_processes_sharing_a_ledger_lose_no_release(tmp_path, workers):
    per_worker = 25
    path, go = tmp_path / "ledger.json", tmp_path / "go"
    procs = [_start("ledger", path, go, per_worker) for _ in range(workers)]
    go.touch()
    for p in procs:
        assert int(_finish(p).split()[-1]) == per_worker
    ledger = PrivacyLedger.load(path)
    assert len(ledger) == workers * per_worker
    assert len({r.component for r in ledger.releases}) == workers * per_worker  # every release exactly once
    assert ledger.epsilon_provable() == pytest.approx(0.01 * workers * per_worker)
    assert _temporaries(tmp_path) == []


def _kill_loop(tmp_path, mode, kills, read_count, reopen):
    """Start a worker, let it acknowledge a few writes, kill -9 it at a random moment; repeat."""
    rng = random.Random(1234)
    path, go = tmp_path / f"{mode}.json", tmp_path / "go"
    go.touch()
    acknowledged = 0
    most_temporaries = 0
    for _ in range(kills):
        # unbuffered bytes: readline() must not pull later lines into a buffer that communicate() skips
        proc = _start(mode, path, go, 10**9, text=False, bufsize=0)
        first = proc.stdout.readline().decode()  # blocks until the first acknowledged write
        assert first.startswith("ack "), proc.stderr.read()
        time.sleep(rng.uniform(0.0, 0.03))
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        acks = [int(line.split()[1]) for line in (first + out.decode()).splitlines() if line.startswith("ack ")]
        stored = read_count(read_json_strictly(path, mode))  # the state file always parses
        assert acks[-1] <= stored <= acks[-1] + 1, (acks[-1], stored)  # no acknowledged write lost
        assert stored >= acknowledged
        acknowledged = acks[-1]
        most_temporaries = max(most_temporaries, len(_temporaries(tmp_path)))
    reopen(path)  # the next open removes what the last kill left
    assert _temporaries(tmp_path) == []
    assert most_temporaries <= 1  # orphans never accumulate: each open cleans the previous one
    return acknowledged


def test_kill_9_during_budget_charges_loses_nothing(tmp_path):
    acknowledged = _kill_loop(
        tmp_path, "budget-acks", 20, lambda state: state["queries_answered"],
        lambda path: QueryBudgetAccountant(1.0, max_queries=10**9, state_path=path))
    assert acknowledged > 20


def test_kill_9_during_ledger_appends_loses_nothing(tmp_path):
    acknowledged = _kill_loop(
        tmp_path, "ledger-acks", 10, lambda data: len(data["releases"]), PrivacyLedger.open)
    assert acknowledged > 10
    assert len(PrivacyLedger.load(tmp_path / "ledger-acks.json")) >= acknowledged
