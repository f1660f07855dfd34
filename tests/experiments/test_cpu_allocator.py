"""glibc's malloc settings for training on a CPU (tfdpmech.experiments.cpu_allocator)."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tfdpmech.experiments.cpu_allocator import TRAINING_TUNABLES, allocator_description

ROOT = Path(__file__).resolve().parents[2]
GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"

# a 64 MiB buffer allocated, written and freed five times; the page faults of the last four rounds
_ROUNDS = """
import ctypes, resource
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
size = 64 << 20
def once():
    p = libc.malloc(size)
    ctypes.memset(p, 1, size)
    libc.free(ctypes.c_void_p(p))
once()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    once()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(tunables: str) -> int:
    env = {**os.environ, "GLIBC_TUNABLES": tunables}
    env.pop("LD_PRELOAD", None)
    out = subprocess.run([sys.executable, "-c", _ROUNDS], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def test_the_makefile_runs_the_trainings_with_the_same_tunables():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^MALLOC_TUNABLES := (\S+)$", makefile, re.M).group(1) == TRAINING_TUNABLES
    for target in ("demo", "quick", "bench"):
        recipe = re.search(rf"^{target}: .*\n\t(.*)$", makefile, re.M).group(1)
        assert recipe.startswith("$(TRAIN_ENV) "), (target, recipe)


@pytest.mark.skipif(not GLIBC, reason="glibc's tunables: Linux with glibc only")
def test_with_the_tunables_a_freed_large_buffer_is_reused_without_faulting_its_pages_in_again():
    pages = (64 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert _faults("") >= 4 * pages * 0.9  # glibc's defaults: fresh pages from the kernel every round
    assert _faults(TRAINING_TUNABLES) < pages * 0.1  # kept in the heap: the rounds reuse it


def test_the_description_names_what_the_process_runs_with(monkeypatch):
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.setenv("GLIBC_TUNABLES", TRAINING_TUNABLES)
    assert allocator_description() == "malloc: glibc, tfdpmech's training tunables"
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    assert allocator_description() == "malloc: glibc, GLIBC_TUNABLES=glibc.malloc.arena_max=2"
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/libtcmalloc.so.4")
    assert allocator_description() == "malloc: LD_PRELOAD=/usr/lib/libtcmalloc.so.4"
    monkeypatch.delenv("LD_PRELOAD")
    monkeypatch.delenv("GLIBC_TUNABLES")
    assert allocator_description() == ("malloc: glibc's defaults" if GLIBC else "malloc: the platform's")
