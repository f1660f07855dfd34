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

    python tools/fashion_tuning.py [--methods dpsgd_scatter,dpsgd] [--epsilons 3,1] [--points 0,1] [--stored-only]
"""

from __future__ import annotations

import argparse
import json
import os

from mnist_tuning import sweep, write
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
        "nonprivate": ({},), "nonprivate_augmented": ({"augmentation": "crop_flip"}, {"augmentation": "crop"})}
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
