"""A per-query privacy budget: charged before any answer is computed, persisted atomically, shared safely.

Mechanisms that spend budget at prediction time (output perturbation: Lu et al., "A
Differentially Private Framework for Deep Learning with Convexified Loss Functions", Algorithm 1
and Sec. 5.4.5 on answering many queries) need a server-side accountant: every answered query costs
``ε_query`` and the total must never exceed the budget, across threads, processes and restarts.

Composition, by the engine the ledger composes with (one code path):

* ``"basic"``: sequential composition, ``Q`` queries cost ``Q·ε_query`` (the paper's choice, for
  both noise types): one pure-ε release repeated ``Q`` times, totalled by
  :meth:`PrivacyLedger.provable <tfdpmech.accounting.ledger.PrivacyLedger.provable>`.
* ``"gdp"``: Gaussian differential privacy (Dong, Roth, Su 2022; Lu et al. Theorem 3): a query of
  ``μ_query`` is the ``dp_accounting.GaussianDpEvent`` of noise multiplier ``1/μ_query``, ``Q``
  queries its ``Q``-fold self-composition, of ``μ = √Q·μ_query``
  (:func:`tfdpmech.accounting.events.gaussian_mu`); reported together with its (ε, δ) equivalent,
  the exact Gaussian privacy curve of ``dp_accounting``
  (:func:`tfdpmech.accounting.events.compose_events` with ``accountant="gaussian"``).

The spent amount is kept as an integer count of answered queries, so float rounding can neither
grant an extra query nor refuse a paid one.

With ``state_path`` the budget lives in a JSON file that any number of threads and **processes**
may share (a web service with several workers, a notebook and a script):
:meth:`QueryBudgetAccountant.charge` takes an OS file lock (``<state_path>.lock``, the
``filelock`` library), re-reads the spent count under the lock, checks the budget, and writes the
new count (temporary file, fsync, atomic rename) before it returns. So the queries answered by all
processes together never exceed the budget, a restart continues where it stopped, and a kill at
any moment leaves the old or the new count, never a half-written file; a temporary file orphaned
by a kill is removed at the next lock. A state file that cannot be read, or that describes another
budget, is an error, never a reset.
"""

from __future__ import annotations

import math
import os
import threading

from ..validation import check_choice, check_delta, check_epsilon, check_positive_int
from .atomic_file import LOCK_TIMEOUT, locked_state, read_json_strictly, state_lock, write_json_atomically
from .events import compose_events, gaussian_mu, self_composed
from .gaussian import gdp_delta, gdp_epsilon, require_dp_accounting
from .ledger import PrivacyLedger, Release

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


def _check_state_path(state_path) -> str:
    """``state_path`` as a string; ValueError for a directory, or a file in a directory that does not exist."""
    try:
        path = os.fspath(state_path)
    except TypeError:
        raise TypeError(f"state_path must be a path (str or os.PathLike), got {state_path!r}") from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if os.path.isdir(path):
        raise ValueError(f"state_path={path!r} is a directory; pass the path of the budget's JSON state file "
                         f"inside it (e.g. {os.path.join(path, 'budget.json')!r})")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ValueError(f"state_path={path!r}: the directory {directory!r} does not exist, so no budget is stored "
                         "there; fix the path, or create the directory first (os.makedirs) if this is a new budget")
    return path


class BudgetExhaustedError(RuntimeError):
    """Raised before answering when a query would exceed the privacy budget; nothing was released."""


class BudgetStateError(ValueError):
    """The persisted budget state is unreadable or belongs to a different budget; it is never reset."""


class QueryBudgetAccountant:
    """Per-query budget, safe across threads and processes, with atomic persistence.

    Args:
        total_epsilon: the whole budget: ε for ``"basic"``, μ for ``"gdp"``.
        max_queries: number of queries the budget covers; the per-query amount is
            ``total/max_queries`` (basic) or ``total/√max_queries`` (gdp).
        per_query_epsilon: the per-query amount instead (ε or μ); the number of queries is
            ``floor(total/per_query)`` (basic) or ``floor((total/per_query)²)`` (gdp).
            Exactly one of ``max_queries`` and ``per_query_epsilon`` is given.
        composition: ``"basic"`` or ``"gdp"``.
        delta_for_report: δ at which a GDP μ is also reported as ε (default 1e-5; choose below 1/n).
        state_path: a JSON file holding the spent count, shared by every accountant (in any
            process) opened on it with the same budget; created if missing, in a directory that
            must exist (a mistyped directory would otherwise start a fresh budget).
        lock_timeout: seconds to wait for another process's lock before raising TimeoutError.

    Raises:
        ValueError / TypeError: bad budget values, both or neither of ``max_queries`` and
            ``per_query_epsilon``, a per-query amount larger than the total, unknown composition.
        BudgetStateError: ``state_path`` exists but is corrupt or describes another budget.
        ValueError: ``state_path`` is a directory, or its directory does not exist.

    Example:
        >>> acct = QueryBudgetAccountant(10.0, max_queries=1000)
        >>> acct.charge(5); acct.remaining_queries
        995
    """

    limited = True

    def __init__(self, total_epsilon: float, *, max_queries: int | None = None,
                 per_query_epsilon: float | None = None, composition: str = "basic",
                 delta_for_report: float | None = None, state_path=None, lock_timeout: float = LOCK_TIMEOUT):
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
            if not math.isfinite(ratio):
                raise ValueError(
                    f"per_query_epsilon={self.per_query!r} is so small that total_epsilon/per_query_epsilon overflows; "
                    "pass max_queries instead"
                )
            self.max_queries = int(math.floor(ratio * (1 + _SLACK)))
            if self.max_queries < 1:
                raise ValueError(
                    f"per_query_epsilon={self.per_query} exceeds total_epsilon={self.total}: not even one query fits"
                )
        self.delta_for_report = 1e-5 if delta_for_report is None else check_delta(delta_for_report, "delta_for_report")
        self._query = self._query_release() if self.composition == "basic" else self._query_event(self.per_query)
        self.state_path = None if state_path is None else _check_state_path(state_path)
        self.lock_timeout = float(lock_timeout)
        self._lock = threading.RLock()
        self._answered = 0
        if self.state_path is not None:
            self._file_lock = state_lock(self.state_path, timeout=self.lock_timeout)
            with self._locked_file():  # also removes orphaned temporaries
                if os.path.exists(self.state_path):
                    self._load_state_unlocked(self._read_state(self.state_path))
                else:
                    self._write_state(self._state_dict_unlocked())

    # -- composition (the ledger's engine) -----------------------------------------------------
    def _query_release(self) -> Release:
        return Release("query", "query_budget", self.per_query, self.per_query,
                       "per-query budget (basic composition of pure-ε answers)", per_epoch=True)

    @staticmethod
    def _query_event(mu: float):
        # μ-GDP is exactly the privacy curve of one Gaussian mechanism of noise multiplier 1/μ
        return require_dp_accounting("the GDP query budget").GaussianDpEvent(1.0 / mu)

    def _cost(self, queries: int) -> float:
        if self.composition == "basic":  # the query's release counted `queries` times
            return PrivacyLedger([self._query]).provable(epochs=queries).epsilon
        return gaussian_mu([self_composed(self._query, queries)])

    @property
    def queries_answered(self) -> int:
        """Queries answered, as of this accountant's last charge or :meth:`refresh` (all processes)."""
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
        """(ε, δ) equivalent of the spent μ (or of ``mu``) under GDP, by ``dp_accounting``."""
        if self.composition != "gdp" and mu is None:
            raise ValueError("to_epsilon_delta applies to composition='gdp'; basic composition already gives ε")
        delta = self.delta_for_report if delta is None else check_delta(delta)
        mu = self.spent if mu is None else mu
        if mu <= 0:
            return 0.0, delta
        return compose_events([self._query_event(mu)], delta, "gaussian")[0], delta

    def report(self) -> dict:
        """Spent and remaining budget (re-read from the state file); for GDP the μ with its (ε, δ) equivalent."""
        self.refresh()
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

        With a state file: lock it, re-read the count every process has spent, check, write the
        new count atomically, unlock; only then return.

        Returns:
            The per-query amount (ε or μ) the answers must be calibrated with.

        Raises:
            BudgetExhaustedError: the charge would exceed the budget (nothing is charged).
            BudgetStateError: the state file became unreadable, or was deleted or rolled back.
            OSError / TimeoutError: the state could not be locked or persisted (nothing is charged;
                do not answer).
        """
        queries = check_positive_int(queries, "queries")
        with self._lock:
            # the count only grows, so a charge that does not fit the count known here never fits the file's
            self._check_room(queries)
            if self.state_path is None:
                self._answered += queries
                return self.per_query
            with self._locked_file():
                self._reload_unlocked()
                self._check_room(queries)
                state = self._state_dict_unlocked()
                state["queries_answered"] = self._answered + queries
                state["spent"] = self._cost(self._answered + queries)
                self._write_state(state)  # raises before anything is counted or answered
                self._answered += queries
            return self.per_query

    def _locked_file(self):
        return locked_state(self.state_path, timeout=self.lock_timeout, lock=self._file_lock)

    def _check_room(self, queries: int) -> None:
        if self._answered + queries > self.max_queries:
            raise BudgetExhaustedError(
                f"privacy budget exhausted: {self._answered} of {self.max_queries} queries answered "
                f"({self.composition} composition, total {self.total:g}); {queries} more refused, nothing released"
            )

    def refresh(self) -> None:
        """Re-read the spent count from the state file (charges made by other processes); no-op in memory."""
        if self.state_path is not None:
            with self._lock, self._locked_file():
                self._reload_unlocked()

    def _reload_unlocked(self) -> None:
        if not os.path.exists(self.state_path):
            raise BudgetStateError(
                f"budget state file {self.state_path} has disappeared after {self._answered} queries were answered; "
                "the budget is NOT reset. Restore the file from a backup"
            )
        self._load_state_unlocked(self._read_state(self.state_path))

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
        with self._lock:
            self._load_state_unlocked(state)

    def _load_state_unlocked(self, state) -> None:
        if not isinstance(state, dict):
            raise BudgetStateError(f"budget state must be a JSON object, got {type(state).__name__}; refusing to reset")
        try:
            version = state["version"]
            if isinstance(version, bool) or version != _STATE_VERSION:
                raise BudgetStateError(f"unsupported budget state version {version!r}")
            answered = state["queries_answered"]
            numbers_ = [state["total"], state["per_query"]]
            if any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in numbers_):
                raise BudgetStateError(f"budget state holds non-numbers for total / per_query: {numbers_!r}")
            stored_max = state["max_queries"]
            if isinstance(stored_max, bool) or not isinstance(stored_max, int):
                raise BudgetStateError(f"budget state holds an invalid max_queries={stored_max!r}")
            same = (state["composition"] == self.composition and math.isclose(float(state["total"]), self.total)
                    and math.isclose(float(state["per_query"]), self.per_query) and stored_max == self.max_queries)
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            if isinstance(exc, BudgetStateError):
                raise
            raise BudgetStateError(f"budget state is malformed ({exc!r}); refusing to reset the budget") from exc
        if not same:
            raise BudgetStateError(
                f"the stored budget state ({state['composition']}, total {state['total']}, per query "
                f"{state['per_query']}, {state['max_queries']} queries) is for a different budget than this accountant "
                f"({self.composition}, total {self.total}, per query {self.per_query}, {self.max_queries} queries); use "
                "the same settings or a new state file"
            )
        if isinstance(answered, bool) or not isinstance(answered, int) or not 0 <= answered <= self.max_queries:
            raise BudgetStateError(
                f"budget state holds an invalid queries_answered={answered!r} (must be an integer in [0, "
                f"{self.max_queries}])"
            )
        if answered < self._answered:
            raise BudgetStateError(
                f"the stored state has {answered} queries answered, fewer than the {self._answered} already "
                "spent here; spent budget is never given back"
            )
        self._answered = answered

    @staticmethod
    def _read_state(path) -> dict:
        try:
            return read_json_strictly(path, "budget state")
        except (OSError, ValueError) as exc:
            raise BudgetStateError(
                f"budget state file {path!s} cannot be read ({exc}); the budget is NOT reset. Restore the file from a "
                "backup, or start a new budget with a new state_path only if no answers were released under the old one"
            ) from exc

    def _write_state(self, state: dict) -> None:
        write_json_atomically(self.state_path, state)  # readers see the old or the new state, never half

    def __repr__(self) -> str:
        where = f", state_path={self.state_path!r}" if self.state_path else ""
        return (f"QueryBudgetAccountant({self.composition}, total={self.total:g}, {self._answered}/{self.max_queries} "
                f"queries answered{where})")


class UnlimitedAccountant:
    """Counts queries without a limit, for evaluation harnesses only (not a budget).

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
