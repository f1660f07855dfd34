"""Printed ε errs on the safe side: upper bounds round up, lower bounds down; δ keeps its digits."""

import pytest

from tfdpmech.accounting.display import delta_text, epsilon_lower, epsilon_upper
from tfdpmech.report.tables import epsilon_cells, lower_bound_cell, markdown_table


@pytest.mark.parametrize("value, text", [(1.1113, "1.12"), (0.9999, "1"), (1.0, "1"), (0.3, "0.3"),
                                         (0.1 + 0.2, "0.3"), (11.1729, "11.18"), (0.075, "0.075"),
                                         (0.0123, "0.013"), (1000.0, "1000"), (0.0, "0"), (float("inf"), "∞")])
def test_an_upper_bound_on_epsilon_is_rounded_up(value, text):
    assert epsilon_upper(value) == text
    assert float(text.replace("∞", "inf")) >= value * (1 - 1e-12)  # never below what holds


@pytest.mark.parametrize("value, text", [(0.716, "0.71"), (0.7199, "0.71"), (1.1113, "1.11"), (0.0129, "0.012"),
                                         (2.0, "2"), (0.0, "0")])
def test_a_lower_bound_on_epsilon_is_rounded_down(value, text):
    assert epsilon_lower(value) == text
    assert float(text) <= value


@pytest.mark.parametrize("value, text", [(1e-5, "1e-05"), (1.5e-6, "1.5e-06"), (0.0, "0"), (0.5, "0.5"),
                                         (1 / 7000**2, "2.041e-08"), (3 * 1e-5, "3e-05")])
def test_delta_keeps_its_digits(value, text):
    assert delta_text(value) == text  # 1.5e-06 is not rounded to 2e-06; 1/n² beyond four digits is rounded up
    assert float(text) >= value * (1 - 1e-12)


@pytest.mark.parametrize("bad, exc", [(-1.0, ValueError), (float("nan"), ValueError), ("1", TypeError),
                                      (True, TypeError)])
def test_formatters_refuse_what_is_not_an_epsilon(bad, exc):
    for fmt in (epsilon_upper, epsilon_lower, delta_text):
        with pytest.raises(exc):
            fmt(bad)


def _row(**kw):
    row = {"dataset": "mnist_sample", "method": "m", "mode": "private", "epsilon_target": 1.0,
           "epsilon_claimed": 1.1113, "epsilon_provable": 1.1113, "delta": 1.5e-6, "private": True, "per": "training",
           "conditional_on": [], "canary": {"epsilon_lower_bound": 0.716, "correct": 240, "k_plus": 125,
                                            "k_minus": 125, "m": 1000},
           "audit_verdict": None, "accuracy_mean": 0.9, "accuracy_std": 0.01, "seeds": 2, "diverged": 0,
           "accuracy_loss": 0.01, "mia_advantage": 0.02, "train_seconds": 1.0, "examples_per_second": 100.0,
           "preprocessing_seconds": 0.1, "peak_memory_mb": 10.0}
    row.update(kw)
    return row


def test_the_table_rounds_each_epsilon_towards_safety():
    row = _row()
    assert epsilon_cells(row) == ("1.12", "1.12")  # rounded to nearest this would read 1.11
    assert lower_bound_cell(row).startswith("0.71 (240/250, m=1000)")  # not 0.716 → 0.72
    table = markdown_table([row])
    assert "| 1.12 | 1.12 |" in table and "| 0.71 (240/250, m=1000) | 1.5e-06 |" in table
    assert "| 0 |" in markdown_table([_row(delta=0.0)])  # pure ε: δ = 0, not "0e+00"
    assert epsilon_cells(_row(epsilon_provable=0.9999, per="query")) == ("1.12 per query", "1 per query")


def test_audit_findings_print_conservative_numbers(monkeypatch):
    import tfdpmech.report.writer as writer

    finding = {"verdict": writer.VERDICT_BUG, "dataset": "d", "method": "m", "epsilon_target": 1.0, "seed": 0,
               "epsilon_claimed": 1.0, "epsilon_provable": 0.9999, "per": "training", "epsilon_lower_bound": 1.0049}
    monkeypatch.setattr(writer, "audit_findings", lambda results: [finding])
    text = "\n".join(writer.findings_markdown({"runs": []}))
    assert "audited ε lower bound 1 > provable ε 1." in text  # 1.0049 down, 0.9999 up: never overstated
