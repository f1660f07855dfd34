"""Choose the whole-MNIST preset's DP-SGD epochs on a validation split, never on the test set.

Runs ``tfdpmech compare --preset mnist`` on ``mnist_validation`` (the first 55,000 training images
train, the last 5,000 score) for every (method, ε) over the epoch grid below, seed 0, and writes
``docs/results/mnist/tuning/tuning.md`` and ``tuning.json``: the validation accuracy of each grid
point and the chosen epochs (the best; ties to fewer epochs). Finished runs are kept in
``docs/results/mnist/tuning/runs.jsonl`` and not run again, so the sweep resumes after a kill.

    python tools/mnist_tuning.py [--methods dpsgd,dpsgd_scatter] [--epsilons 3,1,0.25,0.5,2] [--stored-only]
"""

from __future__ import annotations

import argparse
import json
import os

from tfdpmech.experiments import preset_config, run_comparison

OUT = os.path.join("docs", "results", "mnist", "tuning")
GRID = {"dpsgd": (20, 40), "dpsgd_scatter": (20, 40)}  # epochs; the other settings are the published recipes
OPTION = {"dpsgd": "dpsgd_epochs", "dpsgd_scatter": "scatter_epochs"}


def sweep(methods, epsilons, out=OUT, stored_only=False) -> dict:
    rows = []
    for method in methods:
        for epsilon in epsilons:
            for epochs in GRID[method]:
                config = preset_config("mnist", datasets=("mnist_validation",), methods=(method,),
                                       epsilons=(epsilon,), seeds=(0,), audit=(), out=out, resume=True,
                                       stored_only=stored_only, options={OPTION[method]: epochs})
                for run in run_comparison(config)["runs"]:
                    rows.append({"method": method, "epsilon": epsilon, "epochs": epochs,
                                 "validation_accuracy": run["accuracy"], "train_seconds": run["train_seconds"]})
    chosen = {}
    for row in sorted(rows, key=lambda r: r["epochs"]):  # ties go to fewer epochs
        best = chosen.setdefault(row["method"], {}).get(str(row["epsilon"]))
        if best is None or row["validation_accuracy"] > best["validation_accuracy"]:
            chosen[row["method"]][str(row["epsilon"])] = row
    return {"grid": GRID, "runs": rows,
            "chosen": {m: {e: r["epochs"] for e, r in by_eps.items()} for m, by_eps in chosen.items()}}


def write(result: dict, out=OUT) -> None:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tuning.json"), "w") as fh:
        json.dump(result, fh, indent=2)
    lines = ["# Whole-MNIST preset: epochs chosen on the validation split", "",
             "`python tools/mnist_tuning.py`: trained on the first 55,000 MNIST training images, scored on the last "
             "5,000 (`mnist_validation`); the test set is not read. Seed 0; every other setting is the published "
             "recipe (`tfdpmech.experiments.methods.mnist_recipes`). Grid points not listed have not run yet. Seconds are "
             "wall time on a 2-core CPU shared with other jobs.", "",
             "| method | ε | epochs | validation accuracy | train s | chosen |", "|---|---|---|---|---|---|"]
    for row in result["runs"]:
        mark = "yes" if result["chosen"][row["method"]][str(row["epsilon"])] == row["epochs"] else ""
        lines.append(f"| `{row['method']}` | {row['epsilon']:g} | {row['epochs']} | "
                     f"{100 * row['validation_accuracy']:.2f} % | {row['train_seconds']:.0f} | {mark} |")
    with open(os.path.join(out, "tuning.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="dpsgd,dpsgd_scatter")
    parser.add_argument("--epsilons", default="3,1,0.25,0.5,2")
    parser.add_argument("--stored-only", action="store_true", help="train nothing: tabulate the finished runs")
    args = parser.parse_args()
    result = sweep(args.methods.split(","), [float(e) for e in args.epsilons.split(",")], stored_only=args.stored_only)
    write(result)
    print(json.dumps(result["chosen"], indent=2))


if __name__ == "__main__":
    main()
