"""Choose the Fashion-MNIST preset's DP-SGD recipes on a validation split, never on the test set.

Runs ``tfdpmech compare --preset fashion`` on ``fashion_mnist_validation`` (the first 55,000 training images
train, the last 5,000 score) for each grid point below, seed 0, and writes
``docs/results/fashion-mnist/tuning/tuning.md`` and ``tuning.json``: the validation accuracy of each point and
the chosen one (the best; ties to the earlier point). The first point of each method is the preset's published
recipe, Tramèr & Boneh's for Fashion-MNIST (the tanh CNN: expected batch 2,048, step 4, 40 epochs; ScatterNet +
linear: expected batch 8,192, step 16, 40 epochs); the others train shorter or longer, or take the batch and step
of the MNIST recipes. The augmentation of ``dpsgd_augmult`` is chosen the same way, without privacy: the tanh CNN
on one view per record and epoch (``nonprivate_augmented``: a 2-pixel shift with or without a left-right flip)
beside the same CNN on the records as they are (``nonprivate``). Finished runs are kept in the output folder's ``runs.jsonl``, so the sweep resumes after a
kill.

``dpsgd_bandmf`` and ``dpsgd_ema`` (stated before any of their runs) train at the recipe the ``dpsgd`` row chose at
each ε (the preset's: expected batch 2,048, step 4, 40 epochs = 1,200 steps at ε = 3; batch 512, step 0.5,
40 epochs = 4,720 steps at ε = 1), changing one thing, by the grids of ``tools/mnist_tuning.py``:

- ``dpsgd_bandmf``: bands b ∈ {4, 8} (b = 1 is the ``dpsgd`` row). ``python tools/bandmf_error.py --settings
  60000,2048,40,3 60000,512,40,1`` predicts the iterates' noise at the same ε, relative to DP-SGD's, at
  b = 2, 4, 8, 16: 1.031, 0.920, 0.947, 1.030 at ε = 3 and 1.056, 0.939, 0.948, 0.988 at ε = 1: a gain of 5–8 %
  at 4–8, none at 2 or 16 (the large batch leaves few steps to correlate). Default until the sweep has run: b = 4.
- ``dpsgd_ema``: the warmed-up weight average, d ∈ {0.999, 0.99}, the average scored (at 1,200 and 4,720 steps
  d = 0.999 is the warm-up alone; 0.99 caps the decay from step 890 on). Default until the sweep has run: 0.999.

The rule: the best validation accuracy, ties to the earlier point.

    python tools/fashion_tuning.py [--methods dpsgd_scatter,dpsgd,dpsgd_bandmf,dpsgd_ema] [--epsilons 3,1]
                                   [--points 0,1] [--stored-only]
"""

from __future__ import annotations

import argparse
import json
import os

from mnist_tuning import BANDS_GRID, EMA_GRID, sweep, write
from tfdpmech.experiments.methods.mnist_recipes import SCATTER_LINEAR_RECIPE, TANH_CNN_RECIPE
from tfdpmech.experiments.presets import FASHION_PUBLISHED

OUT = os.path.join("docs", "results", "fashion-mnist", "tuning")
# the batch and step of the MNIST recipes
_MNIST_SCATTER = {"expected_batch_size": SCATTER_LINEAR_RECIPE.expected_batch_size,
                  "learning_rate": SCATTER_LINEAR_RECIPE.learning_rate}
_MNIST_CNN = {"expected_batch_size": TANH_CNN_RECIPE.expected_batch_size,
              "learning_rate": TANH_CNN_RECIPE.learning_rate}
GRID = {"dpsgd_scatter": ({"epochs": 40}, {"epochs": 60}, {"epochs": 40, **_MNIST_SCATTER}, {"epochs": 20}),
        "dpsgd": ({"epochs": 40}, {"epochs": 20}, {"epochs": 20, **_MNIST_CNN}, {"epochs": 40, **_MNIST_CNN}),
        # the views of dpsgd_augmult, tried without privacy (20 epochs, the preset's): none, crop and flip, crop
        "nonprivate": ({},), "nonprivate_augmented": ({"augmentation": "crop_flip"}, {"augmentation": "crop"}),
        # the dpsgd row (its chosen recipe at each ε) with BandMF's bands or the warmed-up average's decay
        "dpsgd_bandmf": BANDS_GRID, "dpsgd_ema": EMA_GRID}
HEADER = ("# Fashion-MNIST preset: DP-SGD recipes chosen on the validation split", "",
          "`python tools/fashion_tuning.py`: trained on the first 55,000 Fashion-MNIST training images, scored on "
          "the last 5,000 (`fashion_mnist_validation`); the test set is not read. Seed 0; every other setting is "
          "the preset's published recipe (Tramèr & Boneh's for Fashion-MNIST) except the changes listed; the rows "
          "without privacy train 20 epochs, as the preset's. Grid "
          "points not listed have not run yet (`chosen`: the best of those that have). Seconds are wall time on a "
          "2-core CPU shared with other jobs.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=",".join(GRID), help=f"comma-separated, of {', '.join(GRID)}")
    parser.add_argument("--epsilons", default="3,1")
    parser.add_argument("--points", default=None, help="grid indices to run, e.g. 1,2 (default: all)")
    parser.add_argument("--stored-only", action="store_true", help="train nothing: tabulate the finished runs")
    args = parser.parse_args()
    points = None if args.points is None else {int(p) for p in args.points.split(",")}
    settings = dict(out=OUT, preset="fashion", dataset="fashion_mnist_validation", grid=GRID,
                    base_options=FASHION_PUBLISHED)
    if not args.stored_only:
        sweep(args.methods.split(","), [float(e) for e in args.epsilons.split(",")], points=points, **settings)
    # the table and the choice: every finished point of the whole grid, whichever were run now
    result = sweep(list(GRID), [3.0, 1.0], stored_only=True, **settings)
    write(result, out=OUT, header=HEADER)
    print(json.dumps(result["chosen"], indent=2))


if __name__ == "__main__":
    main()
