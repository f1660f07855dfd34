"""glibc's malloc set for training when tfdpmech is imported (tfdpmech.cpu_malloc), and the opt-out."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tfdpmech import cpu_malloc

ROOT = Path(__file__).resolve().parents[1]
GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"

# tfdpmech imported, then a 64 MiB buffer allocated, written and freed five times; the page faults of the last four
_ROUNDS = """
import ctypes, resource
import tfdpmech
libc = ctypes.CDLL(None)
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
print(tfdpmech.cpu_malloc.malloc_description())
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _run(choice: str | None) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "GLIBC_TUNABLES", cpu_malloc.MALLOC_ENV)}
    if choice is not None:
        env[cpu_malloc.MALLOC_ENV] = choice
    out = subprocess.run([sys.executable, "-c", _ROUNDS], env=env, capture_output=True, text=True, check=True)
    description, faults = out.stdout.strip().splitlines()[-2:]
    return description, int(faults)


@pytest.mark.skipif(not GLIBC, reason="mallopt: Linux with glibc only")
def test_importing_tfdpmech_keeps_a_freed_large_buffer_for_the_next_step_unless_told_not_to():
    pages = (64 << 20) // os.sysconf("SC_PAGE_SIZE")
    description, faults = _run(None)
    assert description == "malloc: glibc, tfdpmech's training settings (mallopt)"
    assert faults < pages * 0.1  # kept in the heap: the rounds reuse it
    description, faults = _run("default")
    assert description == "malloc: glibc's defaults (TFDPMECH_MALLOC=default)"
    assert faults >= 4 * pages * 0.9  # glibc's defaults: fresh pages from the kernel every round


def test_an_unknown_choice_is_refused_by_name(monkeypatch):
    with pytest.raises(ValueError, match=r"choice='fast': use 'training' .* or 'default'"):
        cpu_malloc.apply_malloc_settings("fast")
    monkeypatch.setenv(cpu_malloc.MALLOC_ENV, "off")
    with pytest.raises(ValueError, match=r"\$TFDPMECH_MALLOC='off': use 'training'"):
        cpu_malloc.apply_malloc_settings()


def test_a_choice_made_outside_is_kept_and_named(monkeypatch):
    before = cpu_malloc.malloc_description()
    try:
        monkeypatch.delenv("LD_PRELOAD", raising=False)
        monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
        assert cpu_malloc.apply_malloc_settings() == "malloc: glibc, GLIBC_TUNABLES=glibc.malloc.arena_max=2"
        monkeypatch.setenv("LD_PRELOAD", "/usr/lib/libtcmalloc.so.4")
        assert cpu_malloc.apply_malloc_settings("training") == "malloc: LD_PRELOAD=/usr/lib/libtcmalloc.so.4"
    finally:
        cpu_malloc._state["description"] = before


def test_the_makefile_runs_demo_quick_and_bench_as_a_users_process():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("demo", "quick", "bench"):
        recipe = re.search(rf"^{target}: .*\n\t(.*)$", makefile, re.M).group(1)
        assert recipe.startswith("$(VENV)/bin/tfdpmech "), (target, recipe)  # no environment variable of its own
