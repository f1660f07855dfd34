"""The warnings that make a privacy risk visible: a public quantity taken from private data, a mode with no proof.

:class:`PrivacyLeakWarning` is not a ``UserWarning``, so common filters do not hide it;
:func:`warn_unproven_mode` warns once per class and mode when a claimed-only mode is chosen.
"""

from __future__ import annotations

import warnings

__all__ = ["PrivacyLeakWarning", "UnprovenModeWarning", "warn_unproven_mode"]


class PrivacyLeakWarning(Warning):
    """Warned when a quantity that should be public is taken from the private data.

    It derives from ``Warning`` directly, not from ``UserWarning`` or ``RuntimeWarning``, so the
    common ``warnings.filterwarnings("ignore", category=UserWarning)`` (or numpy's
    ``RuntimeWarning`` noise filters) do not hide a leak.
    """


class UnprovenModeWarning(PrivacyLeakWarning):
    """Warned when a mechanism is built in a mode whose ε is claimed but none proven
    (``mode="reference"``, the paper's algorithm as published); once per class per process."""


_UNPROVEN_WARNED: set = set()  # the (class, mode) pairs already warned about in this process


def warn_unproven_mode(owner: str, mode: str, why: str | None = None) -> None:
    """Warn :class:`UnprovenModeWarning` the first time ``owner`` is built in ``mode`` (no proof) in this process.

    The proven mode is every mechanism's default; choosing another one must be explicit and visible.
    ``why`` replaces the default explanation for a class whose every mode is unproven.
    """
    if (owner, mode) in _UNPROVEN_WARNED:
        return
    _UNPROVEN_WARNED.add((owner, mode))
    why = why or ("runs the paper's algorithm as published: its ε is claimed, none proven (the ledger records it "
                  "so). The default mode='private' is the proven construction (the class's documentation states "
                  "what it proves)")
    warnings.warn(f"{owner}(mode={mode!r}) {why}; this warning is shown once per class, mode and process",
                  UnprovenModeWarning, stacklevel=3)
