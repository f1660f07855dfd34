"""The data-source benchmark: a DP fit from a NumPy memmap against the same records in memory, the same run."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from tfdpmech.cli_args import add_bench_arguments
from tfdpmech.experiments import source_bench


@pytest.mark.slow  # four DP fits of five epochs (about 25 s)
def test_the_memmap_and_the_memory_fit_are_one_run_and_the_table_reports_the_ratio(monkeypatch):
    fits = []
    fit = source_bench._fit
    monkeypatch.setattr(source_bench, "_fit", lambda *a, **k: fits.append(type(a[1])) or fit(*a, **k))
    result = source_bench.run(models=("tanh_mlp",), n=640, batch=64, repeats=2, log=lambda *_: None)
    assert fits == [np.ndarray, np.memmap, np.memmap, np.ndarray]  # interleaved, the order alternating
    row = result["models"]["tanh_mlp"]
    for key in ("memory_examples_per_second", "memmap_examples_per_second", "memmap_over_memory"):
        assert 0 < row[key]["min"] <= row[key]["median"] <= row[key]["max"]
    assert result["n"] == 640 and "| tanh_mlp |" in source_bench.format_table(result)
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    assert parser.parse_args(["--no-sources"]).no_sources and not parser.parse_args([]).no_sources
