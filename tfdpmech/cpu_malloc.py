"""glibc's malloc set for training when tfdpmech is imported: a step's large buffers kept for the next step.

On Linux with glibc, TensorFlow's CPU tensors come from ``malloc``. With glibc's defaults a request above its mmap
threshold (at most 32 MiB), or one that a thread's own arena cannot hold, gets fresh pages from the kernel that
``free`` hands back, so every step of a deep network faults its activations in again, page by page, each page
zeroed by the kernel. A DP-SGD step holds more such buffers than a non-private one (each layer's activations and
output gradients, for its norms), so it pays more: a DP-SGD epoch of MobileNetV2 took 6.7 s (9.1 s of system CPU)
with the defaults and 2.3 s (0.2 s) with these settings given as ``GLIBC_TUNABLES`` (docs/results/cpu_allocator).

``import tfdpmech`` therefore calls glibc's ``mallopt`` (through ``ctypes``) with :data:`TRAINING_SETTINGS`: no
mmap for large blocks, one arena (a thread's arena would otherwise hand its pages back when it shrinks), trimming
only above 2 GiB (``mallopt`` takes an ``int``) and a 256 MiB top pad, so the heap grows to the run's peak and
later steps reuse it. The cost: the process keeps its peak memory until it ends (``malloc_trim(0)`` still returns
it, as :class:`~tfdpmech.experiments.measuring.PeakMemory` does), and with one arena every thread allocates from
the same heap. The same settings reach every process that imports tfdpmech: ``python train.py``, a Jupyter or
Colab kernel.

Nothing is changed where the user chose: ``TFDPMECH_MALLOC=default`` keeps glibc's settings; ``GLIBC_TUNABLES``
naming a ``glibc.malloc`` tunable, or an allocator in ``LD_PRELOAD`` (jemalloc, tcmalloc, mimalloc), is kept as
set; a C library other than glibc is left alone. :func:`malloc_description` says which applies (every timing
report states it).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

__all__ = ["MALLOC_ENV", "MALLOC_CHOICES", "TRAINING_SETTINGS", "apply_malloc_settings", "malloc_description"]

MALLOC_ENV = "TFDPMECH_MALLOC"
MALLOC_CHOICES = ("training", "default")
# mallopt's parameters (glibc's malloc.h) and the training values
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX, M_ARENA_MAX = -1, -2, -4, -8
TRAINING_SETTINGS = {M_MMAP_MAX: 0, M_ARENA_MAX: 1, M_TRIM_THRESHOLD: 2**31 - 1, M_TOP_PAD: 256 << 20}
_PRELOADED = ("jemalloc", "tcmalloc", "mimalloc")
_state = {"description": "malloc: not set by tfdpmech yet"}


def _glibc() -> bool:
    return sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def _chosen_elsewhere() -> str | None:
    preload = os.environ.get("LD_PRELOAD", "")
    if any(name in preload for name in _PRELOADED):
        return f"malloc: LD_PRELOAD={preload}"
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    if "glibc.malloc" in tunables:
        return f"malloc: glibc, GLIBC_TUNABLES={tunables}"
    return None


def apply_malloc_settings(choice: str | None = None) -> str:
    """Set glibc's malloc for training (``choice="training"``) or leave it (``"default"``); None reads
    ``$TFDPMECH_MALLOC`` (unset: ``"training"``). Returns :func:`malloc_description`.

    Raises:
        ValueError: ``choice`` (or the environment variable) is not one of :data:`MALLOC_CHOICES`.
    """
    from_env = choice is None
    if from_env:
        choice = os.environ.get(MALLOC_ENV) or "training"
    if choice not in MALLOC_CHOICES:
        where = f"${MALLOC_ENV}" if from_env else "choice"
        raise ValueError(f"{where}={choice!r}: use 'training' (tfdpmech's malloc settings for training, the default) "
                         f"or 'default' (the C library's own settings)")
    elsewhere = _chosen_elsewhere()
    if elsewhere is not None:
        _state["description"] = elsewhere
    elif choice == "default":
        _state["description"] = ("malloc: glibc's defaults" if _glibc() else "malloc: the platform's") + \
            f" ({MALLOC_ENV}=default)"
    elif not _glibc():
        _state["description"] = "malloc: the platform's (tfdpmech's settings are glibc's)"
    else:
        libc = ctypes.CDLL(None)
        failed = [param for param, value in TRAINING_SETTINGS.items() if libc.mallopt(param, value) != 1]
        _state["description"] = ("malloc: glibc, tfdpmech's training settings (mallopt)" if not failed
                                 else f"malloc: glibc, mallopt refused parameters {failed}")
    return _state["description"]


def malloc_description() -> str:
    """How this process allocates memory, for a report's timings."""
    return _state["description"]
