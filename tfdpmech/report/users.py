"""The report's section on people: what each row's ε says about one user (:mod:`tfdpmech.experiments.users`)."""

from __future__ import annotations

from ..accounting.display import delta_text, epsilon_upper

__all__ = ["users_markdown"]


def users_markdown(results: dict) -> list[str]:
    """The report's section on people: each record-level row's guarantee for the largest user beside the
    user-level rows' own (nothing when the comparison has no users)."""
    runs = [r for r in results.get("runs") or [] if {"largest_user", "user_level"} & set(r.get("notes") or {})]
    if not runs:
        return []
    lines = ["## Privacy per person", "",
             "The private records belong to users (options['users'], Zipf-distributed counts). A record-level ε "
             "protects one record; for a person holding m records, group privacy gives (m·ε, δ·Σ_{i<m} e^{iε}) "
             "(tfdpmech.accounting.group_privacy), nothing where that δ reaches 1. A user-level run's ε protects "
             "a user (all of their records) directly.", "",
             "| dataset | method | seed | ε per record (proven) | largest user: records | ε per person (proven) | δ |",
             "|---|---|---|---|---|---|---|"]
    for r in sorted(runs, key=lambda r: (r["dataset"], r["method"], r["epsilon_target"] or 0, r["seed"])):
        note = (r.get("notes") or {}).get("largest_user")
        if note:
            proven = note["delta"] < 1
            person = epsilon_upper(note["epsilon"]) if proven else "none proven"
            lines.append(f"| {r['dataset']} | {r['method']} | {r['seed']} | {epsilon_upper(r['epsilon_provable'])} | "
                         f"{note['records']} | {person} | {delta_text(note['delta']) if proven else '≥ 1'} |")
        else:
            eps = "none proven" if r["epsilon_provable"] is None else epsilon_upper(r["epsilon_provable"])
            k = r["notes"]["user_level"]["records_per_user"]
            lines.append(f"| {r['dataset']} | {r['method']} | {r['seed']} | – (user level, up to {k} records of a "
                         f"user a step) | all | {eps} | {delta_text(r['delta'])} |")
    return [*lines, ""]
