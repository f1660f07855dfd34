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

import dataclasses
import json
import math
import numbers
import os
import threading
from typing import Iterable

import numpy as np

from .atomic_file import LOCK_TIMEOUT, locked_state, read_json_strictly, state_lock, write_json_atomically
from .display import delta_text, epsilon_upper
from .events import COMPOSITION_ACCOUNTANTS, compose_events, event_epsilon_floor, event_from_json, event_to_json
from .events import is_dp_event, self_composed

__all__ = ["Release", "PrivacyLedger", "Guarantee", "NoneProven", "NONE_PROVEN", "format_epsilon", "check_epochs",
           "ledger_or_new", "NEIGHBOURS", "PROTECTS", "UNSTATED", "describe_scope"]

NONE_PROVEN = "none proven"
# The neighbour relation an ε is stated for: add or remove one record (n changes; DP-SGD's accountants), or
# replace one record (n fixed and public; the heads, input and output perturbation). Neither implies the other
# at the same ε, so a total over releases of both kinds is none proven (see PrivacyLedger.provable).
NEIGHBOURS = ("add_remove", "replace_one")
# What the ε protects: the whole record (features and label), or the features only (labels public).
PROTECTS = ("record", "features")
UNSTATED = "unstated"  # a release read from a ledger file written before these fields existed
_FORMAT = 1
_MAX_EPOCHS = 10**12  # beyond this an epoch count is a mistake (and ε·epochs would lose precision)


# ---------------------------------------------------------------------------------------------------------------
# values: a proven guarantee, or none proven with the reason
# ---------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Guarantee:
    """A proven (ε, δ) guarantee of a whole ledger and the argument behind it."""

    epsilon: float
    delta: float
    basis: str

    def __bool__(self) -> bool:
        return True


@dataclasses.dataclass(frozen=True)
class NoneProven:
    """No proven guarantee exists; ``reason`` says why. Falsy, prints as ``"none proven"``.

    In JSON it is written as ``"epsilon_provable": null`` next to ``"provable_basis": reason``.
    """

    reason: str
    epsilon = None

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return NONE_PROVEN


# ---------------------------------------------------------------------------------------------------------------
# field checks (every message names the field and the fix)
# ---------------------------------------------------------------------------------------------------------------
def _describe(value) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60] + '...' if len(text) > 60 else text}"


def _real(value, name: str, *, allow_none: bool = False, allow_inf: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        none = " or None" if allow_none else ""
        raise TypeError(
            f"Release.{name} must be a real number{none}, got {_describe(value)}; pass a float, e.g. "
            f"{name}=float(value)"
        )
    try:
        number = float(value)
    except OverflowError:
        raise ValueError(f"Release.{name} is too large to be a float ({len(str(value))} digits)") from None
    if math.isnan(number) or number < 0 or (math.isinf(number) and not allow_inf):
        if name.startswith("epsilon_claimed"):
            raise ValueError(f"epsilon_claimed must be finite and >= 0, got {value}")
        if name.startswith("epsilon_provable"):
            raise ValueError(f"epsilon_provable must be >= 0 or None, got {value}")
        raise ValueError(f"Release.{name} must be finite and >= 0, got {value}")
    return number


def _boolean(value, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    raise TypeError(f"Release.{name} must be True or False, got {_describe(value)}")


def _text(value, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"Release.{name} must be a str, got {_describe(value)}")
    return value


def check_epochs(epochs) -> int | None:
    """The number of epochs a per-epoch release counts: a whole number >= 0, fractions rounded UP.

    A fractional epoch count (``2.5``) means the third epoch has started and its noise has been
    released, so it counts 3: the ledger never under-reports.

    Raises:
        TypeError: a boolean, a string or another non-number.
        ValueError: negative, NaN or infinite.
    """
    if epochs is None:
        return None
    if isinstance(epochs, bool) or not isinstance(epochs, numbers.Real):
        raise TypeError(f"epochs must be a number of epochs >= 0 (e.g. epochs=3), got {_describe(epochs)}")
    if isinstance(epochs, numbers.Integral):
        value = int(epochs)
    else:
        try:
            number = float(epochs)
        except OverflowError:
            number = math.inf
        if math.isnan(number) or number < 0:
            raise ValueError(f"epochs must be >= 0, got {epochs}; pass the number of epochs trained")
        value = math.inf if math.isinf(number) else int(math.ceil(number))
    if value < 0:
        raise ValueError(f"epochs must be >= 0, got {epochs}; pass the number of epochs trained")
    if value > _MAX_EPOCHS:
        raise ValueError(f"epochs={epochs} is not a plausible number of epochs (at most {_MAX_EPOCHS:.0e})")
    return value


# ---------------------------------------------------------------------------------------------------------------
# Release
# ---------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Release:
    """One privacy-relevant release of information about the training data.

    Attributes:
        component: what was released, e.g. ``"first_layer_inputs"``.
        mechanism: ``"laplace"``, ``"gaussian"``, ``"dpsgd"``, ...
        epsilon_claimed: ε stated by the paper (or by the method) for this release.
        epsilon_provable: ε that follows from a correct argument, or None (∞ is stored as None).
        basis: the argument behind ``epsilon_provable``, or why there is none.
        delta: δ of the provable guarantee (0 for pure ε-DP).
        sensitivity: the sensitivity used to calibrate the noise, if any.
        noise_scale: the noise scale (Laplace b, Gaussian σ or noise multiplier).
        per_epoch: True when the release is repeated every epoch (composes with epochs).
        reproduction: True for a mode that reproduces a paper's numbers.
        details: further facts (policies, shapes, noise fingerprints); must be JSON-serialisable to save.
        event: the ``dp_accounting.DpEvent`` of the provable guarantee (one repetition), or None.
            It must describe the **whole** release (the ledger composes the event in place of
            ``epsilon_provable``). A Gaussian or Laplace event is checked against
            ``epsilon_provable``: a stated ε below the event's exact ε at ``delta`` is refused.
        neighbours: the neighbour relation the ε is stated for, ``"add_remove"`` or ``"replace_one"``
            (:data:`NEIGHBOURS`). None (the default) derives it: ``"add_remove"`` for DP-SGD
            (``mechanism`` starting with ``"dpsgd"``, or an event that contains a Poisson-sampled
            event: dp_accounting's accountants state add-or-remove ε), else ``"replace_one"`` (n
            fixed and public, as every other mechanism here calibrates). ``"unstated"`` only for a
            release read from a file written before the field existed.
        protects: ``"record"`` (features and label; the default) or ``"features"`` (labels public),
            :data:`PROTECTS`; ``"unstated"`` as for ``neighbours``.

    Raises:
        TypeError: a field of the wrong type (e.g. ``epsilon_claimed='1'``), naming the field.
        ValueError: a negative / NaN ε, δ outside [0, 1), an event without a provable ε, an event
            that contradicts the stated (ε, δ).
    """

    component: str
    mechanism: str
    epsilon_claimed: float
    epsilon_provable: float | None
    basis: str
    delta: float = 0.0
    sensitivity: float | None = None
    noise_scale: float | None = None
    per_epoch: bool = False
    reproduction: bool = False
    details: dict = dataclasses.field(default_factory=dict)
    event: object | None = None
    neighbours: str | None = None
    protects: str = "record"

    def __post_init__(self):
        setattr_ = object.__setattr__
        setattr_(self, "component", _text(self.component, "component"))
        setattr_(self, "mechanism", _text(self.mechanism, "mechanism"))
        setattr_(self, "basis", _text(self.basis, "basis"))
        setattr_(self, "epsilon_claimed", _real(self.epsilon_claimed, "epsilon_claimed"))
        provable = _real(self.epsilon_provable, "epsilon_provable", allow_none=True, allow_inf=True)
        setattr_(self, "epsilon_provable", None if provable is not None and math.isinf(provable) else provable)
        delta = _real(self.delta, "delta")
        if delta >= 1:
            raise ValueError(f"Release.delta must lie in [0, 1), got {delta}; pass 0 for pure ε-DP")
        setattr_(self, "delta", delta)
        setattr_(self, "sensitivity", _real(self.sensitivity, "sensitivity", allow_none=True))
        setattr_(self, "noise_scale", _real(self.noise_scale, "noise_scale", allow_none=True))
        setattr_(self, "per_epoch", _boolean(self.per_epoch, "per_epoch"))
        setattr_(self, "reproduction", _boolean(self.reproduction, "reproduction"))
        if not isinstance(self.details, dict):
            raise TypeError(f"Release.details must be a dict, got {_describe(self.details)}")
        if self.event is not None:
            self._check_event()
        setattr_(self, "neighbours", _scope_word(self._derived_neighbours() if self.neighbours is None
                                                 else self.neighbours, "neighbours", NEIGHBOURS))
        setattr_(self, "protects", _scope_word(self.protects, "protects", PROTECTS))

    def _derived_neighbours(self) -> str:
        if self.mechanism.startswith("dpsgd") or (self.event is not None and "PoissonSampled" in repr(self.event)):
            return "add_remove"
        return "replace_one"

    def _check_event(self):
        if not is_dp_event(self.event):
            raise TypeError(
                f"Release.event must be a dp_accounting.DpEvent (e.g. dp_accounting.GaussianDpEvent(sigma)) or None, "
                f"got {_describe(self.event)}"
            )
        if self.epsilon_provable is None:
            raise ValueError(
                f"release {self.component!r} carries a dp_accounting event but no epsilon_provable; an event "
                "describes a proven guarantee: pass its ε as epsilon_provable, or drop the event"
            )
        floor = event_epsilon_floor(self.event, self.delta)
        if floor is not None and self.epsilon_provable < floor * (1 - 1e-9):
            raise ValueError(
                f"release {self.component!r} states epsilon_provable={self.epsilon_provable:g} at delta={self.delta:g}, "
                f"but its event {self.event} gives ε={floor:g} at that δ"
                + (" (a Gaussian mechanism has no pure-ε guarantee: pass its delta)" if math.isinf(floor) else "")
                + "; state the event's ε"
            )

    @property
    def guarantee(self) -> str:
        """``"proven"`` when a correct argument gives a finite ε, else ``"claimed"``."""
        return "proven" if self.epsilon_provable is not None else "claimed"

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["details"] = dict(self.details)
        out["event"] = None if self.event is None else event_to_json(self.event)
        out["guarantee"] = self.guarantee
        return out

    @classmethod
    def from_dict(cls, data: dict, where: str = "release") -> "Release":
        """Rebuild a release from :meth:`to_dict`, validating every field (JSON types only).

        Raises:
            ValueError: a missing or unknown field, a wrong type (a string for a boolean, a
                boolean for a number), a non-finite number, an inconsistent ``guarantee`` label.
        """
        if not isinstance(data, dict):
            raise ValueError(f"{where} must be a JSON object, got {type(data).__name__}")
        names = [f.name for f in dataclasses.fields(cls)]
        required = names[:5]
        missing = [n for n in required if n not in data]
        unknown = sorted(set(data) - set(names) - {"guarantee"})
        if missing or unknown:
            raise ValueError(f"{where} lacks fields {missing} / has unknown fields {unknown}")
        kwargs = {n: data[n] for n in names if n in data}
        for name in ("neighbours", "protects"):  # a file written before these fields existed: say so, never guess
            kwargs.setdefault(name, UNSTATED)
        if kwargs.get("event") is not None:
            kwargs["event"] = event_from_json(kwargs["event"], f"{where}.event")
        try:
            release = cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from exc
        if "guarantee" in data and data["guarantee"] != release.guarantee:
            raise ValueError(
                f"{where} is labelled {data['guarantee']!r} but its epsilon_provable={data['epsilon_provable']!r} "
                f"makes it {release.guarantee!r}"
            )
        return release


def _scope_word(value, name: str, choices: tuple) -> str:
    if not isinstance(value, str):
        raise TypeError(f"Release.{name} must be a str, one of {list(choices)}, got {_describe(value)}")
    if value not in choices and value != UNSTATED:
        raise ValueError(f"Release.{name}={value!r} is not one of {list(choices)}; pass e.g. {name}={choices[0]!r}")
    return value


def describe_scope(neighbours: str, protects: str) -> str:
    """Words for a guarantee's scope, e.g. ``"replace-one, record"`` or ``"add/remove, features only"``."""
    words = {"add_remove": "add/remove", "replace_one": "replace-one", UNSTATED: "neighbours unstated",
             "mixed": "mixed neighbours"}
    return f"{words.get(neighbours, neighbours)}, " + ("features only (labels public)" if protects == "features"
                                                       else "protects unstated" if protects == UNSTATED else protects)


def format_epsilon(claimed: float, provable, delta: float = 0.0) -> str:
    """Render claimed and provable ε together, e.g. ``claimed ε=0.3 | provable ε=11.2``.

    ``provable`` is a number, None or a :class:`NoneProven`. Both ε are upper bounds and are
    rounded up (:func:`~tfdpmech.accounting.display.epsilon_upper`: 11.1729 shows as 11.18); δ
    keeps its digits (:func:`~tfdpmech.accounting.display.delta_text`).

    Raises:
        TypeError / ValueError: ``claimed`` or ``provable`` not a real number >= 0 (∞ allowed: no
            privacy), ``delta`` negative or NaN.
    """
    for name, value in (("claimed", claimed), ("provable", provable), ("delta", delta)):
        if name == "provable" and (value is None or isinstance(value, NoneProven)):
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"format_epsilon: {name} must be a real number, got {_describe(value)}; pass a float")
        if math.isnan(value) or value < 0:  # a composed δ >= 1 is vacuous but still shown as it is
            raise ValueError(f"format_epsilon: {name} must be >= 0 (inf for no privacy), got {value!r}")
    d = f", δ={delta_text(delta)}" if delta else ""
    prov = NONE_PROVEN if provable is None or isinstance(provable, NoneProven) else f"ε={epsilon_upper(provable)}{d}"
    return f"claimed ε={epsilon_upper(claimed)} | provable {prov}"


# ---------------------------------------------------------------------------------------------------------------
# PrivacyLedger
# ---------------------------------------------------------------------------------------------------------------
class PrivacyLedger:
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

    def extend(self, other: "PrivacyLedger") -> None:
        """Append every release of another ledger (sequential composition)."""
        if not isinstance(other, PrivacyLedger):
            raise TypeError(f"other must be a PrivacyLedger, got {type(other).__name__}")
        self._append(list(other.releases))

    def _append(self, new: list[Release]) -> None:
        with self._thread_lock:
            if self._path is None:
                self._releases.extend(new)
                return
            with locked_state(self._path, timeout=self._lock_timeout, lock=self._file_lock):
                current = self._read_bound_file()
                releases = current + new
                write_json_atomically(self._path, self._payload(releases, None), indent=2)
                self._releases = releases  # only once the file holds them

    def _read_bound_file(self) -> list[Release]:
        """The releases in the bound file (under its lock); ours must be a prefix of them."""
        if not os.path.exists(self._path):
            if self._releases:
                raise ValueError(
                    f"ledger file {self._path} has disappeared while this ledger had {len(self._releases)} releases "
                    "in it; restore it from a backup (releases are never dropped)"
                )
            return []
        other = type(self).load(self._path)
        self._check_settings(other, self._path)
        if not _is_prefix(self._releases, other.releases):
            raise ValueError(
                f"ledger file {self._path} no longer starts with the {len(self._releases)} releases this ledger "
                "recorded there; it was replaced or edited. Releases are never dropped: restore the file"
            )
        return list(other.releases)

    def _check_settings(self, other: "PrivacyLedger", path) -> None:
        if other.target_delta != self.target_delta or other.accountant != self.accountant:
            raise ValueError(
                f"ledger file {path} composes at target_delta={other.target_delta}, accountant={other.accountant!r}, "
                f"not target_delta={self.target_delta}, accountant={self.accountant!r}; open it with its own settings"
            )

    def refresh(self) -> None:
        """Re-read the bound file (releases other processes appended)."""
        if self._path is None:
            return
        with self._thread_lock:
            if os.path.exists(self._path):
                self._releases = self._read_bound_file()

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
        """A human-readable table: one line per release, then the totals."""
        counted = self._counted(epochs)
        lines = []
        for r, times in counted:
            tag = " [reproduction mode]" if r.reproduction else ""
            rep = f" ×{times} epochs" if r.per_epoch else ""
            lines.append(
                f"- {r.component} ({r.mechanism}, {r.guarantee}){tag}: "
                f"{format_epsilon(r.epsilon_claimed, r.epsilon_provable, r.delta)}{rep}\n"
                f"    neighbours: {describe_scope(r.neighbours, r.protects)}\n    basis: {r.basis}"
            )
        g = self.provable(epochs)
        lines.append(f"neighbours of the total: {describe_scope(*self.scope())}")
        lines.append("total: " + format_epsilon(self.epsilon_claimed(epochs), g.epsilon, self.delta(epochs)))
        return "\n".join(lines)

    def _payload(self, releases, epochs) -> dict:
        out = {
            "format": _FORMAT, "target_delta": self.target_delta, "accountant": self.accountant,
            "releases": [r.to_dict() for r in releases],
        }
        ledger = self if releases is self._releases else type(self)(
            releases, target_delta=self.target_delta, accountant=self.accountant)
        if epochs is not None or not any(r.per_epoch for r in releases):
            g = ledger.provable(epochs)
            out.update(
                epsilon_claimed=ledger.epsilon_claimed(epochs),
                epsilon_provable=g.epsilon if g else None,
                provable_basis=g.basis if g else g.reason,
                delta=ledger.delta(epochs),
                epochs=check_epochs(epochs),
            )
        return out

    def to_dict(self, epochs: int | None = None) -> dict:
        """The releases and, when defined, the totals (``epsilon_provable`` null when none is proven,
        with the reason in ``provable_basis``)."""
        return self._payload(self._releases, epochs)

    @classmethod
    def from_dict(cls, data: dict) -> "PrivacyLedger":
        """Rebuild a ledger from :meth:`to_dict`; every field is validated (see :meth:`Release.from_dict`).

        Raises:
            ValueError: anything that is not a ledger written by :meth:`to_dict`.
        """
        if not isinstance(data, dict):
            raise ValueError(f"a ledger is a JSON object, got {type(data).__name__}")
        if "releases" not in data or not isinstance(data["releases"], list):
            raise ValueError("a ledger needs a 'releases' list")
        if data.get("format", _FORMAT) != _FORMAT:
            raise ValueError(f"unsupported ledger format {data.get('format')!r} (this version reads {_FORMAT})")
        try:
            ledger = cls(target_delta=data.get("target_delta"), accountant=data.get("accountant", "best"))
        except (TypeError, ValueError) as exc:
            raise ValueError(str(exc)) from exc
        ledger._releases = [Release.from_dict(r, f"release {i}") for i, r in enumerate(data["releases"])]
        return ledger

    # -- persistence -----------------------------------------------------------------------------------------------
    def save(self, path, *, overwrite: bool = False) -> None:
        """Write the ledger as JSON atomically (a crash never leaves a half-written file).

        The file is locked while it is checked and written. An existing file is replaced only when
        it holds a ledger whose releases this one starts with (nothing recorded there is dropped),
        unless ``overwrite=True``.

        Raises:
            ValueError: the existing file holds other releases or is not a ledger (and ``overwrite`` is False).
            TypeError: ``details`` that are not JSON-serialisable (the old file stays as it was).
        """
        path = os.fspath(path)
        with self._thread_lock, locked_state(path, timeout=self._lock_timeout):
            if not overwrite and os.path.exists(path):
                try:
                    existing = type(self).load(path).releases
                except ValueError as exc:
                    raise ValueError(
                        f"refusing to replace {path}: it does not hold a valid ledger ({exc}); pass overwrite=True "
                        "to replace it anyway"
                    ) from exc
                if not _is_prefix(existing, self._releases):
                    raise ValueError(
                        f"refusing to replace ledger file {path}: it holds releases this ledger does not (saving would "
                        "drop them); use PrivacyLedger.open(path) to append, another path, or overwrite=True"
                    )
            write_json_atomically(path, self.to_dict(), indent=2)

    @classmethod
    def load(cls, path) -> "PrivacyLedger":
        """Read a ledger written by :meth:`save` (or by a ledger bound with :meth:`open`).

        Raises:
            FileNotFoundError: no such file.
            ValueError: the path is a directory, or the file is not UTF-8 JSON or does not hold a valid
                ledger; the message names it.
        """
        data = read_json_strictly(path, "ledger")
        try:
            return cls.from_dict(data)
        except (KeyError, TypeError, AttributeError, ValueError, OverflowError) as exc:
            raise ValueError(
                f"ledger file {os.fspath(path)!s} does not hold a ledger written by PrivacyLedger.save: {exc}"
            ) from exc

    @classmethod
    def open(cls, path, *, target_delta: float | None = None, accountant: str = "best",
             lock_timeout: float = LOCK_TIMEOUT) -> "PrivacyLedger":
        """A ledger bound to ``path``, which several processes may share.

        Loads the releases already there (creating the file if it is missing). Every later
        :meth:`record` / :meth:`extend` locks the file, re-reads it, appends and writes it back
        atomically before returning, so concurrent processes never lose each other's releases;
        orphaned temporary files from a killed writer are removed. The settings must match the
        file's.

        Raises:
            ValueError: the file is not a valid ledger, or has other settings.
            TimeoutError: another process held the lock for longer than ``lock_timeout`` seconds.
        """
        ledger = cls(target_delta=target_delta, accountant=accountant)
        ledger._path = os.fspath(path)
        ledger._lock_timeout = float(lock_timeout)
        ledger._file_lock = state_lock(ledger._path, timeout=ledger._lock_timeout)
        with locked_state(ledger._path, timeout=ledger._lock_timeout, lock=ledger._file_lock):
            if os.path.exists(ledger._path):
                ledger._releases = ledger._read_bound_file()
            else:
                write_json_atomically(ledger._path, ledger.to_dict(), indent=2)
        return ledger

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


def _canonical(release: Release) -> str:
    return json.dumps(release.to_dict(), sort_keys=True, default=repr)


def _is_prefix(prefix, releases) -> bool:
    if len(prefix) > len(releases):
        return False
    return all(a == b or _canonical(a) == _canonical(b) for a, b in zip(prefix, releases))
