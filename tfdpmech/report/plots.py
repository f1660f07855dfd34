"""Plots of a comparison: accuracy vs claimed and provable ε, and accuracy per epoch."""

from __future__ import annotations

import numpy as np

from ..accounting.ledger import describe_scope, format_epsilon

__all__ = ["plot_accuracy_vs_epsilon", "plot_accuracy_vs_epoch", "plot_accuracy_vs_step", "has_step_curves", "scope_label",
           "epoch_label"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


DIVERGED = "diverged (NaN outputs)"
_SHORT = {"add_remove": "add/remove", "replace_one": "replace-one", "unstated": "neighbours unstated",
          "mixed": "mixed neighbours"}


def scope_label(row: dict) -> str:
    """Legend words for a summary row's neighbour relation and protection, e.g. ``"[replace-one]"`` or
    ``"[add/remove]"``, ``"[replace-one, features only]"``; ``"[ε = 0: private data unused]"`` for a method
    that never touches the private records, ``"[no privacy]"`` for one without a ledger."""
    if not row["private"]:
        return "[ε = 0: private data unused]" if row.get("private_data_unused") else "[no privacy]"
    neighbours = row.get("neighbours", "–")
    words = _SHORT.get(neighbours, neighbours)
    if row.get("protects") == "features":
        words += ", features only"
    elif row.get("protects") == "unstated":
        words += ", protects unstated"
    return f"[{words}]"


def _audit_panel(ax, subset: list[dict], methods: list[str]) -> None:
    """Accuracy against the audited ε lower bound: one point per (method, target ε), non-private as ★."""
    from ..audit.canary import VERDICT_BUG, VERDICT_REFUTED

    for i, method in enumerate(methods):
        mine = sorted((r for r in subset if r["method"] == method and r["epsilon_lower_bound"] is not None),
                      key=lambda r: r["epsilon_target"])
        if not mine:
            continue
        ax.plot([r["epsilon_lower_bound"] for r in mine], [100 * r["accuracy_mean"] for r in mine], "o:",
                color=f"C{i}", label=f"{method} {scope_label(mine[0])}")
        for r in mine:
            if r["audit_verdict"] == VERDICT_BUG:
                ax.scatter(r["epsilon_lower_bound"], 100 * r["accuracy_mean"], marker="X", s=160, color="red",
                           zorder=5, label="bug: lower bound > provable ε")
            elif r["audit_verdict"] == VERDICT_REFUTED:
                ax.annotate("claim refuted", (r["epsilon_lower_bound"], 100 * r["accuracy_mean"]), fontsize=7,
                            color="crimson", xytext=(4, -10), textcoords="offset points")
    for r in subset:
        if not r["private"] and r["epsilon_lower_bound"] is not None:
            ax.scatter(r["epsilon_lower_bound"], 100 * r["accuracy_mean"], marker="*", s=140, color="gray",
                       label=f"{r['method']} {scope_label(r)}")
    ax.set_xlabel("audited ε lower bound (one-run canary audit, 95 %)")
    ax.set_xlim(left=-0.1)  # bounds of 0 stay visible
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=7)


def plot_accuracy_vs_epsilon(rows: list[dict], path: str, published: list | tuple = ()) -> None:
    """Per dataset, the same runs at their claimed (left) and provable (middle) ε, and audited (right).

    Runs without a proof are absent from the middle panel and named under it. Every legend entry
    names the neighbour relation of its ε (and "features only" where labels are public); methods
    without a ledger are horizontal lines, ``public_only`` labelled as ε = 0 for the private set
    (it never touches it), ``nonprivate`` as no privacy; a red × marks a run with NaN outputs
    (diverged). The right panel, drawn when the canary audit ran, places every run at its audited
    ε lower bound; a red ✕ marks a bound above the provable ε (a bug), "claim refuted" one above
    the claimed ε only. ``published`` points (``{"label", "epsilon", "accuracy"}``: a paper's own
    number, not measured here) are drawn as single markers in the claimed panel, never joined by lines.
    """
    import matplotlib.ticker

    plt = _pyplot()
    datasets = sorted({r["dataset"] for r in rows})
    audited = any(r.get("epsilon_lower_bound") is not None for r in rows)
    ncols = 3 if audited else 2
    fig, axes = plt.subplots(len(datasets), ncols, figsize=(6 * ncols, 4.6 * len(datasets)), sharey="row",
                             squeeze=False)
    for row_axes, dataset in zip(axes, datasets):
        ax_c, ax_p = row_axes[0], row_axes[1]
        subset = [r for r in rows if r["dataset"] == dataset]
        private = [r for r in subset if r["private"]]
        methods = sorted({r["method"] for r in private})
        unproven = set()
        for ax, key, title in ((ax_c, "epsilon_claimed", "claimed ε (what the paper/method states)"),
                               (ax_p, "epsilon_provable", "provable ε (what a correct proof gives)")):
            for i, method in enumerate(methods):
                mine = [r for r in private if r["method"] == method]
                pts = sorted((r[key], r["accuracy_mean"], r["accuracy_std"]) for r in mine if r[key] is not None)
                if not pts:
                    unproven.add(method)
                    continue
                x, y, e = map(np.array, zip(*pts))
                per_query = mine[0]["per"] == "query"
                ax.errorbar(x, 100 * y, yerr=100 * e, marker="s" if per_query else "o", ls=":" if per_query else "-",
                            capsize=3, color=f"C{i}",
                            label=f"{method} {scope_label(mine[0])}" + (" (ε per query)" if per_query else ""))
                diverged = [(r[key], 100 * r["accuracy_mean"]) for r in mine if r[key] is not None and r["diverged"]]
                if diverged:  # NaN outputs: the accuracy is that of a constant answer
                    shown = DIVERGED in ax.get_legend_handles_labels()[1]
                    ax.scatter(*zip(*diverged), marker="x", s=70, color="red", zorder=5, label=None if shown else DIVERGED)
            for j, r in enumerate(r for r in subset if not r["private"]):  # nonprivate, public_only: told apart
                ax.axhline(100 * r["accuracy_mean"], ls=("--", "-.", ":")[j % 3], color=("gray", "black")[j % 2],
                           label=f"{r['method']} {scope_label(r)}")
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_xlabel(title)
            ax.set_title(dataset, fontsize=9)
            ax.grid(alpha=0.3)
        for k, point in enumerate(p for p in published if p.get("accuracy") is not None):  # claims: points, not lines
            ax_c.plot([point["epsilon"]], [100 * point["accuracy"]], ls="none", marker="*^vDPX"[k % 6],
                      markersize=10, markeredgecolor="black", color=f"C{(k + 3) % 10}",
                      label=f"published: {point['label']}")
        ax_c.set_ylabel("test accuracy (%)")
        ax_c.legend(fontsize=7)
        if unproven:
            ax_p.text(0.02, 0.02, "not shown, none proven: " + ", ".join(sorted(unproven)),
                      transform=ax_p.transAxes, fontsize=8, color="crimson")
        if audited:
            _audit_panel(row_axes[2], subset, methods)
    fig.suptitle("Accuracy vs ε: the same runs at their claimed (left) and provable "
                 + ("(middle) ε; right: audited ε lower bound" if audited else "(right) ε"))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def epoch_label(row: dict) -> str:
    """Legend of one accuracy-vs-epoch curve: the method, its claimed and provable ε side by side (per
    query where so) and its neighbour relation; ε = 0 for a method that never touches the private data."""
    if not row["private"]:
        return f"{row['method']} " + ("(ε = 0: private data unused)" if row.get("private_data_unused")
                                      else "(no privacy)")
    per = " per query" if row["per"] == "query" else ""
    eps = format_epsilon(row["epsilon_claimed"], row["epsilon_provable"], row["delta"] or 0.0)
    return f"{row['method']}: {eps}{per} {scope_label(row)}"


def plot_accuracy_vs_epoch(rows: list[dict], path: str) -> None:
    """Test accuracy after every epoch, one panel per (dataset, target ε); each curve's legend shows its
    claimed and provable ε and neighbour relation (:func:`epoch_label`)."""
    plt = _pyplot()
    panels = sorted({(r["dataset"], r["epsilon_target"]) for r in rows if r["private"]},
                    key=lambda p: (p[0], p[1] or 0)) or sorted({(r["dataset"], None) for r in rows})
    methods = sorted({r["method"] for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4), sharey=True, squeeze=False)
    for ax, (dataset, eps) in zip(axes[0], panels):
        for i, method in enumerate(methods):
            for r in rows:
                if r["dataset"] == dataset and r["method"] == method and (r["epsilon_target"] == eps
                                                                          or not r["private"]):
                    curve = 100 * np.array(r["accuracy_curve_mean"])
                    ax.plot(np.arange(1, len(curve) + 1), curve, "--" if not r["private"] else "-", marker=".",
                            label=epoch_label(r), color=f"C{i}")
        ax.set_title(f"{dataset}, target ε = {eps:g}" if eps is not None else dataset, fontsize=9)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test accuracy (%)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def has_step_curves(runs: list[dict]) -> bool:
    """True if some run states its optimiser steps per epoch (the reference modes do) or its curve's steps."""
    return any(_curve_steps(r) is not None for r in runs)


def _curve_steps(run: dict):
    """The optimiser step of each point of ``run``'s curve: ``notes["curve_steps"]`` (a run that counts steps),
    else ``curve_epochs × notes["steps_per_epoch"]``; None when the run states neither."""
    notes = run.get("notes") or {}
    if notes.get("curve_steps"):
        return list(notes["curve_steps"])
    if notes.get("steps_per_epoch"):
        return [e * notes["steps_per_epoch"] for e in run["curve_epochs"]]
    return None


def step_label(run: dict) -> str:
    """Legend of one learning curve: claimed and provable ε side by side ("none proven" for the
    reference modes), never the claim alone."""
    eps = "" if run["epsilon_target"] is None else ", " + format_epsilon(run["epsilon_claimed"],
                                                                           run["epsilon_provable"])
    if run.get("ledger"):
        from ..accounting.ledger import PrivacyLedger

        eps += f" [{describe_scope(*PrivacyLedger.from_dict(run['ledger']).scope())}]"
    return f"{run['method']}{eps} (seed {run['seed']}, batch {run['notes'].get('batch_size', '?')})"


def plot_accuracy_vs_step(runs: list[dict], path: str, published=()) -> None:
    """Test accuracy against optimiser step for every run that states its steps (:func:`_curve_steps`);
    one line per (method, target ε, seed). ``published``: the papers' claimed accuracies, each drawn as a
    dotted horizontal line in the colour of its paper's first curve (points whose ``paper`` is plotted)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    colours = {}
    for i, r in enumerate(r for r in runs if _curve_steps(r) is not None):
        colours.setdefault(r.get("paper"), f"C{i % 10}")
        ax.plot(_curve_steps(r), 100 * np.array(r["accuracy_curve"]), marker=".", color=f"C{i % 10}",
                label=step_label(r))
    for point in published:
        if point.get("paper") in colours and point.get("accuracy") is not None:
            ax.axhline(100 * point["accuracy"], color=colours[point["paper"]], linestyle=":", linewidth=1.2,
                       label=f"{point['label']}: claimed {100 * point['accuracy']:.2f} % at ε = {point['epsilon']:g}")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Learning curves (accuracy vs step)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
