"""One updating progress line for a comparison: run i of n, epoch, accuracy, elapsed and ETA."""

from __future__ import annotations

import sys
import time

__all__ = ["Progress"]


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else \
        f"{seconds // 60}:{seconds % 60:02d}"


class Progress:
    """A progress bar over ``total`` units of work (epochs summed over runs), drawn on one line.

    On a terminal the line is redrawn in place (``\\r``); elsewhere (logs, CI) one line is written
    per finished run, so a log file does not fill with partial lines. ``verbose=0`` draws nothing.
    """

    def __init__(self, total: float, *, verbose: int = 1, stream=None, width: int = 24):
        self.total, self.verbose, self.width = max(float(total), 1e-9), verbose, width
        self.stream = stream or sys.stderr
        self.done = 0.0
        self.started = time.perf_counter()
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())

    def _line(self, label: str, detail: str) -> str:
        frac = min(self.done / self.total, 1.0)
        filled = int(round(frac * self.width))
        elapsed = time.perf_counter() - self.started
        eta = elapsed / self.done * (self.total - self.done) if self.done > 0 else float("nan")
        eta_text = _clock(eta) if eta == eta else "?"
        return (f"[{'=' * filled}{'.' * (self.width - filled)}] {100 * frac:3.0f}% {label} {detail} "
                f"| {_clock(elapsed)} elapsed, ETA {eta_text}")

    def update(self, units: float, label: str, detail: str = "") -> None:
        """Advance by ``units`` and redraw (terminal only)."""
        self.done += units
        if self.verbose and self.interactive:
            self.stream.write("\r\033[K" + self._line(label, detail))
            self.stream.flush()

    def finish_run(self, label: str, detail: str) -> None:
        """A run ended: redraw on a terminal, or write one line elsewhere."""
        if not self.verbose:
            return
        if self.interactive:
            self.stream.write("\r\033[K" + self._line(label, detail))
        else:
            self.stream.write(self._line(label, detail) + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.verbose and self.interactive:
            self.stream.write("\n")
            self.stream.flush()
