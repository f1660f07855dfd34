"""Crash-safe, process-safe JSON state files for the privacy ledger and the query budget.

Three guarantees, used together by :class:`~tfdpmech.accounting.ledger.PrivacyLedger` and
:class:`~tfdpmech.accounting.query_budget.QueryBudgetAccountant`:

* **atomic**: :func:`write_json_atomically` writes a temporary file next to the target, fsyncs
  it, renames it over the target and fsyncs the directory. A reader (or a crash at any moment)
  sees the old content or the new one, never half of it.
* **process-safe**: :func:`locked_state` holds an OS file lock (the ``filelock`` library:
  ``fcntl.flock`` on POSIX, ``msvcrt`` locking on Windows) on a sidecar ``<file>.lock`` for the
  whole read-check-write cycle, so two processes can never both read the same old state and both
  write a new one. The operating system drops the lock when its holder dies, even by ``kill -9``.
  The ``.lock`` file stays in place (unlinking a lock file breaks mutual exclusion).
* **no leftovers**: a temporary file orphaned by a kill between its creation and the rename is
  deleted the next time the state file is locked (under the lock nobody else can be writing it).

Locks need a file system with working ``flock`` (local disks; not every network file system).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile

__all__ = [
    "write_json_atomically", "read_json_strictly", "locked_state", "state_lock", "remove_orphaned_temporaries",
    "lock_path",
    "LOCK_TIMEOUT",
]

LOCK_TIMEOUT = 60.0  # seconds a writer waits for another process before giving up with an error
_POLL = 0.002
_TMP_SUFFIX = ".tmp"


def lock_path(path) -> str:
    """The sidecar lock file of a state file: ``<path>.lock``."""
    return os.fspath(path) + ".lock"


def _tmp_prefix(path: str) -> str:
    return "." + os.path.basename(path) + "."


def remove_orphaned_temporaries(path) -> int:
    """Delete temporary files :func:`write_json_atomically` left for ``path`` (a writer was killed).

    Call only while holding :func:`locked_state` for ``path``: every writer of ``path`` in this
    package writes under that lock, so any temporary file of ``path`` found then is an orphan.

    Returns:
        The number of files removed.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    prefix = _tmp_prefix(path)
    removed = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for name in names:
        if name.startswith(prefix) and name.endswith(_TMP_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))
                removed += 1
    return removed


def _filelock():
    try:
        import filelock
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise ImportError("filelock is missing (process-safe state files need it): pip install filelock") from exc
    return filelock


def state_lock(path, *, timeout: float = LOCK_TIMEOUT):
    """A reusable ``filelock.FileLock`` on ``<path>.lock`` for :func:`locked_state` (one per owner object).

    Each thread holding it uses its own descriptor, so threads and processes exclude each other.
    """
    return _filelock().FileLock(lock_path(path), timeout=timeout)


@contextlib.contextmanager
def locked_state(path, *, timeout: float = LOCK_TIMEOUT, lock=None):
    """Hold the OS file lock of the state file ``path``; clean its orphaned temporaries first.

    Every read-check-write of a shared state file runs inside this context, re-reading the file
    after the lock is taken. ``lock`` is a :func:`state_lock` to reuse (saves building one per call).

    Raises:
        TimeoutError: another process held the lock for longer than ``timeout`` seconds
            (``filelock.Timeout`` is a ``TimeoutError``).
        ImportError: the ``filelock`` package is missing.
    """
    filelock = _filelock()
    if lock is None:
        lock = state_lock(path, timeout=timeout)
    try:
        lock.acquire(timeout=timeout, poll_interval=_POLL)
    except filelock.Timeout as exc:
        raise TimeoutError(
            f"could not lock {os.fspath(path)!s} within {timeout:g} s: another process holds {lock_path(path)}; "
            "nothing was read, charged or written. Retry, or find the process that is stuck holding the lock"
        ) from exc
    try:
        remove_orphaned_temporaries(path)
        yield
    finally:
        lock.release()


def write_json_atomically(path, data, **json_kwargs) -> None:
    """Write ``data`` as JSON to ``path`` via a temporary file, fsync and an atomic rename.

    The directory is fsynced too, so the rename itself survives a crash. Non-finite floats are
    refused (``allow_nan=False``): a state file never holds ``NaN`` or ``Infinity``. Concurrent
    writers must hold :func:`locked_state`.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    json_kwargs.setdefault("allow_nan", False)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=_tmp_prefix(path), suffix=_TMP_SUFFIX)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, **json_kwargs)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - file systems that refuse fsync on directories
        pass
    finally:
        os.close(fd)


def read_json_strictly(path, what: str) -> object:
    """Read a UTF-8 JSON file; NaN / Infinity literals and non-UTF-8 bytes are errors naming the file.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a directory, not UTF-8, not JSON, NaN / Infinity literals, or a number too long to parse.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"{what} file {path!s} is a directory; pass the path of the {what} JSON file itself, "
                         "not of the directory that holds it")

    def _no_constant(name):
        raise ValueError(f"the non-finite number {name} is not allowed")

    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} file {path!s} is not UTF-8 text ({exc}); it was not written by tfdpmech") from exc
    try:
        return json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError, so is int's digit limit
        raise ValueError(f"{what} file {path!s} is not valid JSON: {exc}") from exc
