"""Choose the whole-MNIST preset's settings on a validation split, never on the test set.

Runs ``tfdpmech compare --preset mnist`` on ``mnist_validation`` (the first 55,000 training images
train, the last 5,000 score) for every (method, ε) over the grid below, seed 0, and writes
``docs/results/mnist/tuning/tuning.md`` and ``tuning.json``: the validation accuracy of each grid
point and the chosen one (the best; ties to the earlier point, which is cheaper). A grid point is
the epochs and any other changes to the published recipe (``mnist_recipes``); for
``dpsgd_augmult``, also the views per record K (``augmult_k``); for the
noise-once head on scattering features, the random projection's dimension. Finished runs are
kept in ``docs/results/mnist/tuning/runs.jsonl`` and not run again, so the sweep resumes after a kill.

    python tools/mnist_tuning.py [--methods dpsgd,dpsgd_scatter,fm_head_scatter,dpsgd_augmult]
                                 [--epsilons 3,1,0.25,0.5,2] [--points 0,1] [--stored-only]
"""

from __future__ import annotations

import argparse
import json
import os

from tfdpmech.experiments import preset_config, run_comparison
from tfdpmech.experiments.registry import METHODS
from tuning_report import write_tuning

OUT = os.path.join("docs", "results", "mnist", "tuning")
# grid points: the epochs and the changes to the published recipe (the rest of it is kept)
_EPOCHS = ({"epochs": 20}, {"epochs": 40})
_SCHEDULES = tuple({**p, change: value} for change, value in (("lr_schedule", "cosine"), ("ema_momentum", 0.999))
                   for p in _EPOCHS)
# the noise-once head on scattering features: the random projection's dimension (a setting, ε = 0)
_UNITS = tuple({"units": units} for units in (64, 128, 256, 512))
# the linear model on ScatterNet features: also Tramèr & Boneh's Fashion-MNIST batch and step (expected batch 8,192,
# step 16: the same noise per record over fewer, larger steps)
_LARGE_BATCH = tuple({**p, "expected_batch_size": 8192, "learning_rate": 16.0} for p in _EPOCHS)
# augmentation multiplicity: the views per record (the preset's K = 4, and 8), at the epochs dpsgd chose at ε = 1
_VIEWS = tuple({"epochs": 20, "augmult_k": k} for k in (4, 8))
GRID = {"dpsgd": _EPOCHS + _SCHEDULES, "dpsgd_scatter": _EPOCHS + _LARGE_BATCH, "fm_head_scatter": _UNITS,
        "dpsgd_augmult": _VIEWS}
EPSILONS = (3.0, 1.0, 0.25, 0.5, 2.0)
PREFIX = {"dpsgd": "dpsgd", "dpsgd_scatter": "scatter", "dpsgd_augmult": "dpsgd"}
METHOD_OPTIONS = ("augmult_k", "scatter_norm")  # grid keys that are options of the method, not changes to its recipe


def _options(method: str, point: dict) -> dict:
    if "units" in point:
        return {"scatter_units": point["units"]}
    if method not in PREFIX:  # a method without a DP-SGD recipe (nonprivate): the point is its options
        return dict(point)
    prefix = PREFIX[method]
    changes = {k: v for k, v in point.items() if k != "epochs" and k not in METHOD_OPTIONS}
    own = {k: v for k, v in point.items() if k in METHOD_OPTIONS}
    return {f"{prefix}_epochs": point["epochs"], **own, **({f"{prefix}_recipe": changes} if changes else {})}


def sweep(methods, epsilons, points=None, out=OUT, stored_only=False, *, preset="mnist",
          dataset="mnist_validation", grid=GRID, base_options=None) -> dict:
    """Run (or, with ``stored_only``, only tabulate) the grid; ``points`` picks grid indices (all by default).

    ``base_options``: the preset options each grid point's changes are laid over (none for MNIST, whose grid
    points are changes to the published recipes themselves).
    """
    rows = []
    for method in methods:
        # a method without privacy runs once, listed at the first ε
        for epsilon in epsilons if METHODS[method].takes_epsilon else epsilons[:1]:
            for index, point in enumerate(grid[method]):
                if points is not None and index not in points and not stored_only:
                    continue
                config = preset_config(preset, datasets=(dataset,), methods=(method,),
                                       epsilons=(epsilon,), seeds=(0,), audit=(), out=out, resume=True,
                                       stored_only=stored_only,
                                       options={**(base_options or {}), **_options(method, point)})
                try:
                    runs = run_comparison(config)["runs"]
                except ValueError as exc:  # stored_only: this grid point has not run yet
                    if not (stored_only and "holds no finished run" in str(exc)):
                        raise
                    continue
                for run in runs:
                    rows.append({"method": method, "epsilon": run["epsilon_target"], "point": point,
                                 "validation_accuracy": run["accuracy"],
                                 # a closed-form head spends its time in preprocessing (its one release and solve)
                                 "seconds": run["train_seconds"] + (run.get("preprocessing_seconds") or 0.0)})
    chosen = {}
    for row in rows:  # in grid order: ties go to the earlier point
        best = chosen.setdefault(row["method"], {}).get(str(row["epsilon"]))
        if best is None or row["validation_accuracy"] > best["validation_accuracy"]:
            chosen[row["method"]][str(row["epsilon"])] = row
    return {"grid": grid, "runs": rows,
            "chosen": {m: {e: r["point"] for e, r in by_eps.items()} for m, by_eps in chosen.items()}}


MNIST_HEADER = ("# Whole-MNIST preset: settings chosen on the validation split", "",
                "`python tools/mnist_tuning.py`: trained on the first 55,000 MNIST training images, scored on the "
                "last 5,000 (`mnist_validation`); the test set is not read. Seed 0; every other setting is the "
                "published recipe (`tfdpmech.experiments.methods.mnist_recipes`) except the changes listed. Grid "
                "points not listed have not run yet (`chosen`: the best of those that have). Seconds are wall time on a 2-core CPU shared with other jobs.")


def write(result: dict, out=OUT, header=MNIST_HEADER) -> None:
    lines = [*header, "",
             "| method | ε | epochs | changes to the recipe | validation accuracy | train + preprocessing s | chosen |",
             "|---|---|---|---|---|---|---|"]
    for row in result["runs"]:
        mark = "yes" if result["chosen"][row["method"]][str(row["epsilon"])] == row["point"] else ""
        changes = ", ".join(f"{k} {v}" for k, v in row["point"].items() if k != "epochs") or "none"
        epsilon = "no ε" if row["epsilon"] is None else f"{row['epsilon']:g}"
        lines.append(f"| `{row['method']}` | {epsilon} | {row['point'].get('epochs', '–')} | {changes} | "
                     f"{100 * row['validation_accuracy']:.2f} % | {row['seconds']:.0f} | {mark} |")
    write_tuning(out, result, lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=",".join(GRID), help=f"comma-separated, of {', '.join(GRID)}")
    parser.add_argument("--epsilons", default=",".join(f"{e:g}" for e in EPSILONS))
    parser.add_argument("--points", default=None, help="grid indices to run, e.g. 2,3 (default: all)")
    parser.add_argument("--stored-only", action="store_true", help="train nothing: tabulate the finished runs")
    args = parser.parse_args()
    points = None if args.points is None else {int(p) for p in args.points.split(",")}
    if not args.stored_only:
        sweep(args.methods.split(","), [float(e) for e in args.epsilons.split(",")], points=points)
    # the table and the choice: every finished point of the whole grid, whichever were run now
    result = sweep(list(GRID), list(EPSILONS), stored_only=True)
    write(result)
    print(json.dumps(result["chosen"], indent=2))


if __name__ == "__main__":
    main()
