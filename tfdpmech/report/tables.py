"""Summaries and the Markdown table of a comparison: claimed and provable ε always side by side."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from ..accounting.display import delta_text, epsilon_lower, epsilon_upper
from ..accounting.ledger import NONE_PROVEN, PrivacyLedger, describe_scope
from ..audit.canary import VERDICT_BUG, VERDICT_REFUTED, audit_verdict

__all__ = ["summarize", "markdown_table", "ordering_notes", "run_verdict", "audit_findings", "scope_cell"]


def _mean_std(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return float(np.mean(values)), float(np.std(values))


def _scope(runs) -> tuple:
    """``(neighbours, protects)`` of the runs' ledgers (``"mixed"`` when seeds differ); ``("–", "–")`` without one."""
    scopes = {PrivacyLedger.from_dict(r["ledger"]).scope() for r in runs if r.get("ledger")}
    if not scopes:
        return "–", "–"
    if len(scopes) == 1:
        return scopes.pop()
    return ("mixed" if len({s[0] for s in scopes}) > 1 else next(iter(scopes))[0],
            "features" if any(s[1] == "features" for s in scopes) else next(iter(scopes))[1])


def run_verdict(run: dict) -> str | None:
    """The canary audit's verdict on one run: a bug (bound > provable ε), a refuted claim, or None.

    Per-query ε (output perturbation) is compared as m·ε: the audit read one answer per canary.
    """
    canary = run.get("canary")
    if not canary:
        return None
    return audit_verdict(canary["epsilon_lower_bound"], claimed=run["epsilon_claimed"],
                         provable=run["epsilon_provable"], per=run["per"], queries=canary["m"])


def audit_findings(results: dict) -> list[dict]:
    """Every run whose audited lower bound exceeds its provable or claimed ε, bugs first."""
    found = [{"verdict": v, **{k: run[k] for k in ("dataset", "method", "epsilon_target", "seed", "epsilon_claimed",
                                                   "epsilon_provable", "per")},
              "epsilon_lower_bound": run["canary"]["epsilon_lower_bound"]}
             for run in results["runs"] if (v := run_verdict(run))]
    return sorted(found, key=lambda f: f["verdict"] != VERDICT_BUG)


def summarize(results: dict) -> list[dict]:
    """One row per (dataset, method, target ε): mean ± std over seeds of accuracy and costs."""
    groups = defaultdict(list)
    for run in results["runs"]:
        groups[(run["dataset"], run["method"], run["epsilon_target"])].append(run)
    rows = []
    for (dataset, method, eps), runs in groups.items():
        provable = [r["epsilon_provable"] for r in runs]
        acc_mean, acc_std = _mean_std([r["accuracy"] for r in runs])
        curves = [r["accuracy_curve"] for r in runs]
        length = min(len(c) for c in curves)
        canaries = [r["canary"] for r in runs if r.get("canary")]
        rows.append({
            "dataset": dataset, "method": method, "mode": runs[0]["mode"], "paper": runs[0]["paper"],
            "epsilon_target": eps,
            "epsilon_claimed": _mean_std([r["epsilon_claimed"] for r in runs])[0],
            # a provable ε exists for the row only if every seed has one; the worst seed is reported
            "epsilon_provable": None if any(p is None for p in provable) else float(max(provable)),
            "delta": _mean_std([r["delta"] for r in runs])[0],
            "private": runs[0]["mode"] != "none",
            # e.g. public_only: trained on public records only, so nothing about the private set is released
            "private_data_unused": all((r.get("notes") or {}).get("private_records_used") == 0 for r in runs),
            "accuracy_mean": acc_mean, "accuracy_std": acc_std,
            "accuracy_curve_mean": np.mean([c[:length] for c in curves], axis=0).tolist(),
            "train_seconds": float(np.mean([r["train_seconds"] for r in runs])),
            "examples_per_second": _mean_std([r["examples_per_second"] for r in runs])[0],
            "preprocessing_seconds": float(np.mean([r["preprocessing_seconds"] for r in runs])),
            "peak_memory_mb": float(np.mean([r["peak_memory_bytes"] for r in runs])) / 2**20,
            "seeds": len(runs),
            "diverged": sum(bool(r["diverged"]) for r in runs),
            "per": runs[0]["per"],
            # the neighbour relation the ε is stated for, and what it protects (the record, or the features only)
            **dict(zip(("neighbours", "protects"), _scope(runs))),
            "mia_advantage": _mean_std([r["mia_advantage"] for r in runs])[0],
            "epsilon_lower_bound": (max(c["epsilon_lower_bound"] for c in canaries) if canaries else None),
            # the seed with the largest bound, for its counts
            "canary": max(canaries, key=lambda c: c["epsilon_lower_bound"]) if canaries else None,
            "audit_verdict": _worst({run_verdict(r) for r in runs}),
        })
    for dataset in {r["dataset"] for r in rows}:  # accuracy loss = 1 − acc/acc_nonprivate (Lu et al. Eq. 31)
        base = [r["accuracy_mean"] for r in rows if r["dataset"] == dataset and r["method"] == "nonprivate"]
        for r in rows:
            if r["dataset"] == dataset:
                r["accuracy_loss"] = 1.0 - r["accuracy_mean"] / base[0] if base and base[0] > 0 else None
    rows.sort(key=lambda r: (r["dataset"], r["method"], r["epsilon_target"] or -math.inf))
    return rows


def _worst(verdicts: set) -> str | None:
    return VERDICT_BUG if VERDICT_BUG in verdicts else VERDICT_REFUTED if VERDICT_REFUTED in verdicts else None


def _fmt(value, spec=".3g", none="–"):
    return none if value is None else format(value, spec)


def epsilon_cells(row: dict) -> tuple[str, str]:
    """The claimed and provable ε cells of a summary row (with 'per query' and conditions), rounded up."""
    if not row["private"]:
        if row.get("private_data_unused"):
            return "0 (private data unused)", "0 (private data unused)"
        return "∞ (no privacy)", "∞ (no privacy)"
    per = " per query" if row["per"] == "query" else ""
    claimed = ("–" if row["epsilon_claimed"] is None else epsilon_upper(row["epsilon_claimed"])) + per
    provable = NONE_PROVEN if row["epsilon_provable"] is None else epsilon_upper(row["epsilon_provable"]) + per
    return claimed, provable


def scope_cell(row: dict) -> str:
    """The neighbour relation and what the ε protects, e.g. ``"replace-one, record"``."""
    if not row["private"]:
        return "– (private data unused)" if row.get("private_data_unused") else "– (no privacy)"
    neighbours, protects = row.get("neighbours", "–"), row.get("protects", "–")
    return "–" if neighbours == "–" else describe_scope(neighbours, protects)


def lower_bound_cell(row: dict) -> str:
    """'ε_lb (correct/guesses of m)', the bound rounded down, with a red bold marker for a bug and the
    words for a refuted claim."""
    c = row.get("canary")
    if not c:
        return "–"
    cell = f"{epsilon_lower(c['epsilon_lower_bound'])} ({c['correct']}/{c['k_plus'] + c['k_minus']}, m={c['m']})"
    if row.get("audit_verdict") == VERDICT_BUG:
        cell += " 🔴 **BUG: above the provable ε**"
    elif row.get("audit_verdict") == VERDICT_REFUTED:
        cell += " **claim refuted by audit**"
    return cell


def _row_name(row: dict) -> str:
    at = "" if row["epsilon_target"] is None else f" at ε = {row['epsilon_target']:g}"
    return f"`{row['method']}`{at} ({100 * row['accuracy_mean']:.2f} %)"


def ordering_notes(rows: list[dict]) -> list[str]:
    """One line per dataset where a private row or ``public_only`` is more accurate than the non-private
    reference (the rows of mode ``none`` that train on the private records): the order a reader expects
    does not hold there, and the acc-loss column is negative."""
    notes = []
    for dataset in sorted({r["dataset"] for r in rows}):
        subset = [r for r in rows if r["dataset"] == dataset and r["accuracy_mean"] is not None]
        references = [r for r in subset if not r["private"] and not r.get("private_data_unused")]
        if not references:
            continue
        best = max(references, key=lambda r: r["accuracy_mean"])
        above = [r for r in subset if r not in references and r["accuracy_mean"] > best["accuracy_mean"]]
        if above:
            notes.append(
                f"Note ({dataset}): the non-private reference {_row_name(best)} is below "
                f"{', '.join(map(_row_name, above))}: it is not the ceiling in these settings (it trains on the "
                "private records alone, for the comparison's epochs; those rows start from public data or train "
                "longer), so their acc loss is negative.")
    return notes


def markdown_table(rows: list[dict]) -> str:
    """The comparison table in Markdown (also printed to the terminal), with :func:`ordering_notes` under it."""
    head = ("| dataset | method | mode | target ε | claimed ε | provable ε | neighbours, protects | ε lower bound (audit) | δ | test accuracy "
            "| acc loss | MIA adv. | train s | examples/s | preprocessing s | peak memory MB |")
    lines = [head, "|---" * (head.count("|") - 1) + "|"]
    for r in rows:
        claimed, provable = epsilon_cells(r)
        acc = f"{100 * r['accuracy_mean']:.2f} ± {100 * r['accuracy_std']:.2f} (n={r['seeds']})"
        if r["diverged"]:
            acc += f" ({r['diverged']} diverged: NaN outputs)"
        lines.append(
            f"| {r['dataset']} | {r['method']} | {r['mode']} | {_fmt(r['epsilon_target'], 'g')} | {claimed} | {provable} | {scope_cell(r)} "
            f"| {lower_bound_cell(r)} | {'–' if r['delta'] is None else delta_text(r['delta'])} | {acc} "
            f"| {_fmt(r['accuracy_loss'], '.3f')} | {_fmt(r['mia_advantage'], '.3f')} | {r['train_seconds']:.1f} "
            f"| {_fmt(r['examples_per_second'], '.0f')} | {r['preprocessing_seconds']:.1f} | {r['peak_memory_mb']:.0f} |")
    notes = ordering_notes(rows)
    return "\n".join(lines + ([""] + notes if notes else []))
