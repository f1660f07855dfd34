"""Time the whole-MNIST ``dpsgd`` row on this checkout's DP-SGD engine against an older commit's, interleaved.

Runs ``python -m tfdpmech compare --preset mnist --methods dpsgd --epsilons 1 --seeds 0 --no-resume`` (the tanh
CNN at Tramèr & Boneh's recipe, 20 epochs on the 60,000 MNIST training images) alternately in a worktree of
``--baseline`` and in this checkout, ``--pairs`` times, each in a fresh process, and writes
``<out>/speedup.md`` and ``speedup.json``: each run's train seconds and test accuracy, the medians and their
ratio. Each finished run's ``results.json`` is kept under ``<out>/runs/`` and not run again, so it resumes.
``TFDPMECH_DATA_DIR`` must name a folder with ``mnist/``.

    python tools/engine_speedup.py [--baseline 72ee5e8] [--pairs 3] [--stored-only]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "results", "mnist_engine_speedup")
COMMAND = ["-m", "tfdpmech", "compare", "--preset", "mnist", "--methods", "dpsgd", "--epsilons", "1", "--seeds", "0",
           "--no-resume"]


def _run(checkout: str, out: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, *COMMAND, "--out", tmp], cwd=checkout, check=True,
                       stdout=subprocess.DEVNULL)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        os.replace(os.path.join(tmp, "results.json"), out)


def _measured(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        (run,) = json.load(f)["runs"]
    return {"train_seconds": run["train_seconds"], "accuracy": run["accuracy"]}


def measure(baseline: str, pairs: int, out: str = OUT, stored_only: bool = False) -> dict:
    """Run (or, with ``stored_only``, only read) ``pairs`` interleaved pairs; the summary."""
    paths = {(engine, i): os.path.join(out, "runs", f"{engine}_{i}.json")
             for i in range(1, pairs + 1) for engine in ("baseline", "current")}
    if not stored_only and not all(os.path.exists(p) for p in paths.values()):
        worktree = tempfile.mkdtemp(prefix="tfdpmech-baseline-")
        subprocess.run(["git", "worktree", "add", "--detach", worktree, baseline], cwd=ROOT, check=True)
        try:
            for (engine, _), path in paths.items():  # baseline, current, baseline, current, ...
                if not os.path.exists(path):
                    _run(worktree if engine == "baseline" else ROOT, path)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", worktree], cwd=ROOT, check=True)
    runs = {f"{engine}_{i}": _measured(path) for (engine, i), path in paths.items() if os.path.exists(path)}
    medians = {engine: statistics.median(r["train_seconds"] for name, r in runs.items() if name.startswith(engine))
               for engine in ("baseline", "current") if any(name.startswith(engine) for name in runs)}
    speedup = medians["baseline"] / medians["current"] if len(medians) == 2 else None
    return {"baseline": baseline, "command": "python " + " ".join(COMMAND), "runs": runs,
            "median_train_seconds": medians, "speedup": speedup}


def write(result: dict, out: str = OUT) -> None:
    lines = ["# The whole-MNIST `dpsgd` row: this engine against an older one", "",
             f"`python tools/engine_speedup.py --baseline {result['baseline']}`: `{result['command']}` (the tanh CNN, "
             "Tramèr & Boneh's recipe, target ε = 1, proven by each run's ledger, 20 epochs, 60,000 training "
             "images) run alternately on commit "
             f"`{result['baseline']}` (baseline) and on the checkout the tool ran in (current), each in a fresh process on the same "
             "2-core CPU, nothing else training.", "",
             "| run | train seconds | test accuracy |", "|---|---|---|"]
    lines += [f"| {name} | {r['train_seconds']:.1f} | {100 * r['accuracy']:.2f} % |"
              for name, r in result["runs"].items()]
    medians = result["median_train_seconds"]
    lines += ["", "Median train seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in medians.items())
              + (f"; baseline ÷ current: {result['speedup']:.2f}." if result["speedup"] else ".")]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "speedup.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "speedup.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="72ee5e8", help="the commit to compare with")
    parser.add_argument("--pairs", type=int, default=3, help="interleaved pairs of runs")
    parser.add_argument("--stored-only", action="store_true", help="run nothing: summarise the kept runs")
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error(f"--pairs={args.pairs}: give at least 1")
    result = measure(args.baseline, args.pairs, stored_only=args.stored_only)
    write(result)
    print(json.dumps(result["median_train_seconds"]), result["speedup"])


if __name__ == "__main__":
    main()
