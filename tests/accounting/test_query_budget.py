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
    assert acct.per_query == pytest.approx(0.01)  # ε_query = ε_total/Q (spec §3.12, A11)
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
    assert gdp_epsilon(1.0, 1e-5) == pytest.approx(4.38, abs=0.01)  # spec §6.1(d)
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
    assert [p.name for p in tmp_path.iterdir()] == ["budget.json"]  # no half-written leftovers
    # a stray temporary file from a real crash does not confuse a restart
    (tmp_path / ".budget-abc.json").write_text("{\"queries_ans")
    assert QueryBudgetAccountant(10.0, max_queries=100, state_path=path).queries_answered == 4


def test_unlimited_accountant_counts_only():
    acct = UnlimitedAccountant(0.5)
    assert acct.charge(10_000) == 0.5 and acct.queries_answered == 10_000 and acct.remaining_queries == math.inf
