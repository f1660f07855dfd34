"""Choose the whole-MNIST preset's settings on a validation split, never on the test set.

Runs ``tfdpmech compare --preset mnist`` on ``mnist_validation`` (the first 55,000 training images
train, the last 5,000 score) for every (method, ε) over the grid below, seed 0, and writes
``docs/results/mnist/tuning/tuning.md`` and ``tuning.json``: the validation accuracy of each grid
point and the chosen one (the best; ties to the earlier point, which is cheaper). A grid point is
the epochs and any other changes to the published recipe (``mnist_recipes``); for
``dpsgd_augmult``, also the views per record K (``augmult_k``); for the
noise-once head on scattering features, the random projection's dimension. Finished runs are
kept in ``docs/results/mnist/tuning/runs.jsonl`` and not run again, so the sweep resumes after a kill.

``dpsgd_bandmf`` and ``dpsgd_ema`` (stated before any of their runs) train at ε = 3 and 1 only, each at the
recipe the ``dpsgd`` row chose there (the preset's ``dpsgd_epochs`` / ``dpsgd_recipe``: 40 epochs at ε = 3, 20 at
ε = 1), changing one thing:

- ``dpsgd_bandmf``: bands b ∈ {4, 8} (b = 1 is the ``dpsgd`` row). ``python tools/bandmf_error.py --settings
  60000,512,40,3 60000,512,20,1`` predicts the iterates' noise at the same ε, relative to DP-SGD's, at
  b = 2, 4, 8, 16, 32: 0.908, 0.728, 0.690, 0.693, 0.739 at ε = 3 (4,720 steps) and 1.021, 0.897, 0.908, 0.967,
  1.089 at ε = 1 (2,360 steps): the minimum lies at 4–8 at both, 16 is no better than 8 (and close to DP-SGD at
  ε = 1), b = 2 gains little. The preset's default until the sweep has run: b = 4.
- ``dpsgd_ema``: De et al.'s warmed-up weight average (decay ``min(d, (1 + t) / (10 + t))`` at step t), the
  average scored, d ∈ {0.999, 0.99}. The warm-up reaches d only at step ``(10 d − 1) / (1 − d)``: 8,990 for
  0.999, 890 for 0.99, so within these runs' 4,720 and 2,360 steps d = 0.999 (and 0.9999, the same run) is the
  warm-up alone, whose average spans about the last ninth of the steps (some 520 at ε = 3), and d = 0.99 caps it
  at about the last 100 steps from step 890 on. Default until the sweep has run: d = 0.999.

The rule, as for the other rows: the best validation accuracy, ties to the earlier (cheaper or shorter-memory) point.

    python tools/mnist_tuning.py [--methods dpsgd,dpsgd_scatter,fm_head_scatter,dpsgd_augmult,dpsgd_bandmf,dpsgd_ema]
                                 [--epsilons 3,1,0.25,0.5,2] [--points 0,1] [--stored-only]
"""

from __future__ import annotations

import argparse
import json
import os

from tfdpmech.experiments import PRESETS, preset_config, run_comparison
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
# the dpsgd row with correlated noise or a warmed-up weight average, at the recipe dpsgd chose at each ε: the bands
# (bandmf_error's predicted minimum at the preset's steps, see above) and the average's decay
BANDS_GRID = tuple({"bands": b} for b in (4, 8))
EMA_GRID = tuple({"ema_decay": d} for d in (0.999, 0.99))
GRID = {"dpsgd": _EPOCHS + _SCHEDULES, "dpsgd_scatter": _EPOCHS + _LARGE_BATCH, "fm_head_scatter": _UNITS,
        "dpsgd_augmult": _VIEWS, "dpsgd_bandmf": BANDS_GRID, "dpsgd_ema": EMA_GRID}
EPSILONS = (3.0, 1.0, 0.25, 0.5, 2.0)
# the methods swept at some ε only (the preset's rows of them)
METHOD_EPSILONS = {"dpsgd_bandmf": (3.0, 1.0), "dpsgd_ema": (3.0, 1.0)}
PREFIX = {"dpsgd": "dpsgd", "dpsgd_scatter": "scatter", "dpsgd_augmult": "dpsgd", "dpsgd_bandmf": "dpsgd",
          "dpsgd_ema": "dpsgd"}
# grid keys that are options of the method, not changes to its recipe
METHOD_OPTIONS = ("augmult_k", "scatter_norm", "bands", "ema_decay")
# the methods whose grid points leave the recipe as the preset's dpsgd row has it (its chosen epochs and changes)
ON_THE_DPSGD_ROW = ("dpsgd_bandmf", "dpsgd_ema")


def _options(method: str, point: dict, preset: str = "mnist") -> dict:
    if "units" in point:
        return {"scatter_units": point["units"]}
    if method not in PREFIX:  # a method without a DP-SGD recipe (nonprivate): the point is its options
        return dict(point)
    prefix = PREFIX[method]
    changes = {k: v for k, v in point.items() if k != "epochs" and k not in METHOD_OPTIONS}
    own = {k: v for k, v in point.items() if k in METHOD_OPTIONS}
    if method in ON_THE_DPSGD_ROW:  # the preset's chosen dpsgd recipe, per ε, and the point's own option
        row = PRESETS[preset].settings["options"]
        return {**{k: row[k] for k in (f"{prefix}_epochs", f"{prefix}_recipe") if k in row}, **own}
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
            if epsilon not in METHOD_EPSILONS.get(method, (epsilon,)):
                continue
            for index, point in enumerate(grid[method]):
                if points is not None and index not in points and not stored_only:
                    continue
                config = preset_config(preset, datasets=(dataset,), methods=(method,),
                                       epsilons=(epsilon,), seeds=(0,), audit=(), out=out, resume=True,
                                       stored_only=stored_only,
                                       options={**(base_options or {}), **_options(method, point, preset)})
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
        epochs = row["point"].get("epochs", "as `dpsgd`" if row["method"] in ON_THE_DPSGD_ROW else "–")
        lines.append(f"| `{row['method']}` | {epsilon} | {epochs} | {changes} | "
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
