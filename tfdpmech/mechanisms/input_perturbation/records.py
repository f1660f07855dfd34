"""Per-record steps of input perturbation: clipping to the public bound, client-side noise, labels.

``clip_rows`` (only on request: the mechanism refuses rows above R by default), ``perturb_record``
(one record perturbed on the client, the local side of Kang et al. 2020's "bridge", §4), k-ary
``randomized_response`` for the labels, and the label checks.
"""

from __future__ import annotations

import math

import numpy as np

from ...noise import gaussian, make_rng
from ...validation import check_array, check_epsilon, check_positive_int, check_positive_real

__all__ = ["clip_rows", "perturb_record", "randomized_response", "check_labels_in_classes"]


def clip_rows(x, bound) -> tuple[np.ndarray, int]:
    """``x_i · min(1, R/‖x_i‖)`` with a fixed, public R (never the data's maximum norm).

    Returns:
        (clipped copy in float64, number of rows that were scaled).
    """
    x = check_array(x, "x", ndim_min=2).astype(np.float64)
    R = check_positive_real(bound, "feature_norm_bound")
    norms = np.linalg.norm(x, axis=1)
    scale = np.minimum(1.0, R / np.maximum(norms, 1e-300))
    return x * scale[:, None], int(np.count_nonzero(scale < 1.0))


def perturb_record(x, sigma, rng=None) -> np.ndarray:
    """Client-side input perturbation of one record: ``x + N(0, σ²I)`` in float64.

    ``n`` and ``T`` (and so σ) must be public in advance. ``rng``: None (OS entropy), a seed or a
    numpy Generator.
    """
    x = check_array(x, "x", ndim_min=1).astype(np.float64)
    return x + gaussian(check_positive_real(sigma, "sigma"), x.shape, make_rng(rng))


def randomized_response(labels, epsilon, num_classes: int, rng) -> np.ndarray:
    """k-ary randomized response: keep a label with prob ``e^ε/(e^ε + k − 1)``, else a uniform other.

    ε-DP for the label of each record (Warner 1965; k-RR). ``rng`` is a numpy Generator.
    """
    epsilon = check_epsilon(epsilon, "label_epsilon")
    k = check_positive_int(num_classes, "num_classes", minimum=2)
    labels = np.asarray(labels).astype(np.int64)
    keep = rng.random(labels.shape) < math.exp(epsilon) / (math.exp(epsilon) + k - 1)
    other = (labels + rng.integers(1, k, size=labels.shape)) % k  # uniform over the k − 1 other classes
    return np.where(keep, labels, other)


def check_labels_in_classes(y, num_classes: int, n: int | None = None, name: str = "y") -> np.ndarray:
    """Integer class ids in [0, M) from {0,1}/{−1,+1} (binary), class ids or one-hot (M > 2).

    Raises:
        ValueError: labels outside the declared classes, wrong shape or length.
    """
    M = check_positive_int(num_classes, "num_classes", minimum=2)
    arr = check_array(y, name, ndim_min=1)
    if arr.ndim == 2 and arr.shape[1] == M and M > 2:
        if not (np.all((arr == 0) | (arr == 1)) and np.all(arr.sum(axis=1) == 1)):
            raise ValueError(f"{name} of shape {arr.shape} must be one-hot over num_classes={M} classes")
        arr = arr.argmax(axis=1)
    elif arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D class labels (or one-hot for num_classes > 2), got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"x has {n} records but {name} has {arr.shape[0]}; pass matching arrays")
    values = set(np.unique(arr).tolist())
    if M == 2:
        if values <= {0, 1}:
            return arr.astype(np.int64)
        if values <= {-1, 1}:
            return ((arr + 1) // 2).astype(np.int64)
        raise ValueError(
            f"{name} has labels {sorted(values)[:6]}, not in the declared binary classes {{0, 1}} or {{-1, +1}}; "
            "map them to 0/1, or pass num_classes= for a multinomial model"
        )
    allowed = set(range(M))
    if not values <= allowed:
        bad = sorted(values - allowed)[:6]
        raise ValueError(f"{name} has labels {bad} outside the declared classes 0..{M - 1} (num_classes={M})")
    return arr.astype(np.int64)
