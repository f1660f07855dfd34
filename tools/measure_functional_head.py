"""Test accuracy of the functional head on the embedded MNIST sample (the table in docs/mechanisms/functional_head.md).

    python tools/measure_functional_head.py --public 1000 --arch mnist_cnn
    python tools/measure_functional_head.py --public digits --arch mlp

Public model recipe (fixed in advance, chosen on a validation part of the public records only):
cross-entropy, Adam 1e-3, batch 32, 20 epochs, seed 0; features = its "hidden_clip" layer.
"""

import argparse
import json
import time

import keras
import numpy as np

import tfdpmech
from tfdpmech.features import public_features, public_split
from tfdpmech.mechanisms.functional_head import FunctionalHead

EPSILONS = (0.25, 0.5, 1.0, 2.0, 8.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--public", default="1000")
    ap.add_argument("--arch", default="mnist_cnn", choices=("mlp", "mnist_cnn"))
    ap.add_argument("--loss", default="ce", choices=("ce", "taylor"))
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    ds = tfdpmech.data.load("mnist_sample")
    sp = public_split(args.public, ds)
    print(sp.source, "| public", sp.x_public.shape[0], "| private", sp.x_private.shape[0], "| test", len(sp.x_test))
    y_test = sp.y_test.argmax(1)
    rows = []
    for seed in range(args.seeds):
        keras.utils.set_random_seed(seed)
        model = getattr(tfdpmech.models, args.arch)(10)
        loss = (keras.losses.CategoricalCrossentropy(from_logits=True) if args.loss == "ce"
                else tfdpmech.losses.TaylorCrossEntropy())
        model.compile(keras.optimizers.Adam(1e-3), loss=loss)
        t = time.time()
        model.fit(sp.x_public, sp.y_public, epochs=args.epochs, batch_size=32, verbose=0)
        public_seconds = time.time() - t
        acc = float(np.mean(model.predict(sp.x_test, verbose=0).argmax(1) == y_test))
        rows.append(dict(method="public_only", epsilon=0.0, seed=seed, accuracy=acc, seconds=public_seconds))
        print(f"seed {seed} public_only acc {acc:.4f} (public training {public_seconds:.1f}s)", flush=True)
        feats = public_features(model, "hidden_clip", trained_on=sp.x_public, description=sp.source)
        for mech, name in (("gaussian", "fm_head_gauss"), ("laplace", "fm_head")):
            for eps in EPSILONS:
                t = time.time()
                head = FunctionalHead(feats, 10, mechanism=mech, epsilon=eps,
                                      delta=1e-5 if mech == "gaussian" else None, seed=seed)
                head.fit(sp.x_private, sp.y_private)
                secs = time.time() - t
                acc = float(np.mean(head.predict(sp.x_test).argmax(1) == y_test))
                rows.append(dict(method=name, epsilon=eps, seed=seed, accuracy=acc, seconds=secs,
                                 provable=head.ledger.epsilon_provable(), delta=head.ledger.delta()))
                print(f"seed {seed} {name:14s} ε={eps:<5g} acc {acc:.4f}  provable ε={head.ledger.epsilon_provable():g} "
                      f"δ={head.ledger.delta():g}  σ/b={head.release.noise_scale:.4g}  ridge={head.ridge:.4g}  "
                      f"({secs:.2f}s)", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(args=vars(args), rows=rows), fh, indent=1)


if __name__ == "__main__":
    main()
