"""Tables, JSON and plots of a comparison; claimed and provable ε always side by side."""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections import defaultdict

import numpy as np

from .accounting.ledger import NONE_PROVEN

__all__ = ["summarize", "markdown_table", "write_report", "check_writable"]

FILES = ("results.json", "results.md", "accuracy_vs_epsilon.png", "accuracy_vs_epoch.png")


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


def _mean_std(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return float(np.mean(values)), float(np.std(values))


def summarize(results: dict) -> list[dict]:
    """One row per (method, ε): mean ± std over seeds of accuracy and costs."""
    groups = defaultdict(list)
    for run in results["runs"]:
        groups[(run["method"], run["epsilon_target"])].append(run)
    rows = []
    for (method, eps), runs in groups.items():
        provable = [r["epsilon_provable"] for r in runs]
        acc_mean, acc_std = _mean_std([r["test_accuracy"] for r in runs])
        rows.append({
            "method": method,
            "epsilon_target": eps,
            "epsilon_claimed": _mean_std([r["epsilon_claimed"] for r in runs])[0],
            "epsilon_provable": None if any(p is None for p in provable) else float(np.mean(provable)),
            "delta": _mean_std([r["delta"] for r in runs])[0],
            "reproduction": any(r["reproduction"] for r in runs),
            "private": runs[0]["ledger"] is not None,
            "accuracy_mean": acc_mean,
            "accuracy_std": acc_std,
            "accuracy_per_epoch_mean": np.mean([r["test_accuracy_per_epoch"] for r in runs], axis=0).tolist(),
            "seconds_per_epoch": float(np.mean([np.mean(r["seconds_per_epoch"]) for r in runs])),
            "examples_per_second": float(np.mean([r["examples_per_second"] for r in runs])),
            "preprocessing_seconds": float(np.mean([r["preprocessing_seconds"] for r in runs])),
            "peak_memory_mb": float(np.mean([r["peak_memory_bytes"] for r in runs])) / 2**20,
            "seeds": len(runs),
            "diverged": sum(bool(r.get("diverged")) for r in runs),
            "per": runs[0].get("per", "training"),
            "conditional_on": sorted({rel["details"]["conditional_on"] for r in runs if r["ledger"]
                                      for rel in r["ledger"]["releases"] if "conditional_on" in rel["details"]}),
            "mia_advantage": _mean_std([(r.get("membership_inference") or {}).get("advantage") for r in runs])[0],
        })
    baseline = [r["accuracy_mean"] for r in rows if not r["private"]]
    for r in rows:  # accuracy loss = 1 − acc/acc_nonprivate (Lu et al. Eq. 31), against the non-private run
        r["accuracy_loss"] = 1.0 - r["accuracy_mean"] / baseline[0] if baseline and baseline[0] > 0 else None
    rows.sort(key=lambda r: (r["method"], r["epsilon_target"] or math.inf))
    return rows


def _fmt(value, spec=".3g", none="–"):
    return none if value is None else format(value, spec)


def markdown_table(rows: list[dict]) -> str:
    """The comparison table in Markdown (also printed to the terminal)."""
    head = ("| method | target ε | claimed ε | provable ε | δ | test accuracy | acc loss | MIA adv. | s/epoch "
            "| examples/s | preprocessing s | peak memory MB |")
    lines = [head, "|---" * (head.count("|") - 1) + "|"]
    for r in rows:
        if not r["private"]:
            claimed, provable = "∞ (no privacy)", "∞ (no privacy)"
        else:
            per = " per query" if r.get("per") == "query" else ""
            claimed = _fmt(r["epsilon_claimed"]) + per + (" (reproduction)" if r["reproduction"] else "")
            provable = NONE_PROVEN if r["epsilon_provable"] is None else _fmt(r["epsilon_provable"]) + per
            if r["epsilon_provable"] is not None and r.get("conditional_on"):
                provable += f" (given the {', '.join(r['conditional_on'])})"
        acc = f"{100 * r['accuracy_mean']:.2f} ± {100 * r['accuracy_std']:.2f} (n={r['seeds']})"
        if r.get("diverged"):
            acc += f" ({r['diverged']} diverged: NaN outputs)"
        lines.append(
            f"| {r['method']} | {_fmt(r['epsilon_target'])} | {claimed} | {provable} | {_fmt(r['delta'], '.0e')} "
            f"| {acc} | {_fmt(r.get('accuracy_loss'), '.3f')} | {_fmt(r.get('mia_advantage'), '.3f')} "
            f"| {r['seconds_per_epoch']:.2f} | {r['examples_per_second']:.0f} "
            f"| {r['preprocessing_seconds']:.1f} | {r['peak_memory_mb']:.0f} |"
        )
    return "\n".join(lines)


def _plot_accuracy_vs_epsilon(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
    baseline = [r for r in rows if not r["private"]]
    private = [r for r in rows if r["private"]]
    methods = sorted({r["method"] for r in private})
    unproven = set()
    for ax, key, title in ((axes[0], "epsilon_claimed", "claimed ε (what the paper/method states)"),
                           (axes[1], "epsilon_provable", "provable ε (what a correct proof gives)")):
        for i, method in enumerate(methods):
            pts = sorted((r[key], r["accuracy_mean"], r["accuracy_std"]) for r in private
                         if r["method"] == method and r[key] is not None)
            if not pts:
                unproven.add(method)
                continue
            x, y, e = map(np.array, zip(*pts))
            per_query = any(r.get("per") == "query" for r in private if r["method"] == method)
            ax.errorbar(x, 100 * y, yerr=100 * e, marker="s" if per_query else "o", ls=":" if per_query else "-",
                        capsize=3, label=method + (" (ε per query)" if per_query else ""), color=f"C{i}")
        for r in baseline:
            ax.axhline(100 * r["accuracy_mean"], ls="--", color="gray", label=f"{r['method']} (no privacy)")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(title)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("test accuracy (%)")
    axes[0].legend(fontsize=8)
    if unproven:
        axes[1].text(0.02, 0.02, "not shown, none proven: " + ", ".join(sorted(unproven)),
                     transform=axes[1].transAxes, fontsize=8, color="crimson")
    fig.suptitle("Accuracy vs ε: the same runs placed at their claimed (left) and provable (right) ε")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_accuracy_vs_epoch(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epsilons = sorted({r["epsilon_target"] for r in rows if r["epsilon_target"] is not None})
    methods = sorted({r["method"] for r in rows})
    fig, axes = plt.subplots(1, max(len(epsilons), 1), figsize=(4.2 * max(len(epsilons), 1), 4), sharey=True,
                             squeeze=False)
    for ax, eps in zip(axes[0], epsilons or [None]):
        for i, method in enumerate(methods):
            for r in rows:
                if r["method"] == method and (r["epsilon_target"] == eps or not r["private"]):
                    curve = 100 * np.array(r["accuracy_per_epoch_mean"])
                    style = "--" if not r["private"] else "-"
                    ax.plot(np.arange(1, len(curve) + 1), curve, style, marker=".", label=method, color=f"C{i}")
        ax.set_title(f"target ε = {eps:g}" if eps is not None else "")
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test accuracy (%)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _audit_note(status: str | None, floor: dict | None) -> str:
    if status == "run" and floor:
        return (f"this run: the attacks ran; on random outputs of the same sizes, which carry no membership "
                f"signal, they reach {floor['mean']:.3f} on average (max {floor['max']:.3f} over {floor['repeats']} "
                "draws), so only values above that show leakage")
    return f"this run: {status or 'not recorded'}"


def write_report(results: dict, out: str) -> dict[str, str]:
    """Write results.json, results.md and the two plots into ``out``; all or nothing.

    Files are written into a temporary directory next to ``out`` and moved in at the end, so an
    error never leaves a half-written report.
    """
    rows = summarize(results)
    results = {**results, "summary": rows}
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tfdpmech-report-", dir=parent)
    try:
        with open(os.path.join(tmp, "results.json"), "w") as fh:
            json.dump(results, fh, indent=2, allow_nan=False, default=float)
        cfg, env = results["config"], results["environment"]
        with open(os.path.join(tmp, "results.md"), "w") as fh:
            fh.write(f"# tfdpmech compare: {cfg['dataset']}, model {cfg['model']}, {cfg['epochs']} epochs, "
                     f"batch {cfg['batch_size']}, seeds {list(cfg['seeds'])}\n\n")
            fh.write(f"TensorFlow {env['tensorflow']} on {env['device']} ({env['cpu_count']} CPUs); "
                     f"total {results['total_seconds']:.0f} s.\n\n")
            fh.write(markdown_table(rows) + "\n\n")
            audit = _audit_note(results.get("membership_inference"), results.get("membership_inference_floor"))
            fh.write("Claimed ε is what the paper (or method) states; provable ε is what a correct argument "
                     "gives for one record (see each run's ledger in results.json). "
                     "'none proven' means no per-record guarantee holds. 'per query' marks output perturbation: "
                     "it trains without noise and spends ε on every answered query, so its ε is not comparable to "
                     "a training-run ε (which covers any number of queries). Accuracy loss is 1 − acc/acc of the "
                     "non-private row (Lu et al. Eq. 31; the non-private row is the AdLM model with the noise off). "
                     "MIA adv. is the larger TPR − FPR of tensorflow-privacy's threshold and logistic-regression "
                     "attacks on the trained model's answers (members: private training records; non-members: the "
                     "test set; mean over seeds); '–' for runs whose outputs are NaN (diverged) and where the "
                     f"attack is off or not installed ({audit}). Peak memory is the process's peak RSS on a CPU "
                     "(TensorFlow included) and the allocator's peak on a GPU.\n\n")
            for name, text in results["methods"].items():
                fh.write(f"- **{name}**: {text}\n")
        _plot_accuracy_vs_epsilon(rows, os.path.join(tmp, "accuracy_vs_epsilon.png"))
        _plot_accuracy_vs_epoch(rows, os.path.join(tmp, "accuracy_vs_epoch.png"))
        os.makedirs(out, exist_ok=True)
        for name in FILES:
            os.replace(os.path.join(tmp, name), os.path.join(out, name))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {name: os.path.join(out, name) for name in FILES}
