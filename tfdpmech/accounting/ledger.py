"""The privacy ledger: every release, with claimed and provable ε side by side.

Several of the papers behind this package claim more than their proofs give.
A :class:`Release` therefore carries two numbers: ``epsilon_claimed`` (what the
paper states for this step) and ``epsilon_provable`` (what a correct argument,
named in ``basis``, actually gives; ``None`` when no proof holds). Totals use
basic (sequential) composition; a provable total exists only if every release
has one.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Iterable

from .atomic_file import write_json_atomically

__all__ = ["Release", "PrivacyLedger", "format_epsilon", "NONE_PROVEN"]

NONE_PROVEN = "none proven"


@dataclasses.dataclass(frozen=True)
class Release:
    """One privacy-relevant release of information about the training data.

    Attributes:
        component: what was released, e.g. ``"first_layer_inputs"``.
        mechanism: ``"laplace"``, ``"gaussian"``, ``"dpsgd"``, ...
        epsilon_claimed: ε stated by the paper (or by the method) for this release.
        epsilon_provable: ε that follows from a correct argument, or None.
        delta: δ of the provable guarantee (0 for pure ε-DP).
        sensitivity: the sensitivity used to calibrate the noise, if any.
        noise_scale: the noise scale (Laplace b, Gaussian σ or noise multiplier).
        basis: the argument behind ``epsilon_provable``, or why there is none.
        per_epoch: True when the release is repeated every epoch (composes with epochs).
        reproduction: True for a mode that reproduces a paper's numbers.
        details: further facts (policies, shapes, noise fingerprints).
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

    def __post_init__(self):
        if not (self.epsilon_claimed >= 0 and math.isfinite(self.epsilon_claimed)):
            raise ValueError(f"epsilon_claimed must be finite and >= 0, got {self.epsilon_claimed}")
        if self.epsilon_provable is not None and not self.epsilon_provable >= 0:
            raise ValueError(f"epsilon_provable must be >= 0 or None, got {self.epsilon_provable}")
        if self.epsilon_provable is not None and math.isinf(self.epsilon_provable):
            object.__setattr__(self, "epsilon_provable", None)

    @property
    def guarantee(self) -> str:
        """``"proven"`` when a correct argument gives a finite ε, else ``"claimed"``."""
        return "proven" if self.epsilon_provable is not None else "claimed"

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["guarantee"] = self.guarantee
        return out


def format_epsilon(claimed: float, provable: float | None, delta: float = 0.0) -> str:
    """Render claimed and provable ε together, e.g. ``claimed ε=0.3 | provable ε=11.2``."""
    d = f", δ={delta:g}" if delta else ""
    prov = NONE_PROVEN if provable is None else f"ε={provable:.4g}{d}"
    return f"claimed ε={claimed:.4g} | provable {prov}"


class PrivacyLedger:
    """Append-only record of releases with claimed and provable totals.

    Example:
        >>> ledger = PrivacyLedger()
        >>> _ = ledger.record(Release("relevance", "laplace", 0.1, 0.1, "Laplace mechanism"))
        >>> ledger.epsilon_claimed(), ledger.epsilon_provable()
        (0.1, 0.1)
    """

    def __init__(self, releases: Iterable[Release] = ()):
        self._releases: list[Release] = list(releases)

    @property
    def releases(self) -> tuple[Release, ...]:
        return tuple(self._releases)

    def record(self, release: Release) -> Release:
        """Append a release and return it."""
        if not isinstance(release, Release):
            raise TypeError(f"release must be a tfdpmech.accounting.ledger.Release, got {type(release).__name__}")
        self._releases.append(release)
        return release

    def extend(self, other: "PrivacyLedger") -> None:
        """Append every release of another ledger (sequential composition)."""
        for release in other.releases:
            self.record(release)

    @staticmethod
    def _times(release: Release, epochs: int | None) -> int:
        if not release.per_epoch:
            return 1
        if epochs is None:
            raise ValueError(
                f"release {release.component!r} composes per epoch; pass epochs= to get its total"
            )
        return max(int(epochs), 0)

    def epsilon_claimed(self, epochs: int | None = None) -> float:
        """Total claimed ε (basic composition), after ``epochs`` epochs for per-epoch releases."""
        return float(sum(r.epsilon_claimed * self._times(r, epochs) for r in self._releases))

    def epsilon_provable(self, epochs: int | None = None) -> float | None:
        """Total provable ε, or None if any release has no proven guarantee."""
        if any(r.epsilon_provable is None for r in self._releases):
            return None
        return float(sum(r.epsilon_provable * self._times(r, epochs) for r in self._releases))

    def delta(self, epochs: int | None = None) -> float:
        """Total δ of the provable guarantees (basic composition)."""
        return float(sum(r.delta * self._times(r, epochs) for r in self._releases))

    @property
    def is_reproduction(self) -> bool:
        return any(r.reproduction for r in self._releases)

    def summary(self, epochs: int | None = None) -> str:
        """A human-readable table: one line per release, then the totals."""
        lines = []
        for r in self._releases:
            times = f" ×{self._times(r, epochs)} epochs" if r.per_epoch else ""
            tag = " [reproduction mode]" if r.reproduction else ""
            lines.append(
                f"- {r.component} ({r.mechanism}, {r.guarantee}){tag}: "
                f"{format_epsilon(r.epsilon_claimed, r.epsilon_provable, r.delta)}{times}\n    basis: {r.basis}"
            )
        lines.append(
            "total: " + format_epsilon(self.epsilon_claimed(epochs), self.epsilon_provable(epochs), self.delta(epochs))
        )
        return "\n".join(lines)

    def to_dict(self, epochs: int | None = None) -> dict:
        out = {"releases": [r.to_dict() for r in self._releases]}
        if epochs is not None or not any(r.per_epoch for r in self._releases):
            out.update(
                epsilon_claimed=self.epsilon_claimed(epochs),
                epsilon_provable=self.epsilon_provable(epochs),
                delta=self.delta(epochs),
                epochs=epochs,
            )
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "PrivacyLedger":
        fields = {f.name for f in dataclasses.fields(Release)}
        return cls(Release(**{k: v for k, v in r.items() if k in fields}) for r in data["releases"])

    def save(self, path) -> None:
        """Write the ledger as JSON atomically (a crash never leaves a half-written file)."""
        write_json_atomically(path, self.to_dict(), indent=2)

    @classmethod
    def load(cls, path) -> "PrivacyLedger":
        """Read a ledger written by :meth:`save`.

        Raises:
            ValueError: the file is not valid JSON or does not hold a ledger.
        """
        with open(path) as fh:
            try:
                data = json.load(fh)
            except json.JSONDecodeError as exc:
                raise ValueError(f"ledger file {path!s} is not valid JSON: {exc}") from exc
        try:
            return cls.from_dict(data)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(
                f"ledger file {path!s} does not hold a ledger written by PrivacyLedger.save: {exc!r}"
            ) from exc

    def __len__(self) -> int:
        return len(self._releases)

    def __repr__(self) -> str:
        if any(r.per_epoch for r in self._releases):
            return f"PrivacyLedger({len(self)} releases, some per epoch; see summary(epochs=...))"
        return f"PrivacyLedger({len(self)} releases; {format_epsilon(self.epsilon_claimed(), self.epsilon_provable())})"
