"""One line per network and dataset: the network without privacy beside its DP-SGD rows.

A comparison whose methods come in pairs ``nonprivate_<net>`` / ``dpsgd_<net>`` (the ``architectures``
preset) answers "what does privacy cost this network?": the non-private test accuracy, the DP accuracy at each
target ε (with its provable ε), and the DP run's examples per second as a fraction of the non-private run's.
Each run trains at its own recipe (batch size, epochs), so the fraction compares the two trainings as run, not one
step at equal batch (the speed benchmark, :mod:`tfdpmech.experiments.dpsgd_speed`, measures that, and memory:
a run's peak-memory growth in the main table depends on what its process ran before, so no fraction is given).
"""

from __future__ import annotations

from .papers import accuracy_cell

__all__ = ["pair_table_markdown"]

NONPRIVATE, PRIVATE = "nonprivate_", "dpsgd_"


def _pairs(rows: list[dict]) -> list[str]:
    """The network names with both a ``nonprivate_`` and a ``dpsgd_`` row, in the order of first appearance."""
    methods = [row["method"] for row in rows]
    names = []
    for method in methods:
        name = method[len(NONPRIVATE):]
        if method.startswith(NONPRIVATE) and PRIVATE + name in methods and name not in names:
            names.append(name)
    return names


def _ratio(numerator, denominator) -> str:
    if not numerator or not denominator:
        return "–"
    return f"{numerator / denominator:.2f}"


def pair_table_markdown(results: dict, rows: list[dict]) -> list[str]:
    """The pair table of a comparison with ``nonprivate_<net>`` / ``dpsgd_<net>`` methods ([] when it has none)."""
    names = _pairs(rows)
    if not names:
        return []
    epsilons = sorted({row["epsilon_target"] for row in rows
                       if row["method"].startswith(PRIVATE) and row["epsilon_target"] is not None})
    head = ("| dataset | network | non-private | " + " | ".join(f"DP-SGD ε = {e:g}" for e in epsilons)
            + " | DP ÷ non-private examples/s |")
    lines = ["", "Each network without privacy beside its DP-SGD runs (accuracy on the test set; the speed "
                 "fraction compares each DP run with the non-private run as each trained, at its own batch size and "
                 "epochs, one value per ε; the speed benchmark compares one step at equal batch, and memory):", "",
             head, "|---" * (head.count("|") - 1) + "|"]
    for dataset in dict.fromkeys(row["dataset"] for row in rows):
        for name in names:
            base = next((r for r in rows if r["dataset"] == dataset and r["method"] == NONPRIVATE + name), None)
            private = [next((r for r in rows if r["dataset"] == dataset and r["method"] == PRIVATE + name
                             and r["epsilon_target"] == e), None) for e in epsilons]
            if base is None and not any(private):
                continue
            speed = " / ".join(_ratio(p and p["examples_per_second"], base and base["examples_per_second"])
                               for p in private)
            lines.append(f"| {dataset} | {name} | {accuracy_cell(base, epsilons=False)} | "
                         + " | ".join(accuracy_cell(p, epsilons=True) for p in private) + f" | {speed} |")
    return lines

