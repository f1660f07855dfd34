"""How many of a release's planned steps actually ran: what a crashed or stopped run cost.

A DP-SGD release is recorded (and charged its whole planned ε) before its first noisy step, the
conservative side: a run killed half-way has still released whatever its finished steps computed.
:class:`StepProgress` keeps, next to the releases of a ledger, the number of steps each release was
followed by, so that :meth:`~tfdpmech.accounting.ledger.PrivacyLedger.summary` can show which releases
ran fewer steps than planned (the charge stays the planned one).

A step count comes from a *reader* while the training run is alive (the optimizer's step count, read
when asked, so it is exact after any ``fit``, an exception or a custom loop), and from the last
recorded number once the run is gone or the ledger was read from a file. The numbers are saved with
the ledger (``"progress"`` in its JSON form).
"""

from __future__ import annotations

import numbers
import weakref

__all__ = ["StepProgress"]


class StepProgress:
    """Steps taken after each release, by its position in the ledger."""

    def __init__(self):
        self._recorded: dict[int, int] = {}
        self._readers: dict[int, weakref.WeakMethod | weakref.ref] = {}

    @staticmethod
    def _check_steps(steps, where: str) -> int:
        if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 0:
            raise ValueError(f"{where}: a step count must be an int >= 0, got {steps!r}")
        return int(steps)

    def record(self, index: int, steps: int, reader=None) -> None:
        """Note ``steps`` taken after release ``index`` (counts only grow) and, optionally, a bound method
        returning the live count (held weakly: the run it belongs to may go away)."""
        steps = self._check_steps(steps, f"release {index}")
        self._recorded[index] = max(steps, self._recorded.get(index, 0))
        if reader is not None:
            self._readers[index] = weakref.WeakMethod(reader) if hasattr(reader, "__self__") else weakref.ref(reader)

    def steps(self, index: int) -> int | None:
        """Steps taken after release ``index``: the live count while its run exists, else the last recorded."""
        ref = self._readers.get(index)
        reader = ref() if ref is not None else None
        if reader is not None:
            try:
                self.record(index, int(reader()))
            except (RuntimeError, ValueError, AttributeError):  # a run whose model is gone or not compiled
                pass
        return self._recorded.get(index)

    def merge(self, other: "StepProgress") -> None:
        """Keep the larger count of each release (another process may have recorded more)."""
        for index, steps in other._recorded.items():
            self._recorded[index] = max(steps, self._recorded.get(index, 0))

    def to_json(self, releases: int) -> dict:
        """``{"<index>": steps}`` for the releases recorded (live counts read now)."""
        return {str(i): self.steps(i) for i in sorted(self._recorded) if i < releases}

    @classmethod
    def from_json(cls, data, releases: int) -> "StepProgress":
        """Read :meth:`to_json`; every index must name one of the ``releases`` releases.

        Raises:
            ValueError: not a mapping of release indices to step counts >= 0.
        """
        progress = cls()
        if data is None:
            return progress
        if not isinstance(data, dict):
            raise ValueError(f"'progress' must be an object of release index -> steps, got {type(data).__name__}")
        for key, steps in data.items():
            if not isinstance(key, str) or not key.isdigit() or int(key) >= releases:
                raise ValueError(f"'progress' names release {key!r}, but the ledger holds {releases} releases")
            progress.record(int(key), cls._check_steps(steps, f"progress of release {key}"))
        return progress
