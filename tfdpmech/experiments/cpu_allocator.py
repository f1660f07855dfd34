"""glibc's malloc settings for training on a CPU: a step's large buffers kept for the next step.

On Linux with glibc, TensorFlow's CPU tensors come from ``malloc``. With glibc's defaults a request above its mmap
threshold (at most 32 MiB), or one that a thread's own arena cannot hold, gets fresh pages from the kernel that
``free`` hands back, so every step of a deep network faults its activations in again, page by page, each page
zeroed by the kernel. A DP-SGD step holds more such buffers than a non-private one (each layer's activations and
output gradients of a chunk, for its norms), so it pays more. :data:`TRAINING_TUNABLES` turns this off: no mmap
(``mmap_max=0``), one arena (``arena_max=1``: a thread's arena would otherwise hand its pages back when it
shrinks), trimming only above 16 GiB and a 256 MiB top pad, so the heap grows to the run's peak and later steps
reuse it. The cost: the process keeps its peak memory until it ends (an explicit ``malloc_trim``, as
:class:`~tfdpmech.experiments.measuring.PeakMemory` calls, still returns it), and with one arena every thread
allocates from the same heap, which was measured on two cores only.

glibc reads ``GLIBC_TUNABLES`` when a process starts, so it is set in the environment of the command
(``make demo``, ``make bench`` and ``make quick`` do; ``GLIBC_TUNABLES="$(make -s malloc-tunables)" tfdpmech
compare ...`` for another command). Measured with and without it: docs/results/cpu_allocator
(``tools/cpu_allocator_speed.py``: MobileNetV2 in chunks of 256 records; ``python -m
tfdpmech.experiments.dpsgd_speed``: MobileNetV2 at batch 64 and the tanh CNN at 512).
"""

from __future__ import annotations

import os
import platform
import sys

__all__ = ["TRAINING_TUNABLES", "allocator_description"]

TRAINING_TUNABLES = ("glibc.malloc.mmap_max=0:glibc.malloc.arena_max=1:glibc.malloc.trim_threshold=17179869184:"
                     "glibc.malloc.top_pad=268435456")


def allocator_description() -> str:
    """How this process allocates memory, for a report's timings: ``GLIBC_TUNABLES`` or a preloaded allocator
    when set, glibc's or the platform's defaults otherwise."""
    preload = os.environ.get("LD_PRELOAD", "")
    if any(name in preload for name in ("jemalloc", "tcmalloc", "mimalloc")):
        return f"malloc: LD_PRELOAD={preload}"
    tunables = os.environ.get("GLIBC_TUNABLES")
    if tunables:
        return "malloc: glibc, tfdpmech's training tunables" if tunables == TRAINING_TUNABLES else (
            f"malloc: glibc, GLIBC_TUNABLES={tunables}")
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        return "malloc: glibc's defaults"
    return "malloc: the platform's"
