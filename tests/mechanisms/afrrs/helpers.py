"""Small centre-high images shared by the AFRRS tests."""

import numpy as np


def small_data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 28, 28, 1)).astype(np.float32) * 0.3
    x[:, 8:20, 8:20] += 0.6  # centre-high images
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, n)]
    return np.clip(x, 0, 1), y
