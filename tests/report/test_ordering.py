"""The table says so when a private row or public_only beats the non-private reference; diverged runs are marked."""

from tfdpmech.report.tables import markdown_table, ordering_notes


def _row(method, accuracy, *, mode="private", eps=1.0, unused=False, diverged=0, dataset="d"):
    return {"dataset": dataset, "method": method, "mode": mode, "epsilon_target": None if mode == "none" else eps,
            "epsilon_claimed": None if mode == "none" else eps, "epsilon_provable": None if mode == "none" else eps,
            "epsilon_lower_bound": None, "delta": 0.0, "private": mode != "none", "private_data_unused": unused,
            "per": "training", "accuracy_mean": accuracy, "accuracy_std": 0.0, "seeds": 1, "diverged": diverged,
            "accuracy_loss": None, "mia_advantage": None, "train_seconds": 1.0, "examples_per_second": 1.0,
            "preprocessing_seconds": 0.0, "peak_memory_mb": 1.0}


def test_no_note_when_the_reference_is_on_top():
    rows = [_row("nonprivate", 0.9, mode="none"), _row("public_only", 0.7, mode="none", unused=True),
            _row("dpsgd", 0.8), _row("dpsgd", 0.9, eps=8.0)]  # a tie is no inversion
    assert ordering_notes(rows) == []
    assert "Note" not in markdown_table(rows)


def test_rows_above_the_reference_are_named_in_the_table():
    rows = [_row("nonprivate", 0.1825, mode="none"), _row("public_only", 0.7025, mode="none", unused=True),
            _row("dpsgd_head", 0.74), _row("dpsgd", 0.15), _row("nonprivate", 0.95, mode="none", dataset="other"),
            _row("dpsgd", 0.9, dataset="other")]
    notes = ordering_notes(rows)
    assert len(notes) == 1 and notes[0].startswith("Note (d): the non-private reference `nonprivate` (18.25 %) is below")
    assert "`public_only` (70.25 %)" in notes[0] and "`dpsgd_head` at ε = 1 (74.00 %)" in notes[0]
    assert "`dpsgd` at" not in notes[0]
    assert markdown_table(rows).endswith(notes[0])


def test_without_a_reference_there_is_nothing_to_order():
    assert ordering_notes([_row("public_only", 0.7, mode="none", unused=True), _row("dpsgd", 0.8)]) == []


def test_diverged_rows_are_marked():
    table = markdown_table([_row("nonprivate", 0.9, mode="none"), _row("adlm_shared", 0.098, mode="reference",
                                                                      diverged=2)])
    assert "9.80 ± 0.00 (n=1) (2 diverged: NaN outputs)" in table
