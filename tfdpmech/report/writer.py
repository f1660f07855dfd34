"""Write a comparison: results.json, results.md and the plots, all or nothing."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile

import numpy as np

from ..accounting.display import epsilon_lower, epsilon_upper
from ..audit.canary import VERDICT_BUG
from .pairs import pair_table_markdown
from .papers import paper_table_markdown, published_accuracy
from .settings import run_setting
from .plots import has_step_curves, plot_accuracy_vs_epoch, plot_accuracy_vs_epsilon, plot_accuracy_vs_step
from .schema import check_results_schema
from .tables import audit_findings, markdown_table, summarize
from .users import users_markdown

__all__ = ["FILES", "check_writable", "write_report", "report_markdown"]

FILES = ("results.json", "results.md", "accuracy_vs_epsilon.png", "accuracy_vs_epoch.png")
STEP_PLOT = "accuracy_vs_step.png"  # written when a run states its steps (the reference modes), claims as lines

EXPLANATION = (
    "Claimed ε is what the paper (or method) states; provable ε is what a correct argument gives for one "
    "record (each run's ledger in results.json names the argument, or why there is none). 'none proven' "
    "means no per-record guarantee holds. 'per query' marks output perturbation: it trains without noise and "
    "spends ε on every answered query, so its ε is not comparable to a training-run ε (which covers any "
    "number of queries). 'neighbours, protects' names the neighbouring data sets the ε is stated for (one "
    "record added or removed, or one record replaced) and whether it protects the whole record or only its "
    "features (labels public): ε of different relations are not comparable one for one. "
    "The ε lower bound is the one-run canary audit's (when run): a value above the "
    "provable ε is a bug, above the claimed ε it refutes the claim. Accuracy loss is 1 − acc/acc of the "
    "non-private row of the same dataset (Lu et al. Eq. 31). MIA adv. is the larger TPR − FPR of "
    "the threshold and logistic-regression membership-inference attacks on the trained model's answers "
    "(members: private training records; non-members: the test set; mean over seeds); '–' where the "
    "attack is off, not installed, or the outputs are NaN (diverged). Peak memory is the growth of the "
    "process RSS during the run on a CPU (from its start, once the C allocator returned what earlier runs freed) "
    "and the allocator's peak on a GPU.")


def check_writable(out: str) -> None:
    """Raise ValueError if ``out`` cannot be created or written (checked before any work is done).

    Probes by creating and removing a temporary directory in the nearest existing ancestor, so
    nothing is left behind.
    """
    path = os.path.abspath(out)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"--out {out!r} exists and is not a directory; choose another path")
    probe = path
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    try:
        if not os.path.isdir(probe):
            raise OSError(f"{probe!r} is not a directory")
        os.rmdir(tempfile.mkdtemp(prefix=".tfdpmech-probe-", dir=probe))
    except OSError as exc:
        raise ValueError(f"--out {out!r} cannot be written ({exc}); choose another path") from None


MIA_IMPLEMENTATION_WORDS = {
    "tensorflow_privacy": "tensorflow-privacy (privacy_tests.membership_inference_attack)",
    "tfdpmech": "tfdpmech (tfdpmech.audit.mia_attacks, scikit-learn), tensorflow-privacy not importing here",
}


def _audit_notes(results: dict) -> list[str]:
    notes = []
    for name, info in results["audit"].items():
        if info["status"] != "run":
            notes.append(f"- audit {name}: not run ({info['status']})")
            continue
        if name == "canary":
            ms = sorted({run["canary"]["m"] for run in results["runs"] if run.get("canary")})
            notes.append(
                f"- audit canary (Steinke, Nasr & Jagielski 2023, Theorem 3; docs/audit.md): one extra training per run "
                f"with m = {', '.join(map(str, ms)) or '–'} canaries (uniform-noise images or random rows of the "
                "feature ball, random labels), each added to the private set with probability ½; score = "
                "log-probability of the canary's label; k₊ = k₋ = m/4 guesses; 95 % confidence; δ = the run's δ. "
                "Above the provable ε: a bug; above the claimed ε only: the claim is refuted; ε per query is "
                "compared as m·ε. A small lower bound proves nothing.")
        if name == "mia":
            impl = info.get("implementation")
            notes.append(f"- audit mia: the threshold and logistic-regression attacks of "
                         f"{MIA_IMPLEMENTATION_WORDS.get(impl, impl or 'an unrecorded implementation')}")
        for dataset, floor in info.get("floor", {}).items():
            notes.append(f"- audit {name} on {dataset}: on outputs of the same sizes that carry no membership signal "
                         f"the attacks reach {floor['mean']:.3f} on average (max {floor['max']:.3f} over "
                         f"{floor['repeats']} draws); only values above that show leakage")
    return notes


def findings_markdown(results: dict) -> list[str]:
    """The canary audit's findings: 🔴 bold for a lower bound above the provable ε, then refuted claims."""
    lines = []
    for f in audit_findings(results):
        eps = "" if f["epsilon_target"] is None else f" target ε={f['epsilon_target']:g}"
        where = f"{f['dataset']} {f['method']}{eps} seed {f['seed']}"
        per = " per query (compared as m·ε)" if f["per"] == "query" else ""
        if f["verdict"] == VERDICT_BUG:
            lines.append(f"- 🔴 **BUG: {where}: audited ε lower bound {epsilon_lower(f['epsilon_lower_bound'])} > "
                         f"provable ε {epsilon_upper(f['epsilon_provable'])}{per}. The proof or the code is wrong (or a 5 % fluke: rerun "
                         "with another seed).**")
        else:
            lines.append(f"- **claim refuted by audit**: {where}: audited ε lower bound "
                         f"{epsilon_lower(f['epsilon_lower_bound'])} > claimed ε {epsilon_upper(f['epsilon_claimed'])}{per}")
    return (["## Audit findings", "", *lines, ""]) if lines else []


def skipped_markdown(results: dict) -> list[str]:
    """Runs the comparison skipped because no noise level certifies their ε, grouped over seeds."""
    groups: dict = {}
    for s in results.get("skipped", []):
        groups.setdefault((s["dataset"], s["method"], s["epsilon_target"], s["reason"]), []).append(s["seed"])
    lines = [f"- **skipped** {method} on {dataset} at target ε={eps:g} (seeds {', '.join(map(str, seeds))}): {reason}"
             for (dataset, method, eps, reason), seeds in groups.items()]
    return ["## Skipped runs (no row in the table)", "", *lines, ""] if lines else []


def pending_markdown(results: dict) -> list[str]:
    """Runs of the plan not finished yet (a report written with ``--stored-only``), grouped over seeds."""
    groups: dict = {}
    for p in results.get("pending", []):
        seed = str(p["seed"]) + (f": {p['epochs_saved']} of {p['epochs']} epochs saved" if "epochs_saved" in p else "")
        groups.setdefault((p["dataset"], p["method"], p["epsilon_target"]), []).append(seed)
    lines = [f"- {method} on {dataset}" + (f" at target ε={eps:g}" if eps is not None else "")
             + f" (seeds {', '.join(seeds)})" for (dataset, method, eps), seeds in groups.items()]
    return [f"## Not run yet ({sum(len(s) for s in groups.values())} runs of the plan; no row in the table)", "",
            *lines, ""] if lines else []


def runs_time_markdown(results: dict) -> list[str]:
    """The plan's cost so far: the sum of every run's own train and preprocessing seconds."""
    runs = results["runs"]
    if not runs:
        return []
    total = sum((r.get("train_seconds") or 0.0) + (r.get("preprocessing_seconds") or 0.0) for r in runs)
    hours, minutes = divmod(math.ceil(total / 60), 60)
    what = "The one run in this report" if len(runs) == 1 else f"The {len(runs)} runs in this report"
    return ["", f"{what} took {hours} h {minutes:02d} min of training and private preprocessing in all (the sum "
                "of each run's own seconds in the table; a run timed while other processes shared the CPU counts "
                "its slower time)."]


def _header_setting(cfg: dict, runs: list) -> str:
    """The shared model and recipe, or a pointer to each run's own where every run states one (``public_only``, the
    public model, states none but uses no private record)."""
    if runs and all((run.get("notes") or {}).get("recipe") or (run.get("notes") or {}).get("private_records_used") == 0
                    for run in runs):
        return "each method's own network and recipe (each run's notes in results.json)"
    return f"model {cfg['model']}, {cfg['epochs']} epochs, batch {cfg['batch_size']}"


def report_markdown(results: dict, rows: list[dict] | None = None) -> str:
    """The whole results.md text."""
    rows = summarize(results) if rows is None else rows
    cfg, env = results["config"], results["environment"]
    runs = results.get("runs") or []
    setting = _header_setting(cfg, runs)
    lines = [f"# tfdpmech compare --preset {results['preset']}: {', '.join(cfg['datasets'])}, {setting}, "
             f"seeds {list(cfg['seeds'])}", "",
             f"TensorFlow {env['tensorflow']} on {env['device']}; total {results['total_seconds']:.0f} s"
             + (f" in this invocation, which read {results['stored_runs']} finished runs from runs.jsonl (each keeps "
                "its own train seconds)." if results.get("stored_runs") else "."), *runs_time_markdown(results), ""]
    for name, d in results["data"].items():
        lines.append(f"- data {name}: {d['private']} private, {d['public']} public ({d['public_source']}), "
                     f"{d['test']} test records. {d['note']}")
    lines += ["", *findings_markdown(results), markdown_table(rows), *paper_table_markdown(results, rows),
              *pair_table_markdown(results, rows), "", *users_markdown(results), *skipped_markdown(results),
              *pending_markdown(results),
              EXPLANATION, "", *_audit_notes(results), ""]
    lines += [f"- **{name}** ({m['mode']}): {m['description']}{_own_setting(results, name)}"
              f"{_engine(results, name)}" for name, m in results["methods"].items()]
    lines += left_out_markdown(results)
    lines += [f"- **{name}** runs on part of the grid only: " + "; ".join(
        f"{key} {', '.join(f'{v:g}' for v in values)}" for key, values in subset.items())
        for name, subset in (results["config"].get("subsets") or {}).items() if name in results["methods"]]
    lines += published_markdown(results)
    return "\n".join(lines) + "\n"


def published_markdown(results: dict) -> list[str]:
    """The papers' own numbers the report is read against (claims of their papers, not measured here)."""
    points = results["config"].get("published") or ()
    if not points:
        return []
    lines = ["", "Published points (each paper's own claim on the whole MNIST, not measured here; drawn as single "
                 "markers in accuracy_vs_epsilon.png):", "",
             "| published | ε (claimed) | δ | accuracy | source |", "|---|---|---|---|---|"]
    lines += [f"| {p['label']} | {p['epsilon']:g} | {p.get('delta', '–')} | {published_accuracy(p)} | "
              f"{p['source']} |" for p in points]
    return lines


ENGINE_WORDS = {"tensorflow_privacy": "tensorflow-privacy's DPModel / DP optimizers",
                "tfdpmech": "tfdpmech's own Keras train step (tfdpmech.mechanisms.dpsgd.runs.train_step)"}


def _engine(results: dict, method: str) -> str:
    """The DP-SGD engine(s) a method's runs used (``notes["engine"]``), or nothing for other methods."""
    engines = sorted({(r.get("notes") or {}).get("engine") for r in results["runs"] if r["method"] == method} - {None})
    if not engines:
        return ""
    return ". DP-SGD engine: " + ", ".join(f"{e} ({ENGINE_WORDS.get(e, e)})" for e in engines)


def left_out_markdown(results: dict) -> list[str]:
    """The methods of the preset's list this installation could not run (``config["left_out"]``), with why."""
    left_out = (results.get("config") or {}).get("left_out") or {}
    return ["", *(f"- **left out** {name}: {reason}" for name, reason in left_out.items())] if left_out else []


def _own_setting(results: dict, method: str) -> str:
    """Where a method trains with its own batch size or epochs (a reference mode's, a preset's
    options), or states its optimiser steps, what it ran (:func:`run_setting`), so the header's
    shared setting does not stand for it."""
    setting = run_setting(results, method, only_own=True)
    return f" — this run: {setting}" if setting else ""


def json_safe(value):
    """``value`` with every non-finite float spelt as the string JSON would otherwise refuse.

    A reference run may diverge as the authors' code does (a NaN loss or a NaN per-batch Δ); strict
    JSON has no NaN, and writing ``null`` would hide what happened, so the value is kept as text.
    """
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isfinite(value):
            return value
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_report(results: dict, out: str) -> dict[str, str]:
    """Write results.json, results.md and the plots into ``out``; all or nothing.

    The plots are accuracy vs ε and vs epoch, and accuracy vs optimiser step when a run states its
    steps per epoch.

    Files are written into a temporary directory next to ``out`` and moved in at the end, so an
    error never leaves a half-written report. A ``results.json.gz`` in ``out`` (a compressed earlier
    report) is removed once the new files are in: a folder holds one report.
    """
    check_results_schema(results)
    rows = summarize(results)
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tfdpmech-report-", dir=parent)
    try:
        with open(os.path.join(tmp, "results.json"), "w") as fh:
            json.dump(json_safe({**results, "summary": rows}), fh, indent=2, allow_nan=False, default=float)
        with open(os.path.join(tmp, "results.md"), "w") as fh:
            fh.write(report_markdown(results, rows))
        plot_accuracy_vs_epsilon(rows, os.path.join(tmp, "accuracy_vs_epsilon.png"),
                                 results["config"].get("published", ()))
        plot_accuracy_vs_epoch(rows, os.path.join(tmp, "accuracy_vs_epoch.png"))
        names = FILES
        if has_step_curves(results["runs"]):
            plot_accuracy_vs_step(results["runs"], os.path.join(tmp, STEP_PLOT),
                                  results["config"].get("published", ()))
            names = FILES + (STEP_PLOT,)
        os.makedirs(out, exist_ok=True)
        for name in names:
            os.replace(os.path.join(tmp, name), os.path.join(out, name))
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(out, "results.json.gz"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {name: os.path.join(out, name) for name in names}
