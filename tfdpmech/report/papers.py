"""One line per seed paper: its own claim beside what the comparison measured at the same ε.

The answer to "does this paper's mechanism beat a strong DP-SGD?": the paper's published accuracy
(not measured here), the paper's mechanism in its reference mode (as the paper or its code ran it:
ε claimed, none proven) and in its private mode (ε proven), ``dpsgd`` and the public model alone,
each at the paper's ε, and the reference mode's training here beside the paper's (``"setting"``). A
published point names its paper (``"paper"``); a DP-SGD figure reported by a paper names the papers
it sits beside (``"dpsgd_of"``).
"""

from __future__ import annotations

from ..accounting.display import epsilon_upper
from ..accounting.ledger import describe_scope
from .settings import run_setting

__all__ = ["accuracy_cell", "paper_table_markdown", "published_accuracy"]

NOT_RUN = "not run yet"


def published_accuracy(point: dict) -> str:
    """A published point's accuracy, or why the paper gives none on this data (``"claim"``)."""
    if point.get("accuracy") is None:
        return f"– ({point['claim']})"
    return f"{100 * point['accuracy']:.2f} %"


def accuracy_cell(row: dict | None, *, epsilons: bool) -> str:
    """Accuracy, and for a private or reference row its claimed and provable ε side by side."""
    if row is None or row["accuracy_mean"] is None:
        return NOT_RUN
    accuracy = f"{100 * row['accuracy_mean']:.2f} %"
    if row.get("diverged"):
        accuracy += " (diverged: NaN outputs)"
    if not epsilons:
        return accuracy
    claimed, provable = row.get("epsilon_claimed"), row["epsilon_provable"]
    per = " per query" if row.get("per") == "query" else ""
    claimed = "–" if claimed is None else f"{epsilon_upper(claimed)}{per}"
    if provable is None:
        return f"{accuracy} (claimed ε {claimed}, none proven)"
    scope = describe_scope(row["neighbours"], row["protects"])
    return f"{accuracy} (claimed ε {claimed}, provable ε {epsilon_upper(provable)}, {scope})"


def _at(rows, epsilon, **match):
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()) and (
                epsilon is None or (row["epsilon_target"] is not None and abs(row["epsilon_target"] - epsilon) < 1e-9)):
            return row
    return None


def paper_table_markdown(results: dict, rows: list[dict]) -> list[str]:
    """The seed-paper table of a comparison whose ``published`` points name their papers ([] when none do)."""
    points = [p for p in results["config"].get("published") or () if p.get("paper")]
    if not points:
        return []
    their_dpsgd = {paper: p for p in results["config"]["published"] for paper in p.get("dpsgd_of", ())}
    public_only = _at(rows, None, method="public_only")
    # DP-SGD with the public data the papers' rows use (on the public model's features), where it ran
    with_head = any(row["method"] == "dpsgd_head" for row in rows)
    head = ("| paper | ε | paper's claim | reference mode here | private mode here | dpsgd here | "
            + ("dpsgd_head here | " if with_head else "")
            + "public_only | the paper's own DP-SGD | reference mode: trained here / by the paper |")
    lines = ["", "Each seed paper at its own ε: its published claim (not measured here), its mechanism here in the "
                 "reference mode (as the paper or its code ran it: ε claimed, none proven) and in the private mode "
                 "(ε proven), DP-SGD here at the same ε"
                 + (" (from scratch, and on the public model's features: dpsgd_head)" if with_head else "")
                 + ", and the public model alone (ε = 0 for the private set):",
             "",
             head, "|---" * (head.count("|") - 1) + "|"]
    for p in points:
        eps, paper = p["epsilon"], p["paper"]
        reference = _at(rows, eps, paper=paper, mode="reference")
        private = _at(rows, eps, paper=paper, mode="private")
        theirs = their_dpsgd.get(paper)
        theirs = "–" if theirs is None else f"{100 * theirs['accuracy']:.2f} %"
        trained_here = (reference and run_setting(results, reference["method"])) or "–"
        cell = accuracy_cell
        lines.append(f"| {p['label']} | {eps:g} | {published_accuracy(p)} | {cell(reference, epsilons=True)} | "
                     f"{cell(private, epsilons=True)} | {cell(_at(rows, eps, method='dpsgd'), epsilons=True)} | "
                     + (f"{cell(_at(rows, eps, method='dpsgd_head'), epsilons=True)} | " if with_head else "")
                     + f"{cell(public_only, epsilons=False)} | {theirs} | {trained_here} / {p.get('setting', '–')} |")
    return lines
