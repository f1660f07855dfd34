"""Measure the normalisation of ``dpsgd_scatter``'s ScatterNet features and its epochs on a validation split.

Runs ``dpsgd_scatter`` at ε = 3, seed 0, on ``mnist_validation`` and ``fashion_mnist_validation`` (the first
55,000 training images train, the last 5,000 score; the test set is not read) for every grid point below, and
writes ``docs/results/scatter_tuning/<dataset>/tuning.md`` and ``tuning.json`` (the validation accuracy of each
point and the best; ties to the earlier point). The grid, stated before any run:

- normalisation (``options["scatter_norm"]``): ``group`` (per record, 27 groups: ε = 0 for the features, today's)
  or ``private_bn`` (the private per-channel mean and variance, Gaussian noise multiplier 8 as Tramèr & Boneh,
  data-independent clipping, composed with DP-SGD to ε = 3: :mod:`tfdpmech.features.scatter_norm`);
- epochs: 20 (today's choice on both data sets), 40 (the published recipes) and 60 (Tramèr & Boneh's noise
  multipliers, 3.04 on MNIST and 4.05 on Fashion-MNIST, pass ε = 3 by an RDP accountant in the 54th and 53rd
  epoch);
- the rest of the recipe: MNIST at Tramèr & Boneh's MNIST batch and step (expected batch 4,096, SGD 8 with
  momentum 0.9, C = 0.1: ``SCATTER_LINEAR_RECIPE``), Fashion-MNIST at their Fashion-MNIST batch and step (8,192
  and 16: the ``fashion`` preset's ``FASHION_PUBLISHED``, today's recipe too).

Six points per data set. A ``group`` point is the same run as the one ``tools/mnist_tuning.py`` or
``tools/fashion_tuning.py`` may have stored (same key); it is copied from their ``runs.jsonl`` instead of trained
again. Finished runs are kept in the output folder's ``runs.jsonl``, so the sweep resumes after a kill.

    python tools/scatter_tuning.py [--datasets mnist,fashion] [--points 0,1] [--stored-only]
"""

from __future__ import annotations

import argparse
import json
import os

import fashion_tuning
import mnist_tuning
from mnist_tuning import sweep, write
from tfdpmech.experiments import preset_config
from tfdpmech.experiments.presets import FASHION_PUBLISHED
from tfdpmech.experiments.run_store import RunStore

OUT = os.path.join("docs", "results", "scatter_tuning")
EPSILON = 3.0
# a group point omits the option (the default), so its key is the other sweeps' key for the same run
GRID = {"dpsgd_scatter": tuple({"epochs": epochs, **({"scatter_norm": norm} if norm != "group" else {})}
                               for norm in ("group", "private_bn") for epochs in (20, 40, 60))}
DATASETS = {
    "mnist": dict(preset="mnist", dataset="mnist_validation", base_options=None, out=os.path.join(OUT, "mnist"),
                  previous=mnist_tuning.OUT),
    "fashion": dict(preset="fashion", dataset="fashion_mnist_validation", base_options=FASHION_PUBLISHED,
                    out=os.path.join(OUT, "fashion-mnist"), previous=fashion_tuning.OUT),
}
HEADER = ("# ScatterNet + linear: the features' normalisation and the epochs, on the validation split", "",
          "`python tools/scatter_tuning.py`: `dpsgd_scatter` at ε = 3, seed 0, trained on the first 55,000 training "
          "images, scored on the last 5,000 (`{dataset}`); the test set is not read. `scatter_norm private_bn`: the "
          "private per-channel mean and variance (noise multiplier 8, composed with DP-SGD to ε = 3); none: the "
          "per-record group normalisation. Recipe: {recipe}. Grid points not listed have not run yet (`chosen`: the "
          "best of those that have). Seconds are wall time on a 2-core CPU shared with other jobs.")
RECIPES = {"mnist": "expected batch 4,096, SGD 8 with momentum 0.9, C = 0.1 (`SCATTER_LINEAR_RECIPE`)",
           "fashion": "expected batch 8,192, SGD 16 with momentum 0.9, C = 0.1 (`FASHION_PUBLISHED`)"}


def copy_stored(settings: dict, points) -> int:
    """Copy into the output folder the runs of the grid that the other sweep's ``runs.jsonl`` already holds."""
    copied = 0
    for index, point in enumerate(GRID["dpsgd_scatter"]):
        if points is not None and index not in points:
            continue
        options = {**(settings["base_options"] or {}), **mnist_tuning._options("dpsgd_scatter", point)}
        config = preset_config(settings["preset"], datasets=(settings["dataset"],), methods=("dpsgd_scatter",),
                               epsilons=(EPSILON,), seeds=(0,), audit=(), options=options)
        here, there = RunStore(settings["out"], config), RunStore(settings["previous"], config)
        key = here.key(settings["dataset"], "dpsgd_scatter", EPSILON, 0)
        if here.get(key) is None and (there.get(key) or {}).get("run") is not None:
            here.add(key, run=there.get(key)["run"])
            copied += 1
    return copied


def run(name: str, points=None, stored_only: bool = False) -> dict:
    settings = DATASETS[name]
    common = dict(out=settings["out"], preset=settings["preset"], dataset=settings["dataset"], grid=GRID,
                  base_options=settings["base_options"])
    if not stored_only:
        copy_stored(settings, points)
        sweep(["dpsgd_scatter"], [EPSILON], points=points, **common)
    result = sweep(["dpsgd_scatter"], [EPSILON], stored_only=True, **common)
    header = (*HEADER[:2], HEADER[2].format(dataset=settings["dataset"], recipe=RECIPES[name]))
    write(result, out=settings["out"], header=header)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS), help=f"comma-separated, of {', '.join(DATASETS)}")
    parser.add_argument("--points", default=None, help="grid indices to run, e.g. 3,4 (default: all)")
    parser.add_argument("--stored-only", action="store_true", help="train nothing: tabulate the finished runs")
    args = parser.parse_args()
    points = None if args.points is None else {int(p) for p in args.points.split(",")}
    for name in args.datasets.split(","):
        print(name, json.dumps(run(name, points, args.stored_only)["chosen"], indent=2))


if __name__ == "__main__":
    main()
