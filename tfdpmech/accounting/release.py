"""One privacy-relevant release: what was released, its claimed and provable ε, and their scope.

A :class:`Release` carries two numbers: ``epsilon_claimed`` (what the paper states for this
step) and ``epsilon_provable`` (what a correct argument, named in ``basis``, actually gives;
``None`` when no proof holds), optionally the ``dp_accounting`` event of its provable guarantee,
and the scope of its ε: the neighbour relation (:data:`NEIGHBOURS`) and what it protects
(:data:`PROTECTS`). Every field is validated on construction and on :meth:`Release.from_dict`.
:func:`check_epochs` is the epoch count a per-epoch release is repeated for.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

import numpy as np

from .events import event_epsilon_floor, event_from_json, event_to_json, is_dp_event
from .guarantee import _describe

__all__ = ["Release", "check_epochs", "describe_scope", "NEIGHBOURS", "PROTECTS", "UNSTATED"]

# The neighbour relation an ε is stated for: add or remove one record (n changes; DP-SGD's accountants), or
# replace one record (n fixed and public; the heads, input and output perturbation). Neither implies the other
# at the same ε, so a total over releases of both kinds is none proven (see PrivacyLedger.provable).
NEIGHBOURS = ("add_remove", "replace_one", "add_remove_user")  # the last: one user with all of their records
# What the ε protects: the whole record (features and label), or the features only (labels public).
PROTECTS = ("record", "features")
UNSTATED = "unstated"  # a release read from a ledger file written before these fields existed
_MAX_EPOCHS = 10**12  # beyond this an epoch count is a mistake (and ε·epochs would lose precision)


# ---------------------------------------------------------------------------------------------------------------
# field checks (every message names the field and the fix)
# ---------------------------------------------------------------------------------------------------------------
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
             "mixed": "mixed neighbours", "add_remove_user": "add/remove one user (all of their records)"}
    what = ("features only (labels public)" if protects == "features" else "protects unstated"
            if protects == UNSTATED else protects)
    if neighbours == "add_remove_user" and protects == "record":  # the unit is a person: their records in full
        what = "every record in full"
    return f"{words.get(neighbours, neighbours)}, {what}"
