"""Finished runs of a comparison kept on disk, so that a long preset resumes where it stopped.

``<out>/runs.jsonl`` holds one JSON line per finished run (or per run skipped as not certifiable),
written and flushed to disk the moment the run ends. A comparison started again with ``resume``
on reads the file and does not run again what it finds there; a line cut short by a kill is
ignored (that run is simply run again). A run is found by its key: the dataset, method, ε and seed
together with every setting of the comparison that changes what the run computes (the model
family, epochs, batch size, learning rate, δ, public data, audits and the options the method reads,
as it declares them when registered), so changing a setting never returns a stale result, and a
preset's option for another method does not make a run stale.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .options import at_epsilon
from .registry import METHODS

__all__ = ["RunStore", "RUNS_FILE"]

RUNS_FILE = "runs.jsonl"

# the options every run reads (build_context caps the private and test sets with them)
DATA_OPTIONS = ("max_private", "max_test")
# the CompareConfig fields that change what a run computes
_RUN_SETTINGS = ("model", "epochs", "batch_size", "learning_rate", "delta", "public", "l2", "options", "audit")


def _read(options: dict, declared: tuple | None) -> dict:
    """The options a method reads: all when ``declared`` is None, else the declared names and the data caps; a
    name declared as ``"option[entry]"`` reads that entry of a dict option only (``{entry: value}``, or nothing
    when the option has no such entry), so another entry's change leaves the method's runs as they are."""
    if declared is None:
        return dict(options)
    read = {name: value for name, value in options.items() if name in declared or name in DATA_OPTIONS}
    for item in declared:
        name, _, entry = item.partition("[")
        if entry and isinstance(options.get(name), dict) and entry[:-1] in options[name]:
            read[name] = {entry[:-1]: options[name][entry[:-1]]}
    return read


class RunStore:
    """The finished runs in ``folder/runs.jsonl``; ``get`` one by its key, ``add`` one as it ends.

    ``enabled=False`` keeps nothing and finds nothing (a comparison without ``resume``).
    """

    def __init__(self, folder, config, *, enabled: bool = True):
        self.path = Path(folder) / RUNS_FILE
        self.enabled = enabled
        self._settings = {name: getattr(config, name) for name in _RUN_SETTINGS}
        self._done: dict[str, dict] = {}
        self.reload()

    def reload(self) -> None:
        """Read ``runs.jsonl`` again (another process may have stored runs since)."""
        if self.enabled and self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:  # the last line of a killed run: run it again
                    continue
                self._done[entry["key"]] = entry

    def key(self, dataset: str, method: str, epsilon, seed: int) -> str:
        settings = dict(self._settings)
        # a per-ε option ({ε: value}) counts for this run at its own ε only: choosing another ε's value
        # later does not make this run stale
        options = {name: at_epsilon(value, epsilon) for name, value in (settings["options"] or {}).items()}
        # only the options the method reads (and the data caps every run reads); one that says nothing at this
        # ε (a per-ε option without it) is as if absent
        declared = METHODS[method].options if method in METHODS else None
        settings["options"] = {name: value for name, value in _read(options, declared).items() if value is not None}
        what = {"dataset": dataset, "method": method, "epsilon": epsilon, "seed": seed, **settings}
        return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:20]

    def get(self, key: str) -> dict | None:
        """``{"run": result dict}`` or ``{"skipped": record}`` stored under ``key``, or None."""
        return self._done.get(key)

    def add(self, key: str, *, run: dict | None = None, skipped: dict | None = None) -> None:
        if not self.enabled:
            return
        entry = {"key": key, "run": run} if run is not None else {"key": key, "skipped": skipped}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, sort_keys=True, default=_plain) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._done[key] = entry

    def __len__(self) -> int:
        return len(self._done)


def _plain(value):
    """JSON for the numpy scalars and arrays a result may hold."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
