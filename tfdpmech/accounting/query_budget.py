"""A per-query privacy budget: charged before any answer is computed, persisted atomically.

Mechanisms that spend budget at prediction time (Lu et al.'s output perturbation, §4.1: every query
costs budget, queries compose by Theorem 1) need a server-side accountant:
every answered query costs ``ε_query`` and the total must never exceed the budget, across threads
and across process restarts.

Composition:

* ``"basic"``: sequential composition, ``Q`` queries cost ``Q·ε_query`` (the paper's choice, for
  both noise types).
* ``"gdp"``: Gaussian differential privacy (Dong, Roth, Su 2022), ``Q`` queries of ``μ_query`` cost
  ``μ = √Q·μ_query``; reported together with its (ε, δ) equivalent through
  ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2)``.

The spent amount is kept as an integer count of answered queries, so float rounding can neither
grant an extra query nor refuse a paid one. With ``state_path`` every charge is written to disk
(temporary file, fsync, atomic rename) before :meth:`QueryBudgetAccountant.charge` returns; a
restart reloads the spent count, and a state file that cannot be read is an error, never a reset.
Thread-safe within one process; do not share one state file between processes.
"""

from __future__ import annotations

import json
import math
import os
import threading

from scipy import optimize, stats

from ..validation import check_choice, check_delta, check_epsilon, check_positive_int
from .atomic_file import write_json_atomically

__all__ = [
    "QueryBudgetAccountant",
    "UnlimitedAccountant",
    "BudgetExhaustedError",
    "BudgetStateError",
    "COMPOSITIONS",
    "gdp_delta",
    "gdp_epsilon",
]

COMPOSITIONS = ("basic", "gdp")
_STATE_VERSION = 1
_SLACK = 1e-9  # relative slack when turning a budget ratio into a whole number of queries


class BudgetExhaustedError(RuntimeError):
    """Raised before answering when a query would exceed the privacy budget; nothing was released."""


class BudgetStateError(ValueError):
    """The persisted budget state is unreadable or belongs to a different budget; it is never reset."""


def gdp_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of μ-GDP: ``Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2)`` (Dong, Roth, Su, Cor. 2.13)."""
    mu = check_epsilon(mu, "mu")
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    a = stats.norm.logcdf(-epsilon / mu + mu / 2)
    b = epsilon + stats.norm.logcdf(-epsilon / mu - mu / 2)
    if b >= a:
        return 0.0
    return float(math.exp(a) * -math.expm1(b - a))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest ε with ``δ(ε) ≤ delta`` for μ-GDP (e.g. μ = 1, δ = 1e-5 → ε ≈ 4.38)."""
    mu = check_epsilon(mu, "mu")
    delta = check_delta(delta)
    if gdp_delta(mu, 0.0) <= delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while gdp_delta(mu, hi) > delta:
        hi *= 2.0
    return float(optimize.brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, hi, xtol=1e-12, rtol=1e-12))


class QueryBudgetAccountant:
    """Thread-safe per-query budget with atomic persistence.

    Args:
        total_epsilon: the whole budget: ε for ``"basic"``, μ for ``"gdp"``.
        max_queries: number of queries the budget covers; the per-query amount is
            ``total/max_queries`` (basic) or ``total/√max_queries`` (gdp).
        per_query_epsilon: the per-query amount instead (ε or μ); the number of queries is
            ``floor(total/per_query)`` (basic) or ``floor((total/per_query)²)`` (gdp).
            Exactly one of ``max_queries`` and ``per_query_epsilon`` is given.
        composition: ``"basic"`` or ``"gdp"``.
        delta_for_report: δ at which a GDP μ is also reported as ε (default 1e-5; Lu et al. §5.3 use
            δ = 1/(10n) for DP-SGD).
        state_path: a JSON file the spent count is written to on every charge and read from on
            construction (a restart continues where it stopped).

    Raises:
        ValueError / TypeError: bad budget values, both or neither of ``max_queries`` and
            ``per_query_epsilon``, a per-query amount larger than the total, unknown composition.
        BudgetStateError: ``state_path`` exists but is corrupt or describes another budget.

    Example:
        >>> acct = QueryBudgetAccountant(10.0, max_queries=1000)
        >>> acct.charge(5); acct.remaining_queries
        995
    """

    limited = True

    def __init__(self, total_epsilon: float, *, max_queries: int | None = None,
                 per_query_epsilon: float | None = None, composition: str = "basic",
                 delta_for_report: float | None = None, state_path=None):
        self.total = check_epsilon(total_epsilon, "total_epsilon")
        self.composition = check_choice(composition, "composition", COMPOSITIONS)
        if (max_queries is None) == (per_query_epsilon is None):
            raise ValueError("pass exactly one of max_queries and per_query_epsilon")
        if max_queries is not None:
            self.max_queries = check_positive_int(max_queries, "max_queries")
            root = self.max_queries if self.composition == "basic" else math.sqrt(self.max_queries)
            self.per_query = self.total / root
        else:
            self.per_query = check_epsilon(per_query_epsilon, "per_query_epsilon")
            ratio = self.total / self.per_query
            if self.composition == "gdp":
                ratio = ratio * ratio
            self.max_queries = int(math.floor(ratio * (1 + _SLACK)))
            if self.max_queries < 1:
                raise ValueError(
                    f"per_query_epsilon={self.per_query} exceeds total_epsilon={self.total}: not even one query fits"
                )
        self.delta_for_report = 1e-5 if delta_for_report is None else check_delta(delta_for_report, "delta_for_report")
        self.state_path = None if state_path is None else os.fspath(state_path)
        self._lock = threading.Lock()
        self._answered = 0
        if self.state_path is not None:
            if os.path.exists(self.state_path):
                self.load_state_dict(self._read_state(self.state_path))
            else:
                self._write_state(self.state_dict())

    # -- arithmetic ---------------------------------------------------------------------------
    def _cost(self, queries: int) -> float:
        if self.composition == "basic":
            return queries * self.per_query
        return math.sqrt(queries) * self.per_query

    @property
    def queries_answered(self) -> int:
        return self._answered

    @property
    def spent(self) -> float:
        """Budget spent so far: ε (basic) or μ (gdp)."""
        return self._cost(self._answered)

    @property
    def remaining(self) -> float:
        """Budget left: ε (basic) or μ (gdp, ``√(total² − spent²)``)."""
        if self.composition == "basic":
            return max(self.total - self.spent, 0.0)
        return math.sqrt(max(self.total**2 - self.spent**2, 0.0))

    @property
    def remaining_queries(self) -> int:
        return self.max_queries - self._answered

    def to_epsilon_delta(self, delta: float | None = None, *, mu: float | None = None) -> tuple[float, float]:
        """(ε, δ) equivalent of the spent μ (or of ``mu``) under GDP."""
        if self.composition != "gdp" and mu is None:
            raise ValueError("to_epsilon_delta applies to composition='gdp'; basic composition already gives ε")
        delta = self.delta_for_report if delta is None else check_delta(delta)
        mu = self.spent if mu is None else mu
        return (gdp_epsilon(mu, delta) if mu > 0 else 0.0), delta

    def report(self) -> dict:
        """Spent and remaining budget; for GDP the μ together with its (ε, δ) equivalent."""
        out = {
            "composition": self.composition, "total": self.total, "per_query": self.per_query,
            "max_queries": self.max_queries, "queries_answered": self._answered,
            "remaining_queries": self.remaining_queries, "spent": self.spent, "remaining": self.remaining,
        }
        if self.composition == "gdp":
            out["spent_mu"] = self.spent
            out["spent_epsilon"], out["delta"] = self.to_epsilon_delta()
            out["total_epsilon_equivalent"] = self.to_epsilon_delta(mu=self.total)[0]
        return out

    # -- charging ----------------------------------------------------------------------------
    def charge(self, queries: int = 1) -> float:
        """Pay for ``queries`` answers *before* computing them.

        Returns:
            The per-query amount (ε or μ) the answers must be calibrated with.

        Raises:
            BudgetExhaustedError: the charge would exceed the budget (nothing is charged).
            OSError: the state could not be persisted (nothing is charged; do not answer).
        """
        queries = check_positive_int(queries, "queries")
        with self._lock:
            if self._answered + queries > self.max_queries:
                raise BudgetExhaustedError(
                    f"privacy budget exhausted: {self._answered} of {self.max_queries} queries answered "
                    f"({self.composition} composition, total {self.total:g}); {queries} more refused, nothing released"
                )
            self._answered += queries
            if self.state_path is not None:
                try:
                    self._write_state(self._state_dict_unlocked())
                except BaseException:
                    self._answered -= queries  # nothing was released
                    raise
            return self.per_query

    # -- persistence -------------------------------------------------------------------------
    def _state_dict_unlocked(self) -> dict:
        return {
            "version": _STATE_VERSION, "composition": self.composition, "total": self.total,
            "per_query": self.per_query, "max_queries": self.max_queries, "queries_answered": self._answered,
            "spent": self.spent,
        }

    def state_dict(self) -> dict:
        with self._lock:
            return self._state_dict_unlocked()

    def load_state_dict(self, state: dict) -> None:
        """Restore the spent count from :meth:`state_dict`; the budget must be the same.

        Raises:
            BudgetStateError: a malformed state or one of a different budget.
        """
        try:
            if int(state["version"]) != _STATE_VERSION:
                raise BudgetStateError(f"unsupported budget state version {state['version']}")
            answered = state["queries_answered"]
            same = (state["composition"] == self.composition and math.isclose(state["total"], self.total)
                    and math.isclose(state["per_query"], self.per_query)
                    and int(state["max_queries"]) == self.max_queries)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, BudgetStateError):
                raise
            raise BudgetStateError(f"budget state is malformed ({exc!r}); refusing to reset the budget") from exc
        if not same:
            raise BudgetStateError(
                f"the stored budget state ({state['composition']}, total {state['total']}, per query "
                f"{state['per_query']}) is for a different budget than this accountant ({self.composition}, total "
                f"{self.total}, per query {self.per_query}); use the same settings or a new state file"
            )
        if isinstance(answered, bool) or not isinstance(answered, int) or not 0 <= answered:
            raise BudgetStateError(f"budget state holds an invalid queries_answered={answered!r}")
        with self._lock:
            if answered < self._answered:
                raise BudgetStateError(
                    f"the stored state has {answered} queries answered, fewer than the {self._answered} already "
                    "spent here; spent budget is never given back"
                )
            self._answered = answered

    @staticmethod
    def _read_state(path) -> dict:
        try:
            with open(path) as fh:
                return json.load(fh)
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BudgetStateError(
                f"budget state file {path!s} cannot be read ({exc}); the budget is NOT reset. Restore the file from a "
                "backup, or start a new budget with a new state_path only if no answers were released under the old one"
            ) from exc

    def _write_state(self, state: dict) -> None:
        write_json_atomically(self.state_path, state)  # readers see the old or the new state, never half


class UnlimitedAccountant:
    """Counts queries without a limit, for evaluation harnesses only (Lu et al. §5.3 evaluate single queries).

    Evaluation queries (2n membership-inference queries plus the accuracy queries) must not be
    charged to a production budget; nothing this accountant lets through is covered by a budget.
    """

    limited = False
    composition = "basic"

    def __init__(self, per_query_epsilon: float):
        self.per_query = check_epsilon(per_query_epsilon, "per_query_epsilon")
        self._lock = threading.Lock()
        self._answered = 0

    @property
    def queries_answered(self) -> int:
        return self._answered

    @property
    def remaining_queries(self) -> float:
        return math.inf

    def charge(self, queries: int = 1) -> float:
        queries = check_positive_int(queries, "queries")
        with self._lock:
            self._answered += queries
        return self.per_query

    def __repr__(self) -> str:
        return f"UnlimitedAccountant(per_query={self.per_query:g}, answered={self._answered})"
