"""``tfdpmech bench`` (``make bench``): throughput, time-to-accuracy and peak memory of each method.

Every method runs through the same :func:`~tfdpmech.experiments.runner.run_one` as in
``tfdpmech compare``, at the same model, batch size and target ε. Measurements are repeated
(``--repeats``, at least 5 by default) with the methods **interleaved** (repeat r runs every
method once, in a rotated order), so drifts of a shared machine hit every method alike. Each
ratio to the non-private baseline is taken within a repeat; the report gives the median and the
spread (min–max and interquartile range) over repeats. Peak memory is measured per method in a
**fresh process**: the growth of its RSS during the run over the RSS at the run's start (on a GPU the
allocator's peak), next to the whole process's peak RSS and that of a process that only imports
and loads the data. The device is recorded.

The default public split is 500 records (``--public``): there the public model alone stays below
DP-SGD's accuracy, so a method reaches DP-SGD's accuracy only by learning from the private
records, and "time to DP-SGD's accuracy" measures that (with 1,000 public records the public model
alone is above DP-SGD, and the same number would only say how cheap a method's private step is).

Methods that use public data train the public model once per seed, outside their own time (it is
ε = 0 for the private set and reusable across ε and runs); its seconds are reported beside, with
the time to DP-SGD's accuracy both without and with it. ``public_only`` is always in the table, so
a reader sees what the public model reaches without touching the private data.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from ..validation import check_positive_int
from .measuring import device_description
from .runner import CompareConfig, run_one
from .context import build_context
from .peak_rss import peak_rss_mib
from .registry import METHODS, available_methods

__all__ = ["BENCH_METHODS", "main", "bench_config", "time_to_accuracy", "summarize_repeats"]

BENCH_METHODS = ("nonprivate", "public_only", "dpsgd", "dpsgd_shuffled", "fm_head_gauss", "outpert_head",
                 "adlm_per_record", "ilm_per_record", "outpert_paper_bound")


def time_to_accuracy(run: dict, target: float) -> float | None:
    """Seconds from the start of the run (private preprocessing included) until the test accuracy
    first reaches ``target`` (None if it never does).

    The accuracy is measured after the epochs in ``curve_epochs`` (every few epochs on long runs), so
    reaching it at epoch e costs every epoch up to e. A run without recorded epochs (a closed form)
    costs its preprocessing and its ``train_seconds``.
    """
    seconds = run["seconds_per_epoch"]
    if not seconds:
        return run["preprocessing_seconds"] + run["train_seconds"] if max(run["accuracy_curve"]) >= target else None
    done = np.cumsum(seconds)
    epochs = run.get("curve_epochs") or range(1, len(run["accuracy_curve"]) + 1)
    for epoch, accuracy in zip(epochs, run["accuracy_curve"]):
        if accuracy >= target:
            return run["preprocessing_seconds"] + float(done[min(epoch, len(done)) - 1])
    return None


def summarize_repeats(values) -> dict | None:
    """Median, min, max and interquartile range of the finite values (None if there are none)."""
    values = np.array([v for v in values if v is not None and np.isfinite(v)], float)
    if not len(values):
        return None
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    return {"median": float(med), "min": float(values.min()), "max": float(values.max()), "iqr": float(q3 - q1),
            "repeats": int(len(values))}


def _config(args, methods) -> CompareConfig:
    # DP-SGD runs its stated recipe (40 epochs on the MLP family), as in `tfdpmech compare`: its final accuracy
    # is the target of time-to-accuracy. dpsgd (Poisson) and dpsgd_shuffled share every hyper-parameter but
    # the sampling; throughput is per example, so the epoch counts do not bias the ratios.
    options = {"max_private": args.max_private} if args.max_private else {}
    return CompareConfig(methods=methods, epsilons=(args.epsilon,), seeds=(0,), epochs=args.epochs,
                         batch_size=200, model="mlp", audit=(), verbose=0, options=options, preset="bench",
                         public=getattr(args, "public", 500)).validate()


def bench_config(args, note=lambda text: None) -> CompareConfig:
    """The bench's configuration from its flags, checked by the same :meth:`CompareConfig.validate`
    as ``tfdpmech compare`` before anything is loaded or trained.

    Without ``--methods`` the methods of :data:`BENCH_METHODS` this installation cannot run are
    skipped (told to ``note``); named ones are checked as named.

    Raises:
        ValueError / TypeError: a setting ``tfdpmech compare`` would refuse (an unknown or
            unavailable method, ε, epochs, a negative ``--max-private``), or ``--repeats`` < 1.
    """
    check_positive_int(args.repeats, "repeats (--repeats)")
    methods = available_methods(BENCH_METHODS, note) if args.methods is None else tuple(args.methods)
    return _config(args, methods)


def _memory_probe(method: str, args) -> dict:
    """Peak RSS of a fresh process running one run of ``method`` ("load" = data and imports only)."""
    cmd = [sys.executable, "-m", "tfdpmech.experiments.bench", "--memory-probe", method, "--epochs", str(args.epochs),
           "--epsilon", str(args.epsilon), "--max-private", str(args.max_private or 0),
           "--public", str(getattr(args, "public", 500))]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout.strip().splitlines()[-1]
    return json.loads(out)


def _probe_main(method: str, args) -> int:
    from .measuring import PeakMemory

    config = _config(args, ("nonprivate",) if method == "load" else (method,))
    ctx = build_context(config, config.datasets[0])
    run_peak, kind = 0, None
    if method != "load":
        with PeakMemory() as memory:
            run_one(ctx, METHODS[method], args.epsilon if METHODS[method].takes_epsilon else None, 0)
        run_peak, kind = memory.peak_bytes, memory.kind
    # the whole process, imports and data loading included
    print(json.dumps({"process_peak_rss_bytes": int(peak_rss_mib() * 2**20),
                      "run_peak_bytes": run_peak, "run_peak_kind": kind}))
    return 0


def run_bench(args, log=print, config: CompareConfig | None = None) -> dict:
    config = bench_config(args) if config is None else config
    methods = tuple(config.methods)
    ctx = build_context(config, config.datasets[0])
    log(f"bench: {len(methods)} methods × {args.repeats} repeats (interleaved), {args.epochs} epochs, "
        f"{ctx.n_private} private records, target ε = {args.epsilon}, {device_description()}")
    runs = {m: [] for m in methods}
    for r in range(args.repeats):
        order = methods[r % len(methods):] + methods[:r % len(methods)]
        for name in order:
            m = METHODS[name]
            runs[name].append(run_one(ctx, m, args.epsilon if m.takes_epsilon else None, r).to_dict())
        log(f"  repeat {r + 1}/{args.repeats} done")
    base = "nonprivate" if "nonprivate" in methods else methods[0]
    target = float(np.median([run["accuracy"] for run in runs["dpsgd"]])) if "dpsgd" in runs else None
    out = {"environment": {"device": device_description(), "cpu_count": os.cpu_count()},
           "settings": {"repeats": args.repeats, "epochs": args.epochs, "epsilon": args.epsilon,
                        "private_records": ctx.n_private, "batch_size": config.batch_size, "model": config.model},
           "baseline": base, "dpsgd_final_accuracy_median": target, "methods": {}}
    # one steady non-private epoch (the first includes tracing) within each repeat: the unit of the
    # private-part cost of the noise-once methods (statistics + release + solve happen in preprocessing)
    base_epoch = [float(np.median(run["seconds_per_epoch"][1:] or run["seconds_per_epoch"] or [run["train_seconds"]]))
                  for run in runs[base]]
    for name in methods:
        ratios = [a["examples_per_second"] / b["examples_per_second"] for a, b in zip(runs[name], runs[base])
                  if a["examples_per_second"] and b["examples_per_second"]]
        tta = [time_to_accuracy(run, target) for run in runs[name]] if target is not None else []
        public = [(run["notes"] or {}).get("public_training_seconds") for run in runs[name]]
        tta_public = [t + p if t is not None and p is not None else None for t, p in zip(tta, public)]
        tta_dpsgd = [time_to_accuracy(run, target) for run in runs.get("dpsgd", [])]
        # a method that never touches the private records (public_only) has no private step to compare
        private = [(run["notes"] or {}).get("private_records_used") != 0 for run in runs[name]]
        speedup = [d / t for t, d, p in zip(tta, tta_dpsgd, private) if t and d and p]
        speedup_public = [d / t for t, d in zip(tta_public, tta_dpsgd) if t and d]
        out["methods"][name] = {
            "privacy": privacy_of(runs[name]),
            "examples_per_second": summarize_repeats([r["examples_per_second"] for r in runs[name]]),
            "throughput_ratio_to_baseline": summarize_repeats(ratios),
            "preprocessing_seconds": summarize_repeats([r["preprocessing_seconds"] for r in runs[name]]),
            "preprocessing_over_one_baseline_epoch": summarize_repeats(
                [r["preprocessing_seconds"] / e for r, e in zip(runs[name], base_epoch) if e > 0]),
            # the functional head's statistics + release + solve alone (its notes time the parts of fit)
            "statistics_release_solve_over_one_baseline_epoch": summarize_repeats(
                [r["notes"]["statistics_release_solve_seconds"] / e for r, e in zip(runs[name], base_epoch)
                 if e > 0 and "statistics_release_solve_seconds" in (r["notes"] or {})]),
            "accuracy": summarize_repeats([r["accuracy"] for r in runs[name]]),
            "time_to_dpsgd_accuracy_seconds": summarize_repeats(tta),
            "time_to_accuracy_speedup_vs_dpsgd": summarize_repeats(speedup),
            # the one-off public pre-training (ε = 0), outside the method's own time, and the same with it
            "public_training_seconds": summarize_repeats(public),
            "time_to_dpsgd_accuracy_with_public_training_seconds": summarize_repeats(tta_public),
            "time_to_accuracy_with_public_training_speedup_vs_dpsgd": summarize_repeats(speedup_public),
        }
    if "dpsgd" in runs and "dpsgd_shuffled" in runs:  # Poisson over shuffled batches, within each repeat
        out["dpsgd_poisson_over_shuffled_throughput"] = summarize_repeats(
            [a["examples_per_second"] / b["examples_per_second"] for a, b in zip(runs["dpsgd"], runs["dpsgd_shuffled"])
             if a["examples_per_second"] and b["examples_per_second"]])
    if not args.no_memory:
        out["memory_baseline_process_peak_rss_bytes"] = _memory_probe("load", args)["process_peak_rss_bytes"]
        for name in methods:
            out["methods"][name]["peak_memory"] = _memory_probe(name, args)
    return out


def privacy_of(runs: list[dict]) -> dict:
    """Claimed and provable ε, δ, neighbour relation and protection of a method's bench runs (the
    largest over repeats; provable None, i.e. none proven, if any repeat has none), as a summary row."""
    from ..report.tables import summarize

    (row,) = summarize({"runs": [{**r, "epsilon_target": runs[0]["epsilon_target"], "dataset": "bench"}
                                 for r in runs]})
    keys = ("private", "private_data_unused", "per", "epsilon_claimed", "epsilon_provable", "delta", "neighbours",
            "protects")
    out = {k: row[k] for k in keys}
    if row["epsilon_claimed"] is not None:
        out["epsilon_claimed"] = max(r["epsilon_claimed"] for r in runs)
    return out


def _print(out: dict, log=print) -> None:
    from ..report.tables import epsilon_cells, scope_cell

    repeats = out["settings"]["repeats"]

    def cell(s, fmt=".3g"):
        if s is None:
            return "–"
        some = s.get("repeats", repeats) < repeats  # e.g. only some repeats reached DP-SGD's accuracy
        return (f"{s['median']:{fmt}} [{s['min']:{fmt}}–{s['max']:{fmt}}]"
                + (f" ({s['repeats']} of {repeats} repeats)" if some else ""))

    log(f"\n| method | claimed ε | provable ε | neighbours, protects | accuracy | examples/s | ratio to {out['baseline']} | private preprocessing s "
        f"(÷ one {out['baseline']} epoch) | time to DP-SGD's accuracy s | speed-up vs DP-SGD "
        "| public training s (once, ε = 0) | time to DP-SGD's accuracy with it s | speed-up with it "
        "| peak memory of the run MB (fresh process) |")
    log("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, m in out["methods"].items():
        mem = m.get("peak_memory")
        mem_mb = "–" if not mem else f"{mem['run_peak_bytes'] / 2**20:.0f}"
        claimed, provable = epsilon_cells(m["privacy"])
        log(f"| {name} | {claimed} | {provable} | {scope_cell(m['privacy'])} "
            f"| {cell(m['accuracy'], '.4f')} | {cell(m['examples_per_second'], '.0f')} "
            f"| {cell(m['throughput_ratio_to_baseline'])} | {cell(m['preprocessing_seconds'])} "
            f"({cell(m['preprocessing_over_one_baseline_epoch'])}) | {cell(m['time_to_dpsgd_accuracy_seconds'])} "
            f"| {cell(m['time_to_accuracy_speedup_vs_dpsgd'])} | {cell(m['public_training_seconds'])} "
            f"| {cell(m['time_to_dpsgd_accuracy_with_public_training_seconds'])} "
            f"| {cell(m['time_to_accuracy_with_public_training_speedup_vs_dpsgd'])} | {mem_mb} |")
    for name, m in out["methods"].items():
        core = m.get("statistics_release_solve_over_one_baseline_epoch")
        if core:
            log(f"{name}: statistics + release + solve alone = {cell(core)} {out['baseline']} epochs "
                "(the rest of its preprocessing computes the private records' features)")
    ratio = out.get("dpsgd_poisson_over_shuffled_throughput")
    if ratio:
        log(f"DP-SGD throughput, Poisson / shuffled batches: {cell(ratio)}")
    log("median [min–max] over repeats (over the repeats that reached it, where fewer: k of n); ratios taken within "
        "each repeat")


def main(args, config: CompareConfig | None = None) -> int:
    """Entry point of ``tfdpmech bench`` (``args`` from the CLI parser, ``config`` from
    :func:`bench_config`, which the CLI calls first to refuse bad flags in one line)."""
    out = run_bench(args, config=config)
    _print(out)
    if not getattr(args, "no_dpsgd_speed", False):
        from . import dpsgd_speed

        print("\nDP-SGD engines on the same model and batch:")
        out["dpsgd_speed"] = dpsgd_speed.run(repeats=args.repeats, memory=not args.no_memory)
        print(dpsgd_speed.format_table(out["dpsgd_speed"]))
    if not getattr(args, "no_sources", False):
        from . import source_bench

        print("\nA DP-SGD fit from a NumPy memmap and from memory:")
        out["sources"] = source_bench.run(repeats=args.repeats)
        print(source_bench.format_table(out["sources"]))
    if not getattr(args, "no_scale", False):
        from . import scale_bench

        print("\nThe functional head's private step at scale (fresh process per size):")
        out["scale"] = scale_bench.run()
        print(scale_bench.format_table(out["scale"]))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=2)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":  # the fresh process of a memory probe
    import argparse

    from ..cli_args import add_bench_arguments

    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    parser.add_argument("--memory-probe", required=True)
    ns = parser.parse_args()
    ns.max_private = ns.max_private or None
    raise SystemExit(_probe_main(ns.memory_probe, ns))
