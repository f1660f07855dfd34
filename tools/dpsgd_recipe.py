"""Choose the DP-SGD recipe on public data, then measure it once on the private split.

    python tools/dpsgd_recipe.py tune --epsilon 1 --grid '[{"learning_rate": 0.003}, ...]'
    python tools/dpsgd_recipe.py measure --epsilons 0.25,0.5,1,2,8 --seeds 0

``tune`` reads only the 1,000 public records of the embedded MNIST sample (the first 1,000 of
its training split) and scores each candidate with
:func:`tfdpmech.mechanisms.dpsgd.runs.recipe.public_proxy_accuracy`. ``measure`` trains Poisson DP-SGD with the
stated recipe on the private records (training records 1,000..7,999) and reports test accuracy
on the 2,000 test images, the proven ε and the time per run. Nothing measured here feeds back
into the recipe.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tfdpmech import data  # noqa: E402
from tfdpmech.mechanisms.dpsgd.runs.recipe import RECIPE, make_dpsgd, public_proxy_accuracy, tanh_mlp  # noqa: E402

PUBLIC = 1000


def tune(args):
    splits = data.load("mnist_sample")
    x_pub, y_pub = splits.x_train[:PUBLIC], splits.y_train[:PUBLIC]
    n_private = len(splits.x_train) - PUBLIC
    for change in json.loads(args.grid):
        recipe = RECIPE.replace(**change)
        out = public_proxy_accuracy(recipe, x_pub, y_pub, n_private=n_private, epsilon=args.epsilon,
                                    delta=args.delta, folds=args.folds)
        print(json.dumps({"epsilon": args.epsilon, **change, "public_val_accuracy": round(out["accuracy"], 4),
                          "folds": [round(a, 4) for a in out["accuracies"]],
                          "sigma": round(out["noise_multiplier"], 4), "seconds": round(out["seconds"], 1)}),
              flush=True)


def measure(args):
    splits = data.load("mnist_sample")
    x_priv, y_priv = splits.x_train[PUBLIC:], splits.y_train[PUBLIC:]
    recipe = RECIPE.replace(**json.loads(args.recipe)) if args.recipe else RECIPE
    print(json.dumps({"recipe": recipe.__dict__, "n_private": len(x_priv), "n_test": len(splits.x_test)}))
    for seed in [int(s) for s in args.seeds.split(",")]:
        for eps in [float(e) for e in args.epsilons.split(",")]:
            keras.utils.set_random_seed(seed)
            t0 = time.perf_counter()
            dp = make_dpsgd(eps, args.delta, len(x_priv), recipe=recipe, seed=seed)
            model = dp.compile(tanh_mlp(splits.num_classes, input_shape=x_priv.shape[1:],
                                        activation=recipe.activation, input_scaling=recipe.input_scaling))
            t1 = time.perf_counter()
            model.fit(dp.dataset(x_priv, y_priv), epochs=dp.epochs, verbose=0)
            t2 = time.perf_counter()
            logits = model(splits.x_test, training=False).numpy()
            acc = float(np.mean(logits.argmax(-1) == splits.y_test.argmax(-1)))
            release = dp.ledger.releases[0]
            print(json.dumps({
                "epsilon_target": eps, "seed": seed, "accuracy": round(acc, 4),
                "epsilon_provable": round(release.epsilon_provable, 4), "epsilon_claimed":
                round(release.epsilon_claimed, 4), "sigma": round(dp.noise_multiplier, 4), "steps": dp.steps,
                "q": round(dp.sampling_probability, 5), "calibrate_s": round(t1 - t0, 1),
                "train_s": round(t2 - t1, 1), "total_s": round(t2 - t0, 1)}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tune", help="score recipe changes on the public records only")
    t.add_argument("--epsilon", type=float, default=1.0)
    t.add_argument("--delta", type=float, default=1e-5)
    t.add_argument("--folds", type=int, default=3)
    t.add_argument("--grid", default="[{}]", help="JSON list of changes to the stated RECIPE")
    t.set_defaults(func=tune)
    m = sub.add_parser("measure", help="train on the private records, report test accuracy and time")
    m.add_argument("--epsilons", default="0.25,0.5,1,2,8")
    m.add_argument("--seeds", default="0")
    m.add_argument("--delta", type=float, default=1e-5)
    m.add_argument("--recipe", default="", help="JSON changes to RECIPE (default: the stated recipe)")
    m.set_defaults(func=measure)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
