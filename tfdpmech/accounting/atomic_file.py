"""Crash-safe JSON files: a reader sees the old content or the new one, never half of it."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile

__all__ = ["write_json_atomically"]


def write_json_atomically(path, data, **json_kwargs) -> None:
    """Write ``data`` as JSON to ``path`` via a temporary file, fsync and an atomic rename.

    The directory is fsynced too, so the rename itself survives a crash.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tfdpmech-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as fh:
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
