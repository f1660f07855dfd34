"""Tests for QueryBudgetAccountant: composition arithmetic, refusal, persistence.

The accountant charges before any answer is computed, refuses with BudgetExhaustedError and
persists its state atomically: a restart continues, a corrupt file is an error (never a reset),
and a crash mid-write loses nothing.
"""

from __future__ import annotations

import json
import math
import os

import pytest

from tfdpmech.accounting.query_budget import (
    BudgetExhaustedError,
    BudgetStateError,
    QueryBudgetAccountant,
    UnlimitedAccountant,
    gdp_delta,
    gdp_epsilon,
)


# ------------------------------------------------------------------------------------- arithmetic
def test_basic_composition_arithmetic():
    acct = QueryBudgetAccountant(10.0, max_queries=1000)
    # ε_query = ε_total/Q (Lu et al. §5.4.5: ε = 10 over 1,000 queries gives 10⁻²; its '100 queries' is a slip)
    assert acct.per_query == pytest.approx(0.01)
    assert acct.charge(5) == pytest.approx(0.01)
    assert acct.spent == pytest.approx(0.05) and acct.remaining == pytest.approx(9.95)
    assert acct.remaining_queries == 995
    acct2 = QueryBudgetAccountant(1.0, per_query_epsilon=0.1)
    assert acct2.max_queries == 10  # 1/0.1 in floating point must not lose a query
    acct3 = QueryBudgetAccountant(0.3, per_query_epsilon=0.1)
    assert acct3.max_queries == 3


def test_gdp_composition_arithmetic_and_report():
    acct = QueryBudgetAccountant(1.0, max_queries=100, composition="gdp")
    assert acct.per_query == pytest.approx(0.1)  # μ_query = μ_total/√Q
    acct.charge(25)
    assert acct.spent == pytest.approx(0.5) and acct.remaining == pytest.approx(math.sqrt(0.75))
    rep = acct.report()
    assert rep["spent_mu"] == pytest.approx(0.5)
    assert rep["spent_epsilon"] == pytest.approx(gdp_epsilon(0.5, 1e-5)) and rep["delta"] == 1e-5
    assert rep["total_epsilon_equivalent"] == pytest.approx(4.38, abs=0.01)
    assert QueryBudgetAccountant(1.0, per_query_epsilon=0.1, composition="gdp").max_queries == 100
    with pytest.raises(ValueError, match="gdp"):
        QueryBudgetAccountant(1.0, max_queries=2).to_epsilon_delta()


def test_gdp_to_epsilon_delta_check_values():
    # μ-GDP → (ε, δ) by Dong, Roth & Su (Lu et al. Theorem 2, whose printed δ(ε) is garbled)
    assert gdp_epsilon(1.0, 1e-5) == pytest.approx(4.38, abs=0.01)
    assert gdp_epsilon(0.1, 1e-5) == pytest.approx(0.34, abs=0.01)
    assert gdp_epsilon(10.0, 1e-5) == pytest.approx(91.8, abs=0.1)
    for mu in (0.1, 1.0, 10.0):
        assert gdp_delta(mu, gdp_epsilon(mu, 1e-5)) == pytest.approx(1e-5, rel=1e-6)
    acct = QueryBudgetAccountant(1.0, max_queries=1, composition="gdp", delta_for_report=1e-5)
    acct.charge()
    assert acct.to_epsilon_delta() == (pytest.approx(4.38, abs=0.01), 1e-5)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(total_epsilon=0.0, max_queries=10), ValueError, "total_epsilon"),
    (dict(total_epsilon=-1.0, max_queries=10), ValueError, "total_epsilon"),
    (dict(total_epsilon=1.0), ValueError, "exactly one"),
    (dict(total_epsilon=1.0, max_queries=10, per_query_epsilon=0.1), ValueError, "exactly one"),
    (dict(total_epsilon=1.0, max_queries=0), ValueError, "max_queries"),
    (dict(total_epsilon=1.0, per_query_epsilon=2.0), ValueError, "exceeds"),
    (dict(total_epsilon=1.0, max_queries=10, composition="rdp"), ValueError, "composition"),
    (dict(total_epsilon=1.0, max_queries=10, delta_for_report=2.0), ValueError, "delta"),
])
def test_bad_budget_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        QueryBudgetAccountant(**kwargs)


def test_exhausted_budget_raises_and_charges_nothing():
    acct = QueryBudgetAccountant(1.0, max_queries=3)
    acct.charge(2)
    with pytest.raises(BudgetExhaustedError, match="nothing released"):
        acct.charge(2)
    assert acct.queries_answered == 2
    acct.charge(1)
    with pytest.raises(BudgetExhaustedError):
        acct.charge()
    with pytest.raises(ValueError, match="queries"):
        acct.charge(0)


# ------------------------------------------------------------------------------------ persistence
def test_state_round_trip_and_restart(tmp_path):
    path = tmp_path / "budget.json"
    acct = QueryBudgetAccountant(10.0, max_queries=100, state_path=path)
    acct.charge(7)
    assert json.loads(path.read_text())["queries_answered"] == 7
    restarted = QueryBudgetAccountant(10.0, max_queries=100, state_path=path)
    assert restarted.queries_answered == 7 and restarted.remaining_queries == 93
    other = QueryBudgetAccountant(10.0, max_queries=100)
    other.load_state_dict(acct.state_dict())
    assert other.spent == pytest.approx(acct.spent)
    with pytest.raises(BudgetStateError, match="different budget"):
        QueryBudgetAccountant(20.0, max_queries=100, state_path=path)
    with pytest.raises(BudgetStateError, match="never given back"):
        acct.load_state_dict({**acct.state_dict(), "queries_answered": 1})


@pytest.mark.parametrize("content", ["", "{\"version\": 1, \"queries_an", "[1, 2]", "{\"version\": 1}", "\x00\x01"])
def test_corrupt_state_file_is_an_error_not_a_reset(tmp_path, content):
    path = tmp_path / "budget.json"
    path.write_text(content)
    with pytest.raises(BudgetStateError, match="budget|state"):
        QueryBudgetAccountant(10.0, max_queries=100, state_path=path)
    assert path.read_text() == content  # left as it was for the operator to restore


def test_crash_mid_write_loses_nothing(tmp_path, monkeypatch):
    path = tmp_path / "budget.json"
    acct = QueryBudgetAccountant(10.0, max_queries=100, state_path=path)
    acct.charge(4)

    def crash(src, dst):
        raise OSError("disk full (simulated crash before the rename)")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated"):
        acct.charge(3)
    monkeypatch.undo()
    assert acct.queries_answered == 4  # the refused charge released nothing
    assert json.loads(path.read_text())["queries_answered"] == 4  # the old state is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["budget.json", "budget.json.lock"]  # no leftovers
    # a temporary file orphaned by a real crash (kill -9 before the rename) neither confuses a restart
    # nor stays: the next open removes it under the lock
    (tmp_path / ".budget.json.abc123.tmp").write_text("{\"queries_ans")
    assert QueryBudgetAccountant(10.0, max_queries=100, state_path=path).queries_answered == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["budget.json", "budget.json.lock"]


def test_unlimited_accountant_counts_only():
    acct = UnlimitedAccountant(0.5)
    assert acct.charge(10_000) == 0.5 and acct.queries_answered == 10_000 and acct.remaining_queries == math.inf


# ------------------------------------------------------------------------- hostile state files
@pytest.mark.parametrize("change, match", [
    ({"queries_answered": True}, "invalid queries_answered"),
    ({"queries_answered": "7"}, "invalid queries_answered"),
    ({"queries_answered": -1}, "invalid queries_answered"),
    ({"queries_answered": 101}, "invalid queries_answered"),          # more than the budget: not a state we wrote
    ({"queries_answered": 10 ** 400}, "invalid queries_answered"),
    ({"total": "10"}, "non-numbers"),
    ({"total": True}, "non-numbers"),
    ({"max_queries": 100.0}, "invalid max_queries"),
    ({"version": True}, "version"),
])
def test_hostile_state_values_are_refused(tmp_path, change, match):
    path = tmp_path / "budget.json"
    QueryBudgetAccountant(10.0, max_queries=100, state_path=path).charge(3)
    state = json.loads(path.read_text())
    state.update(change)
    path.write_text(json.dumps(state))
    with pytest.raises(BudgetStateError, match=match):
        QueryBudgetAccountant(10.0, max_queries=100, state_path=path)


def test_non_utf8_and_non_finite_state_files_are_refused(tmp_path):
    path = tmp_path / "budget.json"
    path.write_bytes(b'{"version": 1, "x": "\xff"}')
    with pytest.raises(BudgetStateError, match=r"budget.json .*not UTF-8"):
        QueryBudgetAccountant(10.0, max_queries=100, state_path=path)
    path.write_text('{"version": 1, "composition": "basic", "total": NaN, "per_query": 0.1, "max_queries": 100, '
                    '"queries_answered": 0, "spent": 0}')
    with pytest.raises(BudgetStateError, match="non-finite number NaN"):
        QueryBudgetAccountant(10.0, max_queries=100, state_path=path)


def test_a_deleted_state_file_is_not_a_reset(tmp_path):
    path = tmp_path / "budget.json"
    acct = QueryBudgetAccountant(10.0, max_queries=100, state_path=path)
    acct.charge(5)
    os.unlink(path)
    with pytest.raises(BudgetStateError, match="has disappeared after 5 queries"):
        acct.charge()
    assert not path.exists()


def test_two_accountants_on_one_file_share_the_budget(tmp_path):
    path = tmp_path / "budget.json"
    a = QueryBudgetAccountant(1.0, max_queries=5, state_path=path)
    b = QueryBudgetAccountant(1.0, max_queries=5, state_path=path)
    a.charge(3)
    b.charge(2)  # re-reads a's 3 under the lock
    with pytest.raises(BudgetExhaustedError, match="5 of 5"):
        a.charge()
    assert a.queries_answered == 5 and b.queries_answered == 5
    assert b.report()["remaining_queries"] == 0


def test_threads_never_overspend(tmp_path):
    import threading

    path = tmp_path / "budget.json"
    acct = QueryBudgetAccountant(1.0, max_queries=120, state_path=path)
    answered = []

    def worker():
        while True:
            try:
                acct.charge()
            except BudgetExhaustedError:
                return
            answered.append(1)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(answered) == 120 and json.loads(path.read_text())["queries_answered"] == 120


def test_tiny_per_query_epsilon_is_a_value_error_not_an_overflow():
    with pytest.raises(ValueError, match="per_query_epsilon"):
        QueryBudgetAccountant(1.0, per_query_epsilon=5e-324)


def test_lock_timeout_is_a_named_error(tmp_path):
    import filelock

    path = tmp_path / "budget.json"
    acct = QueryBudgetAccountant(1.0, max_queries=5, state_path=path, lock_timeout=0.2)
    held = filelock.FileLock(str(path) + ".lock")
    with held:
        # flock is per open file description: another descriptor in this process contends like another process
        with pytest.raises(TimeoutError, match=r"could not lock .*budget.json within 0.2 s"):
            acct.charge()
    assert acct.charge() == pytest.approx(0.2) and acct.queries_answered == 1


def test_composition_goes_through_the_ledgers_engine():
    import dp_accounting

    from tfdpmech.accounting import PrivacyLedger, Release
    from tfdpmech.accounting.events import compose_events, gaussian_mu

    basic = QueryBudgetAccountant(10.0, max_queries=1000)
    basic.charge(7)
    per_query = Release("query", "query_budget", basic.per_query, basic.per_query, "per query", per_epoch=True)
    assert basic.spent == PrivacyLedger([per_query]).provable(epochs=7).epsilon == 7 * basic.per_query
    gdp = QueryBudgetAccountant(1.0, max_queries=100, composition="gdp")
    gdp.charge(25)
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(1.0 / gdp.per_query), 25)
    assert gdp.spent == gaussian_mu([event]) == pytest.approx(0.5, rel=1e-12)
    assert gdp.to_epsilon_delta()[0] == compose_events([event], 1e-5, "gaussian")[0]
    assert gdp.to_epsilon_delta()[0] == pytest.approx(gdp_epsilon(0.5, 1e-5), rel=1e-9)
