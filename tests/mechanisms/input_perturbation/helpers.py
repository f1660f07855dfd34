"""Synthetic DP-ERM data shared by the input-perturbation tests."""

import numpy as np


def synthetic(n=400, d=5, seed=0, scale=3.0):
    """Rows N(0, I) clipped to the unit ball, labels from a logistic model (Kang et al. 2020, §6 setting)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
    w0 = rng.normal(size=d)
    y = (scale * x @ w0 + rng.logistic(size=n) > 0).astype(np.int64)
    return x, y
