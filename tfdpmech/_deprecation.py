"""Old import paths kept for one release: one warning per old path and process.

A module that moved leaves a thin module at its old path that re-exports the public names of the
new one and calls :func:`warn_moved` once at import. The package's own code never imports such a
module (``tests/test_deprecated_paths.py`` checks it). An old spelling of a call (keyword arguments
that moved into an options object) warns once per process through :func:`warn_once`.
"""

from __future__ import annotations

import threading
import warnings

__all__ = ["warn_moved", "moved_message", "warn_once", "check_former_keywords", "warn_former_keywords"]

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
    warn_once(old, moved_message(old, new), stacklevel=stacklevel)


def warn_once(key: str, message: str, *, stacklevel: int = 2) -> None:
    """Warn ``message`` (a ``DeprecationWarning``) the first time ``key`` is seen in this process.

    ``stacklevel`` counts from the caller of :func:`warn_once`, as for :func:`warnings.warn`.
    """
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, DeprecationWarning, stacklevel=stacklevel + 1)


def check_former_keywords(owner: str, former: dict, allowed, *, argument: str, options: str, given: bool) -> None:
    """Refuse the keywords ``former`` that ``owner()`` never took, or that come with the new ``argument``.

    Args:
        owner: the class whose constructor was called (for the messages).
        former: the keyword arguments the constructor did not name itself.
        allowed: the former keywords ``owner`` accepted (now fields of the options class ``options``).
        argument: the constructor's argument that takes an ``options`` object.
        given: whether that argument was given as an ``options`` object.

    Raises:
        TypeError: an unknown keyword, or an ``options`` object together with former keywords.
    """
    unknown = sorted(set(former) - set(allowed))
    if unknown:
        raise TypeError(f"{owner}() got an unexpected keyword argument {unknown[0]!r}")
    if given and former:
        raise TypeError(
            f"{owner}() got {argument}={options}(...) and the keyword(s) {sorted(former)}, which are fields of "
            f"{options}; pass them inside {argument}={options}(...) only"
        )


def warn_former_keywords(owner: str, former: dict, new_call: str, where: str, allowed, *, kind: str,
                         stacklevel: int) -> None:
    """Warn once per ``owner``, ``kind`` of keywords and process that ``owner(<former keywords>)`` is now
    ``owner(<new_call>)`` (the once-key is ``"<owner>(**<kind> keywords)"``).

    ``new_call`` is the new spelling with ``{used}`` where the keywords go (``"optimizer=OptimizerSettings('sgd',
    {used})"``); ``where`` names the options class's module; ``stacklevel`` counts from the caller.
    """
    used = ", ".join(f"{k}=..." for k in sorted(former))
    warn_once(
        f"{owner}(**{kind} keywords)",
        f"{owner}({used}) is now {owner}({new_call.format(used=used)}) ({where}); the keywords "
        f"{', '.join(allowed)} of {owner}() are kept for one release and will then be removed.",
        stacklevel=stacklevel + 1,
    )
