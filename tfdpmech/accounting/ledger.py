"""The privacy ledger: every release, with claimed and provable ε side by side, composed properly.

Several of the papers behind this package claim more than their proofs give. A :class:`Release`
therefore carries two numbers: ``epsilon_claimed`` (what the paper states for this step) and
``epsilon_provable`` (what a correct argument, named in ``basis``, actually gives; ``None`` when
no proof holds). A release may also carry the ``dp_accounting`` event of its provable guarantee
(``event=dp_accounting.GaussianDpEvent(σ)``, ``PoissonSampledDpEvent``, ``SelfComposedDpEvent``, ...).

Totals:

* **claimed**: the sum of the claimed ε, as the papers state them (basic composition).
* **provable** (:meth:`PrivacyLedger.provable`): a :class:`Guarantee` ``(ε, δ, basis)``, or
  :data:`NoneProven` with the reason when any release has no proven guarantee. Pure-ε releases
  (``delta == 0``) add up (basic composition). (ε, δ) releases without an event add up in ε and
  in δ. (ε, δ) releases with events are composed by ``dp_accounting`` at the ledger's δ (the
  ``target_delta`` given to the ledger, else the sum of those releases' δ), keeping the smallest
  of: the sum of their own ε (valid when their δ's fit in the ledger's δ), the RDP accountant, the
  PLD accountant and, for Gaussian-only events, the exact Gaussian curve
  (:mod:`tfdpmech.accounting.events`). Each is a correct bound, so the total never falls below
  what a correct composition gives.
* Releases marked ``per_epoch`` are repeated every epoch: they count ``epochs`` times (their
  events are self-composed ``epochs`` times). A fractional ``epochs`` is **rounded up** (a
  started epoch has released its noise); negative, NaN, boolean or non-numeric epochs are refused.

Persistence: :meth:`PrivacyLedger.save` / :meth:`PrivacyLedger.load` write and read one JSON file
atomically; :meth:`PrivacyLedger.open` binds a ledger to a file that several processes may append
to (each :meth:`~PrivacyLedger.record` locks the file, re-reads it, appends and writes it back
atomically). Every field is validated on load; a file that does not validate is a ``ValueError``
naming the file, never a ledger with fewer releases or a smaller ε.
"""

from __future__ import annotations

import math
import numbers
import threading
from typing import Iterable

from .atomic_file import LOCK_TIMEOUT
from .display import delta_text
from .events import COMPOSITION_ACCOUNTANTS, compose_events, self_composed
from .guarantee import NONE_PROVEN, Guarantee, NoneProven, _describe, format_epsilon
from .ledger_file import LedgerPersistence
from .progress import StepProgress
from .release import NEIGHBOURS, PROTECTS, UNSTATED, Release, check_epochs, describe_scope

__all__ = ["Release", "PrivacyLedger", "Guarantee", "NoneProven", "NONE_PROVEN", "format_epsilon", "check_epochs",
           "ledger_or_new", "NEIGHBOURS", "PROTECTS", "UNSTATED", "describe_scope"]


# ---------------------------------------------------------------------------------------------------------------
# PrivacyLedger
# ---------------------------------------------------------------------------------------------------------------
class PrivacyLedger(LedgerPersistence):
    """Append-only record of releases with claimed and provable totals.

    Args:
        releases: initial releases.
        target_delta: the δ at which (ε, δ) releases carrying ``dp_accounting`` events are composed;
            None means the sum of their δ (then their basic composition is always one of the bounds).
        accountant: ``"best"`` (smallest valid bound), ``"rdp"`` or ``"pld"`` for those events.

    Example:
        >>> ledger = PrivacyLedger()
        >>> _ = ledger.record(Release("relevance", "laplace", 0.1, 0.1, "Laplace mechanism"))
        >>> ledger.epsilon_claimed(), ledger.epsilon_provable()
        (0.1, 0.1)
    """

    def __init__(self, releases: Iterable[Release] = (), *, target_delta: float | None = None,
                 accountant: str = "best"):
        if target_delta is not None:
            if isinstance(target_delta, bool) or not isinstance(target_delta, numbers.Real):
                raise TypeError(f"target_delta must be a real number in (0, 1) or None, got {_describe(target_delta)}")
            if not 0.0 < float(target_delta) < 1.0:
                raise ValueError(f"target_delta must lie in (0, 1), got {target_delta}; e.g. 1e-5 or 1/n")
            target_delta = float(target_delta)
        if accountant not in COMPOSITION_ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {list(COMPOSITION_ACCOUNTANTS)}, got {accountant!r}")
        self.target_delta = target_delta
        self.accountant = accountant
        self._path: str | None = None
        self._lock_timeout = LOCK_TIMEOUT
        self._thread_lock = threading.RLock()
        self._releases: list[Release] = []
        self._progress = StepProgress()
        for release in releases:
            self._releases.append(self._check_release(release))

    # -- recording -------------------------------------------------------------------------------------------------
    @staticmethod
    def _check_release(release) -> Release:
        if not isinstance(release, Release):
            raise TypeError(f"release must be a tfdpmech.accounting.ledger.Release, got {type(release).__name__}")
        return release

    @property
    def releases(self) -> tuple[Release, ...]:
        return tuple(self._releases)

    @property
    def path(self) -> str | None:
        """The file this ledger appends to (see :meth:`open`), or None."""
        return self._path

    def record(self, release: Release) -> Release:
        """Append a release and return it. A ledger bound to a file writes it there before returning."""
        self._append([self._check_release(release)])
        return release

    def _index(self, release: Release) -> int:
        for i, r in enumerate(self._releases):
            if r is release:
                return i
        raise ValueError(f"release {getattr(release, 'component', release)!r} is not in this ledger; record it first")

    def record_progress(self, release: Release, steps_taken: int, *, reader=None) -> None:
        """Note the steps run so far after ``release`` (a planned-steps release such as DP-SGD's).

        The ε charged is never changed (the release was charged its whole plan when recorded):
        :meth:`summary` shows the releases followed by fewer steps than ``release.details["steps_planned"]``.
        A ledger bound to a file (:meth:`open`) writes the count there too.

        Args:
            release: a release of this ledger (the object :meth:`record` returned).
            steps_taken: steps run so far (counts only grow).
            reader: optionally a bound method returning the live count (held weakly), read by
                :meth:`steps_taken` while its object exists.
        """
        index = self._index(release)
        with self._thread_lock:
            self._progress.record(index, steps_taken, reader)
            self._write_progress()

    def steps_taken(self, release: Release) -> int | None:
        """Steps run after ``release`` as far as recorded (None when nothing was recorded for it)."""
        return self._progress.steps(self._index(release))

    def extend(self, other: "PrivacyLedger") -> None:
        """Append every release of another ledger (sequential composition)."""
        if not isinstance(other, PrivacyLedger):
            raise TypeError(f"other must be a PrivacyLedger, got {type(other).__name__}")
        self._append(list(other.releases))

    # -- totals ----------------------------------------------------------------------------------------------------
    @staticmethod
    def _times(release: Release, epochs: int | None) -> int:
        if not release.per_epoch:
            return 1
        if epochs is None:
            raise ValueError(
                f"release {release.component!r} composes per epoch; pass epochs= to get its total"
            )
        return epochs

    def _counted(self, epochs) -> list[tuple[Release, int]]:
        epochs = check_epochs(epochs)
        return [(r, self._times(r, epochs)) for r in self._releases]

    def epsilon_claimed(self, epochs: int | None = None) -> float:
        """Total claimed ε: the sum of the claimed ε, per-epoch releases counted ``epochs`` times."""
        return float(sum(r.epsilon_claimed * t for r, t in self._counted(epochs)))

    def provable(self, epochs: int | None = None) -> Guarantee | NoneProven:
        """The provable guarantee of everything recorded: a :class:`Guarantee` or :class:`NoneProven`.

        See the module docstring for the composition rules.

        Raises:
            ValueError / TypeError: a bad ``epochs``, or per-epoch releases without ``epochs``.
        """
        counted = self._counted(epochs)
        unproven = [r for r, _ in counted if r.epsilon_provable is None]
        if unproven:
            reasons = "; ".join(dict.fromkeys(f"{r.component}: {r.basis}" for r in unproven))
            return NoneProven(f"no proven guarantee for {len(unproven)} release(s) ({reasons})")
        relations = {r.neighbours for r, t in counted if t > 0 and _spends(r)} - {UNSTATED}
        if len(relations) > 1:
            return NoneProven(
                "the releases are proven for different neighbour relations (" + ", ".join(
                    f"{r.component}: {r.neighbours}" for r, t in counted if t > 0 and _spends(r))
                + "); neither relation's ε implies the other's at the same ε, so they do not add up to one ε"
            )
        counted = [(r, t) for r, t in counted if t > 0]
        pure = [(r, t) for r, t in counted if r.delta == 0]
        plain = [(r, t) for r, t in counted if r.delta > 0 and r.event is None]
        evented = [(r, t) for r, t in counted if r.delta > 0 and r.event is not None]
        epsilon = sum(r.epsilon_provable * t for r, t in pure + plain)
        delta = sum(r.delta * t for r, t in plain)
        parts = []
        if pure:
            parts.append(f"{len(pure)} pure-ε release(s) add up (basic composition)")
        if plain:
            parts.append(f"{len(plain)} (ε, δ) release(s) without a dp_accounting event add up in ε and δ")
        if evented:
            basic_eps = sum(r.epsilon_provable * t for r, t in evented)
            basic_delta = sum(r.delta * t for r, t in evented)
            target = basic_delta if self.target_delta is None else self.target_delta
            bounds = []
            if basic_delta <= target * (1 + 1e-12):
                bounds.append((basic_eps, "the sum of their own ε (basic composition)"))
            composed = compose_events([self_composed(r.event, t) for r, t in evented], target, self.accountant)
            if composed is not None and math.isfinite(composed[0]):
                bounds.append(composed)
            if bounds:
                ev_eps, how = min(bounds, key=lambda b: b[0])
                ev_delta = target
            else:  # no accountant supports the events and their δ's exceed the target: report their own δ
                ev_eps, how, ev_delta = basic_eps, "the sum of their own ε and δ (no accountant supports them)", basic_delta
            epsilon += ev_eps
            delta += ev_delta
            parts.append(f"{len(evented)} (ε, δ) release(s) with dp_accounting events composed at δ={delta_text(ev_delta)}: {how}")
        if not math.isfinite(epsilon):
            return NoneProven("the composed provable ε is infinite")
        return Guarantee(float(epsilon), float(delta), "; ".join(parts) if parts else "no releases")

    def epsilon_provable(self, epochs: int | None = None) -> float | None:
        """Total provable ε, or None when none is proven (:meth:`provable` says why)."""
        g = self.provable(epochs)
        return g.epsilon if g else None

    def provable_basis(self, epochs: int | None = None) -> str:
        """How the provable total was composed, or why none is proven."""
        g = self.provable(epochs)
        return g.basis if g else g.reason

    def delta(self, epochs: int | None = None) -> float:
        """δ of the provable total (the sum of the releases' δ when none is proven)."""
        g = self.provable(epochs)
        if g:
            return g.delta
        return float(sum(r.delta * t for r, t in self._counted(epochs)))

    def scope(self) -> tuple[str, str]:
        """``(neighbours, protects)`` of the total: the neighbour relation of the releases that spend
        budget (``"mixed"`` when they differ, ``"unstated"`` when one is; ε = 0 releases such as
        public features hold under both) and what is protected (``"features"`` when any release
        protects the features only: the weakest wins). ``("–", "–")`` for a ledger that spends nothing."""
        spending = [r for r in self._releases if _spends(r)] or list(self._releases)
        if not spending:
            return "–", "–"
        relations = {r.neighbours for r in spending}
        neighbours = UNSTATED if UNSTATED in relations else relations.pop() if len(relations) == 1 else "mixed"
        protected = {r.protects for r in spending}
        protects = UNSTATED if UNSTATED in protected else "features" if "features" in protected else "record"
        return neighbours, protects

    @property
    def is_reproduction(self) -> bool:
        return any(r.reproduction for r in self._releases)

    # -- reports ---------------------------------------------------------------------------------------------------
    def summary(self, epochs: int | None = None) -> str:
        """A human-readable table: one entry per release (with the steps it ran, when fewer than planned),
        then the totals."""
        counted = self._counted(epochs)
        lines = []
        for i, (r, times) in enumerate(counted):
            tag = " [reproduction mode]" if r.reproduction else ""
            rep = f" ×{times} epochs" if r.per_epoch else ""
            lines.append(
                f"- {r.component} ({r.mechanism}, {r.guarantee}){tag}: "
                f"{format_epsilon(r.epsilon_claimed, r.epsilon_provable, r.delta)}{rep}\n"
                f"    neighbours: {describe_scope(r.neighbours, r.protects)}\n    basis: {r.basis}"
            )
            planned, taken = r.details.get("steps_planned"), self._progress.steps(i)
            if isinstance(planned, int) and taken is not None and taken < planned:
                lines.append(f"    steps: {taken} of the {planned} planned ran (stopped early; charged for all "
                             f"{planned}, as recorded before the first step)")
        g = self.provable(epochs)
        lines.append(f"neighbours of the total: {describe_scope(*self.scope())}")
        lines.append("total: " + format_epsilon(self.epsilon_claimed(epochs), g.epsilon, self.delta(epochs)))
        return "\n".join(lines)

    def __len__(self) -> int:
        return len(self._releases)

    def __repr__(self) -> str:
        if any(r.per_epoch for r in self._releases):
            return f"PrivacyLedger({len(self)} releases, some per epoch; see summary(epochs=...))"
        return f"PrivacyLedger({len(self)} releases; {format_epsilon(self.epsilon_claimed(), self.epsilon_provable())})"


def _spends(release: Release) -> bool:
    """True unless the release is ε = 0 claimed and proven with δ = 0 (it holds under every relation)."""
    return not (release.epsilon_claimed == 0 and release.epsilon_provable == 0 and release.delta == 0)


def ledger_or_new(ledger) -> PrivacyLedger:
    """``ledger`` if it is a :class:`PrivacyLedger`, a new empty one if it is None; TypeError otherwise."""
    if ledger is None:
        return PrivacyLedger()
    if not isinstance(ledger, PrivacyLedger):
        raise TypeError(f"ledger must be a tfdpmech.PrivacyLedger or None, got {type(ledger).__name__}; pass "
                        "the .ledger of another tfdpmech object to share one budget, or None for a new ledger")
    return ledger


