"""The ``tfdpmech`` command (also ``python -m tfdpmech``)."""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["main"]


def _floats(text: str) -> tuple:
    try:
        return tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _ints(text: str) -> tuple:
    try:
        return tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _strings(text: str) -> tuple:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def _parser() -> argparse.ArgumentParser:
    from .compare import CompareConfig

    d = CompareConfig()
    parser = argparse.ArgumentParser(prog="tfdpmech", description="Noise-once DP mechanisms next to DP-SGD.")
    sub = parser.add_subparsers(dest="command", required=True)
    cmp = sub.add_parser("compare", help="train every method × ε × seed and write a report",
                         description="Side-by-side comparison. Writes results.json, results.md, "
                                     "accuracy_vs_epsilon.png and accuracy_vs_epoch.png into --out.")
    cmp.add_argument("--dataset", default=d.dataset, help=f"dataset name (default {d.dataset}: embedded MNIST sample)")
    cmp.add_argument("--methods", type=_strings, default=None,
                     help=f"comma-separated methods (default: {','.join(d.methods)}; dpsgd only where "
                          "tensorflow-privacy imports)")
    cmp.add_argument("--epsilons", type=_floats, default=d.epsilons, help="comma-separated target ε values")
    cmp.add_argument("--epochs", type=int, default=d.epochs)
    cmp.add_argument("--seeds", type=_ints, default=d.seeds, help="comma-separated seeds")
    cmp.add_argument("--batch-size", type=int, default=d.batch_size)
    cmp.add_argument("--model", default=d.model, help="mlp (default) or cnn (the paper's MNIST network)")
    cmp.add_argument("--delta", type=float, default=d.delta, help="δ for DP-SGD")
    cmp.add_argument("--learning-rate", type=float, default=d.learning_rate)
    cmp.add_argument("--out", default=d.out, help="output directory")
    cmp.add_argument("--quiet", action="store_true", help="no per-epoch progress lines")
    cmp.add_argument("--no-audit", action="store_true",
                     help="skip tensorflow-privacy's membership-inference attacks after each run")
    sub.add_parser("methods", help="list the registered methods")
    exp = sub.add_parser("experiment", help="run one paper's experiment (pass --help after its name)",
                         description="Experiments that do not fit the image runner: " + ", ".join(EXPERIMENTS))
    exp.add_argument("name", choices=sorted(EXPERIMENTS))
    exp.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the experiment, e.g. --quick")
    return parser


# name -> module with a main(argv) entry point
EXPERIMENTS = {
    "dp_erm": "tfdpmech.experiments.dp_erm",
    "output_perturbation": "tfdpmech.experiments.output_perturbation",
    "pcdbn_mnist": "tfdpmech.experiments.pcdbn_mnist",
}


def main(argv=None) -> int:
    """Entry point; returns the exit status. Errors in the arguments print one line, no traceback."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = _parser().parse_args(argv)
    from .compare import METHODS, CompareConfig, available_default_methods, run_comparison
    from .report import check_writable, markdown_table, summarize, write_report

    if args.command == "experiment":
        import importlib

        return int(importlib.import_module(EXPERIMENTS[args.name]).main(args.args) or 0)
    if args.command == "methods":
        width = max(map(len, METHODS))
        for name, method in METHODS.items():
            print(f"{name:{width}s}  {method.description}")
        return 0
    methods = args.methods
    if methods is None:
        methods = available_default_methods(lambda text: print(f"tfdpmech: note: {text}", file=sys.stderr))
    config = CompareConfig(dataset=args.dataset, methods=methods, epsilons=args.epsilons, seeds=args.seeds,
                           epochs=args.epochs, batch_size=args.batch_size, model=args.model, delta=args.delta,
                           learning_rate=args.learning_rate, out=args.out, verbose=0 if args.quiet else 1,
                           audit=not args.no_audit)
    try:
        config.validate()
        check_writable(args.out)
    except (ValueError, TypeError) as exc:
        print(f"tfdpmech: error: {exc}", file=sys.stderr)
        return 2
    try:
        results = run_comparison(config)
    except (ValueError, TypeError, RuntimeError) as exc:
        print(f"tfdpmech: error: {exc}", file=sys.stderr)
        return 1
    print(markdown_table(summarize(results)))
    files = write_report(results, args.out)
    print("wrote " + ", ".join(files.values()))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
