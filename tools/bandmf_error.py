"""BandMF against DP-SGD: the expected squared error of the noisy prefix sums (the iterates' noise) at a target ε.

For each setting (n records, expected batch L, epochs, ε, δ = 1e-5) and bands b, prints the run's steps, σ calibrated
by ``dp_accounting`` as ``DPSGD(..., bands=b)`` does (PLD; ⌈steps / b⌉ rounds at q_b = b · L / n), the optimised
strategy's loss ``||A C⁻¹||_F² sens(C)²`` over DP-SGD's ``n (n + 1) / 2`` at the same σ, and the ratio that decides:
``σ_b² · loss_b / (σ_1² · n (n + 1) / 2)``, the expected total squared error of the n prefix sums relative to DP-SGD's
(below 1: less noise in the iterates at the same ε). It measures the noise only, not accuracy.

Usage: python tools/bandmf_error.py [--settings N,L,EPOCHS,EPS ...] [--bands 1,4,16]
(about a minute with the default settings: one σ search per row)
"""

from __future__ import annotations

import argparse
import math

from tfdpmech.accounting.poisson_dpsgd import poisson_dpsgd_noise_multiplier
from tfdpmech.mechanisms.dpsgd.noise.banded_strategy import banded_strategy

SETTINGS = [(60000, 256, 40, 3.0), (60000, 256, 40, 1.0), (60000, 1024, 40, 3.0), (50000, 4096, 100, 8.0)]
BANDS = (1, 2, 4, 8, 16, 32, 64)
DELTA = 1e-5


def rows(settings=SETTINGS, bands=BANDS):
    for n, batch, epochs, epsilon in settings:
        steps = epochs * math.ceil(n / batch)
        base = None
        for b in bands:
            q, rounds = b * batch / n, math.ceil(steps / b)
            if q > 1:
                continue
            sigma = poisson_dpsgd_noise_multiplier(epsilon, DELTA, q=q, steps=rounds)
            ratio = banded_strategy(steps, b).ratio
            total = sigma ** 2 * ratio
            base = total if b == 1 else base
            yield n, batch, epochs, epsilon, steps, b, sigma, ratio, total / base


def _setting(text: str) -> tuple:
    n, batch, epochs, epsilon = text.split(",")
    return int(n), int(batch), int(epochs), float(epsilon)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", type=_setting, default=SETTINGS, metavar="N,L,EPOCHS,EPS",
                        help="the runs to compare, e.g. 60000,512,40,3 (the mnist preset's dpsgd row at ε = 3)")
    parser.add_argument("--bands", type=lambda s: tuple(int(b) for b in s.split(",")), default=BANDS,
                        help="comma-separated, 1 first (DP-SGD, the reference of the last column)")
    args = parser.parse_args(argv)
    print("| n | L | epochs | ε | steps | bands | σ | loss / DP-SGD's (same σ) | error / DP-SGD's (same ε) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, batch, epochs, epsilon, steps, b, sigma, ratio, total in rows(args.settings, args.bands):
        print(f"| {n} | {batch} | {epochs} | {epsilon:g} | {steps} | {b} | {sigma:.4f} | {ratio:.4f} | {total:.3f} |")


if __name__ == "__main__":
    main()
