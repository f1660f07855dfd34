"""The step-memory experiment: one clipped-sum step's RSS growth, the batch whole and in physical chunks."""

from __future__ import annotations

import json

import pytest

from tfdpmech.experiments import step_memory


@pytest.mark.slow  # four fresh processes, each importing TensorFlow and tracing a small CNN
def test_the_report_holds_a_measured_growth_per_model_rows_and_chunking(tmp_path):
    assert step_memory.main(["--models", "tanh_cnn", "--rows", "64,512", "--chunk", "32", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "results.json").read_text())
    table = result["models"]["tanh_cnn"]
    assert set(table) == {"64", "512"} and result["chunk"] == 32
    for cells in table.values():
        assert all(isinstance(v, int) and v > 0 for v in (cells["whole"], cells["chunked"])), cells
    # eight times the rows: the whole batch's activations grow with it, one chunk's do not
    assert table["512"]["whole"] > 2 * table["64"]["whole"], table
    assert table["512"]["whole"] > 2 * table["512"]["chunked"], table
    text = (tmp_path / "results.md").read_text()
    assert "| tanh_cnn |" in text and "512 rows, chunks of 32" in text and "--chunk 32" in text


@pytest.mark.parametrize("kwargs, exc, words", [
    ({"models": []}, ValueError, "models must name at least one"),
    ({"models": ["resnet5"]}, ValueError, "unknown: \\['resnet5'\\]"),
    ({"rows": (64, 0)}, ValueError, "rows"),
    ({"rows": ()}, ValueError, "rows must hold at least one"),
    ({"chunk": 0}, ValueError, "chunk"),
    ({"chunk": 1.5}, TypeError, "chunk"),
])
def test_bad_settings_are_refused_before_any_process_starts(monkeypatch, kwargs, exc, words):
    monkeypatch.setattr(step_memory, "_in_fresh_process", lambda *a: pytest.fail("a process was started"))
    with pytest.raises(exc, match=words):
        step_memory.run(**({"models": ["mlp"]} | kwargs), log=lambda *_: None)
