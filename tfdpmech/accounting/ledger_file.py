"""The JSON form and the file of a :class:`~tfdpmech.accounting.ledger.PrivacyLedger`.

:class:`LedgerPersistence` is the part of ``PrivacyLedger`` that reads and writes it:
:meth:`~LedgerPersistence.to_dict` / :meth:`~LedgerPersistence.from_dict` (every field validated),
:meth:`~LedgerPersistence.save` / :meth:`~LedgerPersistence.load` (one JSON file, written
atomically) and :meth:`~LedgerPersistence.open` (a ledger bound to a file that several processes
may append to: each ``record`` locks the file, re-reads it, appends and writes it back
atomically). A file that does not validate is a ``ValueError`` naming the file, never a ledger
with fewer releases or a smaller ε.
"""

from __future__ import annotations

import json
import os
from typing import Self

from .atomic_file import LOCK_TIMEOUT, locked_state, read_json_strictly, state_lock, write_json_atomically
from .progress import StepProgress
from .release import Release, check_epochs

__all__ = ["LedgerPersistence"]

_FORMAT = 1


class LedgerPersistence:
    """The JSON form and the file of a ledger; mixed into :class:`~tfdpmech.accounting.ledger.PrivacyLedger`.

    It reads the ledger's ``_releases``, ``target_delta``, ``accountant`` and its file state
    (``_path``, ``_lock_timeout``, ``_thread_lock``, set by ``PrivacyLedger.__init__``).
    """

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

    def _write_progress(self) -> None:
        """Write the step counts to the bound file (merged with what other processes recorded there)."""
        if self._path is None:
            return
        with locked_state(self._path, timeout=self._lock_timeout, lock=self._file_lock):
            self._releases = self._read_bound_file()
            write_json_atomically(self._path, self._payload(self._releases, None), indent=2)

    def _read_bound_file(self) -> list[Release]:
        """The releases in the bound file (under its lock); ours must be a prefix of them. Its step
        counts are merged into ours."""
        if not os.path.exists(self._path):
            if self._releases:
                raise ValueError(
                    f"ledger file {self._path} has disappeared while this ledger had {len(self._releases)} releases "
                    "in it; restore it from a backup (releases are never dropped)"
                )
            return []
        other = type(self).load(self._path)
        self._check_settings(other, self._path)
        self._progress.merge(other._progress)
        if not _is_prefix(self._releases, other.releases):
            raise ValueError(
                f"ledger file {self._path} no longer starts with the {len(self._releases)} releases this ledger "
                "recorded there; it was replaced or edited. Releases are never dropped: restore the file"
            )
        return self._releases + list(other.releases[len(self._releases):])  # ours (the same objects), then theirs

    def _check_settings(self, other: LedgerPersistence, path) -> None:
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



    def _payload(self, releases, epochs) -> dict:
        out = {
            "format": _FORMAT, "target_delta": self.target_delta, "accountant": self.accountant,
            "releases": [r.to_dict() for r in releases],
        }
        progress = self._progress.to_json(len(releases))
        if progress:
            out["progress"] = progress
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
    def from_dict(cls, data: dict) -> Self:
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
        ledger._progress = StepProgress.from_json(data.get("progress"), len(ledger._releases))
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
    def load(cls, path) -> Self:
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
             lock_timeout: float = LOCK_TIMEOUT) -> Self:
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


def _canonical(release: Release) -> str:
    return json.dumps(release.to_dict(), sort_keys=True, default=repr)


def _is_prefix(prefix, releases) -> bool:
    if len(prefix) > len(releases):
        return False
    return all(a == b or _canonical(a) == _canonical(b) for a, b in zip(prefix, releases))
