"""What the runner measures around a training: the device, the peak memory, each epoch's time and accuracy."""

from __future__ import annotations

import ctypes
import os
import platform
import threading
import time
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from ..cpu_malloc import malloc_description
from .peak_rss import peak_rss_mib, reset_peak_rss
from ..mechanisms.dpsgd.runs.weight_average import scoring_the_average

__all__ = ["device_description", "PeakMemory", "EpochRecorder", "TrainingLoopClock", "median_range",
           "format_median_range"]


def device_description() -> str:
    """``"GPU: <name>"`` when TensorFlow sees a GPU, else ``"CPU: <processor>, N cores"``."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        return f"GPU: {details.get('device_name', gpus[0].name)}"
    return f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores ({malloc_description()})"


def median_range(values) -> dict:
    """``{"median", "min", "max"}`` of repeated measurements."""
    v = np.asarray(values, float)
    return {"median": float(np.median(v)), "min": float(v.min()), "max": float(v.max())}


def format_median_range(summary: dict | None) -> str:
    """A :func:`median_range` as ``"median [min–max]"`` (3 significant digits); ``"–"`` for none."""
    if not summary:
        return "–"
    return f"{summary['median']:.3g} [{summary['min']:.3g}–{summary['max']:.3g}]"


class TrainingLoopClock(keras.callbacks.Callback):
    """The seconds of one ``fit``'s training loop, ``on_train_begin`` to ``on_train_end`` (``seconds``): without
    the teardown of its ``tf.data`` iterator, which can wait for tf.data's autotuning thread
    (:func:`~tfdpmech.input_pipeline.without_autotune`)."""

    def on_train_begin(self, logs=None):
        self.start = time.perf_counter()

    def on_train_end(self, logs=None):
        self.seconds = time.perf_counter() - self.start


def _release_freed_memory() -> None:
    """glibc's ``malloc_trim(0)``: freed heap memory back to the system (nothing elsewhere)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (macOS, musl): RSS growth as it is
        pass


class PeakMemory:
    """Peak memory of a block: the GPU allocator's peak, or the growth of the process RSS over the block.

    On a CPU the process RSS is sampled every ``interval`` seconds and the value reported is the
    peak *minus the RSS at the start of the block*, so memory held by earlier runs in the same
    process is not charged to this one (``make bench`` measures each method in a fresh process).
    Before the block starts, the C allocator returns the memory earlier runs freed to the system
    (glibc's ``malloc_trim``, where there is one): otherwise a later run would reuse it unseen and
    report less growth than the same run first in its process. On Linux the kernel's own high-water
    mark of the RSS is reset at the start of the outermost block and read at its end, so a peak
    shorter than the sampling interval is not missed (an inner block samples only).
    """

    _open_blocks = 0  # the outermost block alone resets the kernel's high-water mark

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.peak_bytes = 0
        self._gpu = bool(tf.config.list_logical_devices("GPU"))

    def __enter__(self):
        if self._gpu:
            tf.config.experimental.reset_memory_stats("GPU:0")
            return self
        import psutil

        _release_freed_memory()
        self._proc = psutil.Process()
        self._stop = threading.Event()
        self._start = self._peak = self._proc.memory_info().rss
        self._kernel_peak = PeakMemory._open_blocks == 0 and reset_peak_rss()
        PeakMemory._open_blocks += 1
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(self.interval):
            self._peak = max(self._peak, self._proc.memory_info().rss)

    def so_far(self) -> int:
        """The peak so far, inside the block (what :attr:`peak_bytes` would be if it ended now)."""
        if self._gpu:
            return int(tf.config.experimental.get_memory_info("GPU:0")["peak"])
        return int(max(self._peak, self._proc.memory_info().rss) - self._start)

    def __exit__(self, *exc):
        if self._gpu:
            self.peak_bytes = int(tf.config.experimental.get_memory_info("GPU:0")["peak"])
        else:
            self._stop.set()
            self._thread.join()
            PeakMemory._open_blocks -= 1
            self._peak = max(self._peak, self._proc.memory_info().rss)
            if self._kernel_peak:
                self._peak = max(self._peak, int(peak_rss_mib() * 2**20))
            self.peak_bytes = int(self._peak - self._start)
        return False

    @property
    def kind(self) -> str:
        return "gpu_allocator_peak" if self._gpu else "process_rss_growth"


class EpochRecorder(keras.callbacks.Callback):
    """Train time of every epoch, and test accuracy (argmax of ``scores(x_test)``) every ``every`` epochs.

    The evaluation time is not counted in the epoch's time. ``before``: what the earlier parts of a resumed run
    recorded (:meth:`.run_parts.RunParts.restore`); its epochs count on from theirs. ``part_starts``: the epochs
    (from 0) each part began with, whose time includes tracing the model.
    """

    def __init__(self, x_test, labels, scores: Callable, on_epoch: Callable[[int, float], None] | None = None,
                 every: int = 1, before: dict | None = None):
        super().__init__()
        self.x_test, self.labels, self.scores, self.on_epoch = x_test, labels, scores, on_epoch
        self.every = max(int(every), 1)
        before = before or {}
        self.offset = int(before.get("epochs_done", 0))
        self.seconds: list[float] = list(before.get("seconds", ()))
        self.accuracy: list[float] = list(before.get("accuracy", ()))
        self.epochs: list[int] = list(before.get("curve_epochs", ()))
        self.part_starts: list[int] = sorted({*before.get("part_starts", (0,)), self.offset})

    def adopt(self, curve: dict) -> None:
        """Take a run's own record in place of this one's: ``epochs``, ``accuracy``, ``seconds`` and
        ``part_starts`` (indices into ``seconds``), as a run that evaluates and resumes itself keeps them."""
        self.epochs, self.accuracy = list(curve["epochs"]), list(curve["accuracy"])
        self.seconds, self.part_starts = list(curve["seconds"]), list(curve["part_starts"])

    def steady_seconds(self) -> list[float]:
        """The epochs' seconds but those of each part's first epoch (tracing); all of them when no other is left."""
        return [s for i, s in enumerate(self.seconds) if i not in self.part_starts] or self.seconds

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self._start)
        epoch += self.offset
        if (epoch + 1) % self.every:
            return
        self.epochs.append(epoch + 1)
        with scoring_the_average(getattr(self, "model", None)):  # a run that averages its weights is scored on the average
            scores = self.scores(self.x_test)
        self.accuracy.append(float(np.mean(np.argmax(scores, axis=-1) == self.labels)))
        if self.on_epoch:
            self.on_epoch(epoch + 1, self.accuracy[-1])
