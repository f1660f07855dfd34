"""Old import paths kept for one release: one warning per old path and process.

A module that moved leaves a thin module at its old path that re-exports the public names of the
new one and calls :func:`warn_moved` once at import. The package's own code never imports such a
module (``tests/test_deprecated_paths.py`` checks it). An old spelling of a call (keyword arguments
that moved into an options object) warns once per process through :func:`warn_once`.
"""

from __future__ import annotations

import threading
import warnings

__all__ = ["warn_moved", "moved_message", "warn_once"]

_warned: set[str] = set()
_lock = threading.Lock()


def moved_message(old: str, new: str) -> str:
    """The text of the warning for ``old`` → ``new``."""
    return (f"{old} has moved to {new}; import from {new}. The old path {old} is kept for one release "
            "and will then be removed.")


def warn_moved(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn once per process that module ``old`` is now ``new`` (a ``DeprecationWarning``).

    Called at the top level of the module at the old path, the default ``stacklevel`` points at the
    line that imported it (the interpreter skips its own import machinery when counting frames).
    """
    with _lock:
        if old in _warned:
            return
        _warned.add(old)
    warnings.warn(moved_message(old, new), DeprecationWarning, stacklevel=stacklevel)


def warn_once(key: str, message: str, *, stacklevel: int = 2) -> None:
    """Warn ``message`` (a ``DeprecationWarning``) the first time ``key`` is seen in this process.

    ``stacklevel`` counts from the caller of :func:`warn_once`, as for :func:`warnings.warn`.
    """
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, DeprecationWarning, stacklevel=stacklevel + 1)
