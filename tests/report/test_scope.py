"""Every output that shows a method shows its claimed and provable ε and the neighbour relation."""

from tfdpmech.accounting.ledger import PrivacyLedger, Release
from tfdpmech.report.plots import epoch_label, scope_label, step_label
from tfdpmech.report.tables import markdown_table, scope_cell, summarize


def _run(method, ledger, *, mode="private", notes=None, eps=1.0):
    g = None if ledger is None else ledger.provable()
    return {"dataset": "d", "method": method, "mode": mode, "paper": None, "epsilon_target": eps if ledger else None,
            "seed": 0, "epsilon_claimed": None if ledger is None else ledger.epsilon_claimed(),
            "epsilon_provable": None if ledger is None else g.epsilon, "delta": 0.0 if ledger is None else ledger.delta(),
            "per": "training", "accuracy": 0.5, "accuracy_curve": [0.5], "curve_epochs": [1], "diverged": False,
            "train_seconds": 1.0, "seconds_per_epoch": [1.0], "examples_per_second": 1.0,
            "preprocessing_seconds": 0.0, "peak_memory_bytes": 0, "mia_advantage": None, "canary": None,
            "ledger": None if ledger is None else ledger.to_dict(), "notes": notes or {}}


def _rows():
    features = PrivacyLedger([Release("training_features", "gaussian", 1.0, 1.5, "Gaussian", delta=1e-5,
                                      protects="features")])
    dpsgd = PrivacyLedger([Release("dpsgd_training", "dpsgd", 1.0, 1.0, "RDP", delta=1e-5)])
    mixed = PrivacyLedger([Release("dpsgd_training", "dpsgd", 1.0, 1.0, "RDP"), Release("head", "laplace", 1.0, 1.0, "L")])
    runs = [_run("ip_private", features), _run("dpsgd", dpsgd), _run("both", mixed),
            _run("public_only", None, mode="none", notes={"private_records_used": 0}),
            _run("nonprivate", None, mode="none")]
    return {r["method"]: r for r in summarize({"runs": runs})}


def test_the_table_has_a_neighbours_column_for_every_row():
    rows = _rows()
    assert scope_cell(rows["ip_private"]) == "replace-one, features only (labels public)"
    assert scope_cell(rows["dpsgd"]) == "add/remove, record"
    assert scope_cell(rows["both"]) == "mixed neighbours, record" and rows["both"]["epsilon_provable"] is None
    assert scope_cell(rows["public_only"]) == "– (private data unused)"
    assert scope_cell(rows["nonprivate"]) == "– (no privacy)"
    table = markdown_table(list(rows.values()))
    assert "| provable ε | neighbours, protects |" in table
    assert "| 1 | 1 | add/remove, record |" in table and "| none proven | mixed neighbours, record |" in table


def test_plot_legends_name_the_relation_and_epsilon_zero_for_public_only():
    rows = _rows()
    assert scope_label(rows["dpsgd"]) == "[add/remove]"
    assert scope_label(rows["ip_private"]) == "[replace-one, features only]"
    assert scope_label(rows["public_only"]) == "[ε = 0: private data unused]"  # not "no privacy"
    assert scope_label(rows["nonprivate"]) == "[no privacy]"
    label = epoch_label(rows["dpsgd"])  # the accuracy-vs-epoch legend: claimed and provable ε, not the target
    assert label.startswith("dpsgd: claimed ε=1 | provable ε=1, δ=1e-05") and label.endswith("[add/remove]")
    assert epoch_label(rows["both"]).startswith("both: claimed ε=2 | provable none proven")
    assert epoch_label(rows["public_only"]) == "public_only (ε = 0: private data unused)"
    run = _run("dpsgd", PrivacyLedger([Release("dpsgd_training", "dpsgd", 1.0, 1.0, "RDP")]))
    assert step_label(run).endswith("[add/remove, record] (seed 0, batch ?)")
