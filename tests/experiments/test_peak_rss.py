"""The bench's peak memory is the measured process's own, not a large parent's."""

import os
import subprocess
import sys

import numpy as np
import pytest

import tfdpmech.experiments.peak_rss as peak_rss

CHILD = ("import importlib.util, resource; spec = importlib.util.spec_from_file_location('p', {path!r}); "
         "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
         "print(m.peak_rss_mib(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="VmHWM is Linux's")
def test_a_fresh_process_does_not_inherit_its_parents_peak():
    hold = np.ones(400 * 2**20 // 8)  # the parent's RSS is now at least 400 MiB above a bare interpreter
    out = subprocess.run([sys.executable, "-c", CHILD.format(path=peak_rss.__file__)], capture_output=True,
                         text=True, check=True).stdout.split()
    own, inherited = float(out[0]), float(out[1])
    assert own < 150, own  # a bare interpreter: tens of MiB
    assert inherited > own  # ru_maxrss carries the parent's peak across exec: why it is not used
    del hold


@pytest.mark.skipif(not peak_rss.reset_peak_rss(), reason="the kernel's high-water mark is reset on Linux only")
def test_a_block_reports_a_peak_shorter_than_its_sampling_interval():
    from tfdpmech.experiments.measuring import PeakMemory

    with PeakMemory(interval=60.0) as memory:  # no sample is taken inside the block
        spike = np.ones(300 * 2**20 // 8)  # 300 MiB, touched, then freed at once
        del spike
    assert memory.peak_bytes > 250 * 2**20, memory.peak_bytes
