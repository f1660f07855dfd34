"""Choose the ``users`` preset's user-level DP-SGD recipe on a validation split, never on the test set.

Runs ``tfdpmech compare --preset users`` with ``dpsgd_user`` only on ``mnist_validation`` (the first 55,000
training images, assigned to the preset's 6,000 users by the same Zipf rule, train; the last 5,000 score) at every
point of the grid below, ε = 3, seed 0, and writes ``docs/results/users/tuning/tuning.md`` and ``tuning.json``:
each point's validation accuracy and the chosen one (the best; ties to the earlier, cheaper point), meant for
ε = 1 and 3. A point is the expected number of users per step, the epochs over the users and the SGD step; the
rest of the recipe is the record-level tanh CNN's (C = 0.1, momentum 0.9) and k = 8 records per sampled user.
Finished runs are kept in ``docs/results/users/tuning/runs.jsonl``, so the sweep resumes after a kill.

    python tools/users_tuning.py [--epsilons 3] [--stored-only]
"""

from __future__ import annotations

import argparse
import json
import os

from tfdpmech.experiments import preset_config, run_comparison
from tfdpmech.experiments.users import user_level_options
from tuning_report import write_tuning

OUT = os.path.join("docs", "results", "users", "tuning")
USERS = 6000  # the preset's users (options["users"])
# expected users per step, epochs over the users and SGD step: many users per step and few steps, as user-level
# DP-SGD takes them (McMahan et al. 2018; the record-level recipe's q gives about 51 users a step), the step grown
# with the batch as Tramèr & Boneh's recipes grow it (MNIST: 512 records, 0.5; Fashion-MNIST: 2,048, 4)
GRID = ({"expected_users": 1024, "epochs": 10, "learning_rate": 0.5},
        {"expected_users": 1024, "epochs": 10, "learning_rate": 2.0},
        {"expected_users": 1024, "epochs": 20, "learning_rate": 2.0},
        {"expected_users": 2048, "epochs": 20, "learning_rate": 4.0})


def options(point: dict) -> dict:
    """The comparison options of a grid point (the preset's users and k kept)."""
    return user_level_options(USERS, 8, point)


def sweep(epsilons=(3.0,), out=OUT, stored_only=False) -> dict:
    """Run (or, with ``stored_only``, only tabulate) the grid at each ε."""
    rows = []
    for epsilon in epsilons:
        for point in GRID:
            config = preset_config("users", datasets=("mnist_validation",), methods=("dpsgd_user",),
                                   epsilons=(epsilon,), seeds=(0,), out=out, resume=True, stored_only=stored_only,
                                   options=options(point))
            try:
                runs = run_comparison(config)["runs"]
            except ValueError:
                if not stored_only:
                    raise
                continue  # a grid point not run yet: nothing stored to tabulate
            for run in runs:
                rows.append({"epsilon": epsilon, "point": point, "validation_accuracy": run["accuracy"],
                             "steps": run["notes"].get("steps"), "seconds": run["train_seconds"]})
    chosen = {}
    for row in rows:  # in grid order: ties go to the earlier point
        best = chosen.get(str(row["epsilon"]))
        if best is None or row["validation_accuracy"] > best["validation_accuracy"]:
            chosen[str(row["epsilon"])] = row
    return {"grid": list(GRID), "runs": rows, "chosen": {eps: row["point"] for eps, row in chosen.items()}}


def write(result: dict, out=OUT) -> None:
    lines = ["# Users preset: the user-level recipe chosen on the validation split", "",
             "`python tools/users_tuning.py`: user-level DP-SGD (`dpsgd_user`, δ = 1e-5) trained on the first 55,000 "
             f"MNIST training images held by {USERS:,} users (Zipf counts, the preset's rule), scored on the last "
             "5,000 (`mnist_validation`); the test set is not read. Seed 0, k = 8 records per sampled user, the rest "
             "of the recipe the record-level tanh CNN's (C = 0.1, SGD with momentum 0.9). Grid points not listed "
             "have not run yet; the choice is over the points listed.",
             "", "| ε | users per step (expected) | epochs over users | SGD step | steps | validation accuracy | "
             "train s | chosen |", "|---|---|---|---|---|---|---|---|"]
    for row in result["runs"]:
        point = row["point"]
        mark = "yes" if result["chosen"].get(str(row["epsilon"])) == point else ""
        lines.append(f"| {row['epsilon']:g} | {point['expected_users']:,} | {point['epochs']} | "
                     f"{point['learning_rate']:g} | {row['steps']} | {100 * row['validation_accuracy']:.2f} % | "
                     f"{row['seconds']:.0f} | {mark} |")
    write_tuning(out, result, lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", default="3", help="comma-separated ε (the choice at 3 serves both ε)")
    parser.add_argument("--stored-only", action="store_true", help="train nothing: tabulate the finished runs")
    args = parser.parse_args()
    result = sweep([float(e) for e in args.epsilons.split(",")], stored_only=args.stored_only)
    write(result)
    print(json.dumps(result["chosen"], indent=2))


if __name__ == "__main__":
    main()
