"""BandMF against DP-SGD: the expected squared error of the noisy prefix sums (the iterates' noise) at a target ε.

For each setting (n records, expected batch L, epochs, ε, δ = 1e-5) and bands b, prints the run's steps, σ calibrated
by ``dp_accounting`` as ``DPSGD(..., bands=b)`` does (PLD; ⌈steps / b⌉ rounds at q_b = b · L / n), the optimised
strategy's loss ``||A C⁻¹||_F² sens(C)²`` over DP-SGD's ``n (n + 1) / 2`` at the same σ, and the ratio that decides:
``σ_b² · loss_b / (σ_1² · n (n + 1) / 2)``, the expected total squared error of the n prefix sums relative to DP-SGD's
(below 1: less noise in the iterates at the same ε). It measures the noise only, not accuracy.

Usage: python tools/bandmf_error.py   (about a minute: one σ search per row)
"""

from __future__ import annotations

import math

from tfdpmech.accounting.poisson_dpsgd import poisson_dpsgd_noise_multiplier
from tfdpmech.mechanisms.dpsgd.noise.banded_strategy import banded_strategy

SETTINGS = [(60000, 256, 40, 3.0), (60000, 256, 40, 1.0), (60000, 1024, 40, 3.0), (50000, 4096, 100, 8.0)]
BANDS = (1, 2, 4, 8, 16, 32, 64)
DELTA = 1e-5


def rows():
    for n, batch, epochs, epsilon in SETTINGS:
        steps = epochs * math.ceil(n / batch)
        base = None
        for b in BANDS:
            q, rounds = b * batch / n, math.ceil(steps / b)
            if q > 1:
                continue
            sigma = poisson_dpsgd_noise_multiplier(epsilon, DELTA, q=q, steps=rounds)
            ratio = banded_strategy(steps, b).ratio
            total = sigma ** 2 * ratio
            base = total if b == 1 else base
            yield n, batch, epochs, epsilon, steps, b, sigma, ratio, total / base


def main():
    print("| n | L | epochs | ε | steps | bands | σ | loss / DP-SGD's (same σ) | error / DP-SGD's (same ε) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, batch, epochs, epsilon, steps, b, sigma, ratio, total in rows():
        print(f"| {n} | {batch} | {epochs} | {epsilon:g} | {steps} | {b} | {sigma:.4f} | {ratio:.4f} | {total:.3f} |")


if __name__ == "__main__":
    main()
