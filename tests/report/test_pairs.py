"""The pair table: each network without privacy beside its DP-SGD rows, with the speed fraction."""

from tfdpmech.report.pairs import pair_table_markdown
from tfdpmech.report.papers import NOT_RUN


def _row(dataset, method, eps, accuracy, speed, memory):
    private = method.startswith("dpsgd_")
    return {"dataset": dataset, "method": method, "mode": "private" if private else "none", "epsilon_target": eps,
            "epsilon_claimed": eps, "epsilon_provable": eps, "accuracy_mean": accuracy, "neighbours": "add_remove",
            "protects": "record", "diverged": 0, "examples_per_second": speed, "peak_memory_mb": memory}


def test_one_line_per_network_and_dataset_with_each_epsilon_and_the_speed_fraction():
    rows = [_row("mnist", "nonprivate_vit", None, 0.9785, 4000.0, 200.0),
            _row("mnist", "dpsgd_vit", 1.0, 0.8529, 3000.0, 500.0),
            _row("mnist", "dpsgd_vit", 3.0, 0.9018, 2000.0, 100.0),
            _row("fashion_mnist", "nonprivate_vit", None, 0.8767, 5000.0, 100.0),
            _row("mnist", "nonprivate_other", None, 0.5, 1.0, 1.0)]  # no DP-SGD partner: no line
    lines = pair_table_markdown({"config": {}}, rows)
    assert lines[3] == ("| dataset | network | non-private | DP-SGD ε = 1 | DP-SGD ε = 3 | "
                        "DP ÷ non-private examples/s |")
    mnist, fashion = (line for line in lines if line.startswith("| mnist") or line.startswith("| fashion"))
    assert mnist == ("| mnist | vit | 97.85 % | 85.29 % (claimed ε 1, provable ε 1, add/remove, record) | "
                     "90.18 % (claimed ε 3, provable ε 3, add/remove, record) | 0.75 / 0.50 |")
    assert fashion == f"| fashion_mnist | vit | 87.67 % | {NOT_RUN} | {NOT_RUN} | – / – |"
    assert not any("other" in line for line in lines)


def test_no_table_without_pairs():
    assert pair_table_markdown({"config": {}}, [_row("mnist", "dpsgd", 1.0, 0.9, 1.0, 1.0)]) == []
