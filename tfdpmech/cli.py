"""The ``tfdpmech`` command (also ``python -m tfdpmech``): compare | methods | bench.

Every list flag is spelled one way: comma-separated (``--epsilons 0.5,2,8``, ``--seeds 0,1``,
``--methods a,b``, ``--dataset a,b``, ``--audit mia,canary``).
"""

from __future__ import annotations

import argparse
import os
import sys

from .cli_args import add_bench_arguments, audit_list, comma_floats, comma_ints, comma_strings, public_source

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfdpmech", description="Noise-once DP mechanisms next to DP-SGD.")
    sub = parser.add_subparsers(dest="command", required=True)
    cmp = sub.add_parser("compare", help="train every method × ε × seed and write a report",
                         description="Side-by-side comparison through the one runner. Writes results.json, "
                                     "results.md, accuracy_vs_epsilon.png and accuracy_vs_epoch.png into --out. "
                                     "Flags override the preset's settings.")
    cmp.add_argument("--preset", default="demo", help="a named configuration (`tfdpmech methods` lists them)")
    cmp.add_argument("--quick", action="store_true", help="the preset's quick variant (same code path, seconds)")
    cmp.add_argument("--dataset", type=comma_strings, default=None, help="comma-separated dataset names")
    cmp.add_argument("--methods", type=comma_strings, default=None,
                     help="comma-separated methods (default: the preset's; dpsgd only where tensorflow-privacy imports)")
    cmp.add_argument("--epsilons", type=comma_floats, default=None, help="comma-separated target ε values")
    cmp.add_argument("--seeds", type=comma_ints, default=None, help="comma-separated seeds")
    cmp.add_argument("--epochs", type=int, default=None)
    cmp.add_argument("--batch-size", type=int, default=None)
    cmp.add_argument("--model", default=None, help="mlp or cnn (images), linear (tabular)")
    cmp.add_argument("--delta", type=float, default=None, help="δ of the (ε, δ) methods on image data")
    cmp.add_argument("--public", type=public_source, default=None,
                     help="public data: N training records kept out of the private set, a source name, or 0")
    cmp.add_argument("--learning-rate", type=float, default=None)
    cmp.add_argument("--users", type=int, default=None,
                     help="assign the private records to this many users (Zipf counts): dpsgd_user's units, and the "
                          "largest user's group-privacy ε beside every record-level row")
    cmp.add_argument("--steps", type=int, default=None,
                     help="optimiser steps of the rows that count steps (preset mnist-papers-authors: default the "
                          "authors' 80,001; a larger value later continues a run from its saved state)")
    cmp.add_argument("--audit", type=audit_list, default=None, help="comma-separated audits (mia, canary) or none")
    cmp.add_argument("--out", default=None, help="output directory (default: the preset's, else results)")
    cmp.add_argument("--resume", action=argparse.BooleanOptionalAction, default=None,
                     help="keep each finished run in OUT/runs.jsonl and skip the runs found there, and each "
                          "finished epoch of a DP-SGD run in OUT/parts/ to continue from "
                          "(default: the preset's; on for the long presets). A resumed preset narrowed by --methods, "
                          "--epsilons or --seeds alone writes the whole preset's report of its finished runs")
    cmp.add_argument("--stored-only", action="store_true",
                     help="train nothing: write the report of the finished runs in OUT/runs.jsonl and list the rest")
    cmp.add_argument("--quiet", action="store_true", help="no progress line")
    sub.add_parser("methods", help="list the registered methods and presets")
    bench = sub.add_parser("bench", help="throughput, time-to-accuracy and peak memory of each method (repeated)")
    add_bench_arguments(bench)
    return parser


def note(text: str) -> None:
    """A one-line note on stderr (e.g. a default method this installation cannot run)."""
    print(f"tfdpmech: note: {text}", file=sys.stderr)


def usage_error(exc: Exception) -> int:
    """Print a refused setting in one line, no traceback; the exit status of a usage error."""
    print(f"tfdpmech: error: {exc}", file=sys.stderr)
    return 2


def _compare(args) -> int:
    from .experiments import preset_config, run_comparison
    from .experiments.registry import available_methods, method as get_method
    from .report import check_writable, markdown_table, summarize, write_report

    try:
        config = preset_config(args.preset, quick=args.quick, datasets=args.dataset, methods=args.methods,
                               epsilons=args.epsilons, seeds=args.seeds, epochs=args.epochs,
                               batch_size=args.batch_size, model=args.model, delta=args.delta, public=args.public,
                               learning_rate=args.learning_rate, audit=args.audit, out=args.out,
                               resume=args.resume, stored_only=args.stored_only or None,
                               verbose=0 if args.quiet else 1)
        for option in ("users", "steps"):
            if getattr(args, option) is not None:
                config.options = {**(config.options or {}), option: getattr(args, option)}
        # the preset's list: skip what this installation cannot run, visibly (a report of stored runs trains
        # nothing, so it keeps every method: runs made on another stack stay in it)
        if args.methods is None and not config.stored_only:
            kept = available_methods(config.methods, note)
            config.left_out = {name: get_method(name).unavailable() for name in config.methods if name not in kept}
            config.methods = kept
        config.validate()
        check_writable(config.out)
    except (ValueError, TypeError) as exc:
        return usage_error(exc)
    try:
        results = run_comparison(config)
        whole = _whole_preset(args, config)
        # a resumable preset narrowed to some of its methods, ε or seeds: its report stays the whole preset's,
        # from the finished runs of its plan (which now hold this invocation's)
        reported = results if whole is None else run_comparison(whole)
    except (ValueError, TypeError, RuntimeError) as exc:
        print(f"tfdpmech: error: {exc}", file=sys.stderr)
        return 1
    print(markdown_table(summarize(reported)))
    files = write_report(reported, config.out)
    print("wrote " + ", ".join(files.values()))
    return _audit_exit_status(results)


def _whole_preset(args, config):
    """The preset's whole plan as a report of its stored runs (``stored_only``), when this invocation resumed a
    preset narrowed only by ``--methods``, ``--epsilons`` or ``--seeds`` (every other setting the preset's, its own
    output folder); else None."""
    from .experiments import preset_config

    narrowed = any(v is not None for v in (args.methods, args.epsilons, args.seeds))
    changed = any(v is not None for v in (args.dataset, args.epochs, args.batch_size, args.model, args.delta,
                                          args.public, args.learning_rate, args.users, args.steps, args.audit,
                                          args.out))
    if args.quick or not narrowed or changed or not config.resume or config.stored_only:
        return None
    return preset_config(args.preset, stored_only=True, verbose=config.verbose)


AUDIT_BUG_EXIT = 3


def _audit_exit_status(results: dict) -> int:
    """Print the canary audit's findings (bugs in red) and return :data:`AUDIT_BUG_EXIT` if any bug.

    A lower bound above a provable ε means the proof or the code is wrong; above a claimed ε
    only, the claim is refuted (reported, not an error). ANSI colours unless ``NO_COLOR`` is set.
    """
    from .accounting.display import epsilon_lower, epsilon_upper
    from .audit.canary import VERDICT_BUG
    from .report import audit_findings

    red, reset = ("", "") if os.environ.get("NO_COLOR") else ("\033[1;31m", "\033[0m")
    bugs = 0
    for f in audit_findings(results):
        eps = "" if f["epsilon_target"] is None else f" target ε={f['epsilon_target']:g}"
        where = f"{f['dataset']} {f['method']}{eps} seed {f['seed']}"
        per = " per query, compared as m·ε" if f["per"] == "query" else ""
        if f["verdict"] == VERDICT_BUG:
            bugs += 1
            print(f"{red}tfdpmech: AUDIT FAILED: {where}: ε lower bound {epsilon_lower(f['epsilon_lower_bound'])} > "
                  f"provable ε {epsilon_upper(f['epsilon_provable'])}{per}: the proof or the code is wrong{reset}", file=sys.stderr)
        else:
            print(f"tfdpmech: claim refuted by audit: {where}: ε lower bound {epsilon_lower(f['epsilon_lower_bound'])} "
                  f"> claimed ε {epsilon_upper(f['epsilon_claimed'])}{per}", file=sys.stderr)
    return AUDIT_BUG_EXIT if bugs else 0


def _methods() -> int:
    from .experiments import METHODS, PRESETS

    width = max(map(len, METHODS))
    print("methods (mode: reference = claimed as the paper/authors ran it, private = proven, none = no privacy):")
    for name, m in METHODS.items():
        print(f"  {name:{width}s}  [{m.mode}] {m.description}")
    print("presets (tfdpmech compare --preset NAME [--quick]):")
    for name, p in PRESETS.items():
        print(f"  {name:{width}s}  {p.description}")
    return 0


def main(argv=None) -> int:
    """Entry point; returns the exit status. Errors in the arguments print one line, no traceback."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = _parser().parse_args(argv)
    if args.command == "methods":
        return _methods()
    if args.command == "bench":
        from .experiments.bench import bench_config, main as bench_main

        try:
            config = bench_config(args, note)
        except (ValueError, TypeError) as exc:
            return usage_error(exc)
        return bench_main(args, config)
    return _compare(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
