"""The peak resident memory of this process, measured so that a parent's peak does not leak in.

``resource.getrusage(RUSAGE_SELF).ru_maxrss`` survives ``execve`` on Linux: a fresh process started
by a large parent (the bench, after its training runs) reports the parent's peak until it exceeds
it. ``VmHWM`` in ``/proc/self/status`` is the high-water mark of this process's own address space,
which ``execve`` replaces, so it is used where it exists; ``ru_maxrss`` elsewhere. On Linux the mark can be reset
(:func:`reset_peak_rss`), so that it is the peak of one block of work.
"""

from __future__ import annotations

import resource
import sys

__all__ = ["peak_rss_mib", "reset_peak_rss"]


def peak_rss_mib() -> float:
    """This process's peak resident set size in MiB (``VmHWM`` on Linux, else ``ru_maxrss``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024.0  # bytes on macOS, KiB elsewhere


def reset_peak_rss() -> bool:
    """Linux: reset ``VmHWM`` to the current RSS (``/proc/self/clear_refs``); False where it cannot be reset."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        with open("/proc/self/status", encoding="ascii") as status:
            return any(line.startswith("VmHWM:") for line in status)
    except OSError:
        return False
