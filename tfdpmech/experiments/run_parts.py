"""The finished epochs of a run in progress, saved as it trains, so that a run stopped part-way resumes.

A comparison with ``resume`` on keeps each finished run in ``runs.jsonl`` (:mod:`.run_store`); a run trained
through ``make_private`` / ``compile`` / ``fit`` (every DP-SGD run on tfdpmech's engine) also saves, at the end
of each epoch, its model's and optimizer's variables and what the runner has measured so far, to
``<out>/parts/<run key>.npz``. Started again, the runner prepares the run as before (the same mechanism, seed
and budget), puts the saved variables back — the optimizer's step count with them — and trains the epochs left.
A Poisson DP-SGD run draws the batch and the noise of step t from its secret key and t (a user-level run
recounts its users' record cycles from them), so the resumed run is the run an unbroken one would have been:
one release, recorded once in its ledger, the same ε. Every iterate of DP-SGD is covered by that ε, so the saved
variables are too; the steps of an epoch cut short are drawn again with the same batches and noise on the same
records (the same outputs, nothing more released). The file is removed once the run is stored; one that no
longer fits the model (another number or shape of variables, other epochs) is removed and the run starts again.

Train seconds and the accuracy curve add up over the parts; peak memory is the largest part's; examples per
second leave out each part's first epoch (it traces the model again); the run's notes say how many processes
trained it (``trained_in_parts``).

While a process trains a run it holds the run's lock (``<out>/parts/<run key>.lock``, an advisory ``flock``
that the system releases when the process ends, however it ends): a second process started on the same run is
refused before it prepares anything, instead of training the same epochs again beside the first.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import warnings
from pathlib import Path

try:
    import fcntl
except ImportError:  # not a POSIX system: runs are not locked
    fcntl = None

import keras
import numpy as np

from ..mechanisms.dpsgd.runs.train_step import build_optimizer

__all__ = ["RunParts", "PARTS_FOLDER"]

PARTS_FOLDER = "parts"


def _optimizer_variables(optimizer) -> list:
    variables = optimizer.variables  # a property on Keras 3, a method on Keras 2
    return list(variables() if callable(variables) else variables)


def _variables(model) -> list:
    """Every variable a resumed run needs back: the model's (weights, statistics, random states) and its
    optimizer's (the step count, the moments), the optimizer built first."""
    build_optimizer(model)
    return [*model.variables, *_optimizer_variables(model.optimizer)]


class RunParts:
    """The saved part of the run stored under ``key`` in ``folder`` (see the module's docstring)."""

    def __init__(self, folder, key: str):
        self.path = Path(folder) / PARTS_FOLDER / f"{key}.npz"
        self.lock_path = self.path.with_suffix(".lock")

    @contextlib.contextmanager
    def held(self, name: str | None = None):
        """Hold this run's lock while the block trains it; ``name``: the run's words in the error.

        Raises:
            RuntimeError: another process holds it (it is training this run now).
        """
        if fcntl is None:
            yield
            return
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            handle = open(self.lock_path, "a+")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                handle.close()
                raise RuntimeError(f"{name or 'run ' + self.path.stem}: process {holder} is training it now (it "
                                   f"holds {self.lock_path}); wait for it to finish, or stop it, before starting "
                                   "this run again") from None
            try:  # the holder before us may have removed the file after we opened it: lock the file on disk
                same = os.path.samestat(os.fstat(handle.fileno()), os.stat(self.lock_path))
            except FileNotFoundError:
                same = False
            if same:
                break
            handle.close()
        try:
            handle.truncate(0)
            handle.write(str(os.getpid()))
            handle.flush()
            yield
        finally:
            self.lock_path.unlink(missing_ok=True)  # still locked: no one else can hold this file meanwhile
            handle.close()

    def saved(self) -> dict | None:
        """What the saved part measured (see :meth:`restore`), without a model; None when there is none."""
        if not self.path.exists():
            return None
        with np.load(self.path, allow_pickle=False) as saved:
            return json.loads(str(saved["measured"]))

    def restore(self, model, epochs: int) -> dict | None:
        """Put a saved part back into the freshly prepared ``model`` of a run of ``epochs`` epochs.

        Returns:
            what the part measured (``epochs_done``, ``train_seconds``, ``peak_memory_bytes``, ``parts``,
            ``seconds``, ``accuracy``, ``curve_epochs``, ``part_starts``), or None when there is no part, or it
            does not fit this run (then it is removed: the run starts from its first epoch).
        """
        measured = self.saved()
        if measured is None:
            return None
        with np.load(self.path, allow_pickle=False) as saved:
            arrays = [saved[f"v{i}"] for i in range(measured["variables"])]
        variables = _variables(model)
        fits = (measured["epochs"] == epochs and 0 < measured["epochs_done"] < epochs
                and len(arrays) == len(variables)
                and all(tuple(a.shape) == tuple(v.shape) for a, v in zip(arrays, variables)))
        if not fits:
            warnings.warn(f"{self.path} holds {measured['epochs_done']} of {measured['epochs']} epochs of "
                          f"{measured['variables']} variables; this run has {epochs} epochs and {len(variables)} "
                          "variables: the saved part is removed and the run starts from its first epoch",
                          stacklevel=2)
            self.clear()
            return None
        for variable, value in zip(variables, arrays):
            variable.assign(value)
        return measured

    def saver(self, model, epochs: int, recorder, before: dict | None, peak_bytes):
        """A callback that saves the run at the end of each epoch but its last; ``recorder``: the runner's
        :class:`~.measuring.EpochRecorder`; ``before``: what :meth:`restore` returned; ``peak_bytes()``: this
        part's peak memory so far."""
        return _SaveEachEpoch(self, model, epochs, recorder, before or {}, peak_bytes)

    def save(self, model, measured: dict) -> None:
        """Write ``model``'s variables and ``measured`` at once (a kill mid-write leaves the previous part)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        variables = _variables(model)
        arrays = {f"v{i}": np.asarray(v.numpy()) for i, v in enumerate(variables)}
        partial = self.path.with_suffix(".partial.npz")
        np.savez(partial, measured=np.array(json.dumps({**measured, "variables": len(variables)})), **arrays)
        os.replace(partial, self.path)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


class _SaveEachEpoch(keras.callbacks.Callback):
    def __init__(self, parts: RunParts, model, epochs: int, recorder, before: dict, peak_bytes):
        super().__init__()
        self.parts, self.run_model, self.epochs, self.recorder = parts, model, epochs, recorder
        self.before, self.peak_bytes, self.started = before, peak_bytes, time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        done = self.before.get("epochs_done", 0) + epoch + 1
        if done >= self.epochs:  # the run ends now: the runner stores it
            return
        self.parts.save(self.run_model, {
            "epochs": self.epochs, "epochs_done": done, "parts": self.before.get("parts", 0) + 1,
            "train_seconds": self.before.get("train_seconds", 0.0) + time.perf_counter() - self.started,
            "peak_memory_bytes": max(self.before.get("peak_memory_bytes", 0), self.peak_bytes()),
            "seconds": list(self.recorder.seconds), "accuracy": list(self.recorder.accuracy),
            "curve_epochs": list(self.recorder.epochs), "part_starts": list(self.recorder.part_starts)})
