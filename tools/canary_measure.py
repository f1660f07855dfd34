"""Measurements behind docs/audit.md (the one-run canary audit).

  python tools/canary_measure.py calibration [--seeds 200]
      Laplace and Gaussian mechanisms with known ε: our bound's median, maximum and how often it
      exceeds ε, per k; and tensorflow-privacy's EpsilonLowerBound (best threshold) on the same
      Laplace scores, when its privacy_tests package is installed.
  python tools/canary_measure.py mnist --seed 100 [--canaries noise|digits]
      A non-private MLP on the embedded MNIST sample with 1,000 canaries: the bound for every k
      (seed 100 is the separate run the default k was chosen on), with the time it takes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tfdpmech.audit.canary import (audit_scores, digits_canaries, draw_membership, loss_scores, noise_canaries)

M = 1000
KS = (25, 50, 100, 150, 250, 500)


def _gaussian_sigma(eps, delta):
    from dp_accounting.pld import common, privacy_loss_mechanism

    return privacy_loss_mechanism.GaussianPrivacyLoss.from_privacy_guarantee(
        common.DifferentialPrivacyParameters(eps, delta), sensitivity=1.0).standard_deviation


def calibration(seeds: int) -> None:
    try:
        from tensorflow_privacy.privacy.privacy_tests import epsilon_lower_bound as elb
    except ImportError:
        elb = None
    print(f"m={M}, {seeds} seeds, 95 % confidence; cells: median / max / #seeds with bound > ε")
    for mech, delta in (("laplace", 0.0), ("gaussian", 1e-5)):
        for eps in (0.5, 1.0, 2.0, 4.0):
            sigma = _gaussian_sigma(eps, delta) if mech == "gaussian" else None
            cells, tfp = [], {}
            for k in KS:
                bounds = []
                for seed in range(seeds):
                    rng = np.random.default_rng(seed)
                    member = draw_membership(M, rng)
                    noise = rng.laplace(0, 1 / eps, M) if mech == "laplace" else rng.normal(0, sigma, M)
                    scores = member + noise
                    bounds.append(audit_scores(scores, member, k_plus=k, k_minus=k, delta=delta).epsilon_lower_bound)
                    if elb is not None and mech == "laplace" and k == KS[0]:
                        with np.errstate(divide="ignore", invalid="ignore"):  # its 0-count cells
                            lb = elb.EpsilonLowerBound(scores[member], scores[~member], alpha=0.05)
                            bests = {method: lb.compute_epsilon_lower_bound(method, k=1) for method in elb.BoundMethod}
                        for method, best in bests.items():
                            tfp.setdefault(method.value, []).append(float(best[0]) if best.size else 0.0)
                b = np.array(bounds)
                cells.append(f"k={k}: {np.median(b):.3f}/{b.max():.3f}/{int(np.sum(b > eps))}")
            sigma_text = f" σ={sigma:.3f}" if sigma else ""
            print(f"{mech} ε={eps}{sigma_text} δ={delta:g}: " + "; ".join(cells))
            for name, values in tfp.items():
                v = np.array(values)
                print(f"    tf-privacy EpsilonLowerBound({name}), best threshold: median {np.median(v):.3f}, "
                      f"max {v.max():.3f}, {int(np.sum(v > eps))}/{seeds} seeds above ε")


def mnist(seed: int, canaries: str) -> None:
    import keras
    import tensorflow as tf

    from tfdpmech import data, models

    start = time.perf_counter()
    splits = data.load("mnist_sample")
    x_private, y_private = splits.x_train[1000:], splits.y_train[1000:]
    make = noise_canaries if canaries == "noise" else digits_canaries
    cx, cy = make(M, seed=1000 + seed)
    member = draw_membership(M, seed)
    keras.utils.set_random_seed(seed)
    model = models.standard_mlp(10)
    model.compile(keras.optimizers.Adam(5e-3), loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    t_train = time.perf_counter()
    model.fit(np.concatenate([x_private, cx[member]]), np.concatenate([y_private, cy[member]]), epochs=15,
              batch_size=200, verbose=0)
    t_train = time.perf_counter() - t_train
    t_audit = time.perf_counter()
    scores = loss_scores(tf.nn.softmax(model.predict(cx, verbose=0)).numpy(), cy)
    results = [audit_scores(scores, member, k_plus=k, k_minus=k) for k in KS]
    t_audit = time.perf_counter() - t_audit
    accuracy = float(np.mean(np.argmax(model.predict(splits.x_test, verbose=0), 1) == np.argmax(splits.y_test, 1)))
    print(f"seed {seed}, {canaries} canaries, {int(member.sum())} of {M} included, test accuracy {accuracy:.4f}")
    for r in results:
        print(f"  {r}")
    print(f"  training {t_train:.1f} s, scoring + {len(KS)} bounds {t_audit:.2f} s, "
          f"total {time.perf_counter() - start:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    cal = sub.add_parser("calibration")
    cal.add_argument("--seeds", type=int, default=200)
    mn = sub.add_parser("mnist")
    mn.add_argument("--seed", type=int, default=100)
    mn.add_argument("--canaries", choices=("noise", "digits"), default="noise")
    args = parser.parse_args()
    if args.what == "calibration":
        calibration(args.seeds)
    else:
        mnist(args.seed, args.canaries)


if __name__ == "__main__":
    main()
