"""Canaries for a one-run audit: records disjoint from the private data, built without looking at it.

:func:`noise_canaries` (uniform-noise images, random labels), :func:`ball_canaries` (random rows
of a public feature ball), :func:`mislabel` and :func:`digits_canaries` (real records from a
disjoint pool, given a wrong label).
"""

from __future__ import annotations

import numbers

import numpy as np

from ..noise import make_rng
from .canary_bound import _check_int
from .canary_scores import _labels_to_int

__all__ = ["ball_canaries", "digits_canaries", "mislabel", "noise_canaries"]


# --- canaries -----------------------------------------------------------------------------------
def _one_hot(labels: np.ndarray, num_classes: int) -> np.ndarray:
    return np.eye(num_classes, dtype=np.float32)[labels]


def mislabel(x_pool, y_pool, m: int, *, num_classes: int, seed=None) -> tuple[np.ndarray, np.ndarray]:
    """m canaries from a pool of records disjoint from the private data, each given a wrong label.

    A wrong label makes a canary hard to fit unless it is trained on, so its loss separates
    members from non-members.

    Args:
        x_pool: (n, ...) records that are not in the private set.
        y_pool: (n,) class ids or (n, M) one-hot true labels.
        m: number of canaries, ≤ n (drawn without replacement).
        num_classes: M.
        seed: int, Generator or None.

    Returns:
        ``(x, y)``: (m, ...) float32 records, (m, M) one-hot float32 wrong labels.

    Raises:
        ValueError: m > n, or labels out of range.
    """
    x_pool = np.asarray(x_pool)
    m = _check_int(m, "m", minimum=2)
    num_classes = _check_int(num_classes, "num_classes", minimum=2)
    if m > len(x_pool):
        raise ValueError(f"m={m} canaries requested from a pool of {len(x_pool)} records; pass a larger pool, "
                         "fewer canaries, or noise_canaries(...)")
    y_true = _labels_to_int(y_pool, len(x_pool), num_classes)
    rng = make_rng(seed)
    pick = rng.choice(len(x_pool), size=m, replace=False)
    wrong = (y_true[pick] + rng.integers(1, num_classes, size=m)) % num_classes
    return x_pool[pick].astype(np.float32), _one_hot(wrong, num_classes)


def digits_canaries(m: int, *, num_classes: int = 10, seed=None) -> tuple[np.ndarray, np.ndarray]:
    """m mislabeled 28×28 canaries from scikit-learn's 8×8 digits (1,797 images, not MNIST).

    Each 8×8 image (values 0..16) is divided by its public bound 16, enlarged to 20×20 by
    linear interpolation and centred in a 28×28 frame with a 4-pixel border, as MNIST digits are;
    values stay in [0, 1]. Labels are wrong on purpose (:func:`mislabel`).

    Raises:
        ValueError: m > 1,797.
    """
    from scipy import ndimage
    from sklearn.datasets import load_digits

    digits = load_digits()
    small = digits.images.astype(np.float64) / 16.0
    big = np.stack([ndimage.zoom(img, 2.5, order=1) for img in small])
    frame = np.zeros((len(big), 28, 28, 1), dtype=np.float32)
    if big.min() < 0.0 or big.max() > 1.0:  # linear interpolation of [0, 1] values stays in [0, 1]
        raise RuntimeError(f"resized digits left [0, 1]: [{big.min()}, {big.max()}]")
    frame[:, 4:24, 4:24, 0] = big
    return mislabel(frame, digits.target % num_classes, m, num_classes=num_classes, seed=seed)


def noise_canaries(m: int, shape=(28, 28, 1), *, num_classes: int = 10, seed=None) -> tuple[np.ndarray, np.ndarray]:
    """m uniform-noise records in [0, 1]^shape, each with a random label.

    Raises:
        ValueError: m < 2 or a non-positive shape.
    """
    m = _check_int(m, "m", minimum=2)
    num_classes = _check_int(num_classes, "num_classes", minimum=2)
    shape = tuple(_check_int(s, "shape", minimum=1) for s in shape)
    rng = make_rng(seed)
    x = rng.random((m, *shape)).astype(np.float32)
    return x, _one_hot(rng.integers(0, num_classes, size=m), num_classes)


def ball_canaries(m: int, dim: int, *, radius: float = 1.0, num_classes: int = 2,
                  seed=None) -> tuple[np.ndarray, np.ndarray]:
    """m tabular canaries: uniform random rows of the ball ‖x‖ ≤ radius, each with a random label.

    For data whose public domain is a norm ball (the DP-ERM datasets: ‖x‖ ≤ R), so the canaries
    pass the same input checks as private records.

    Raises:
        ValueError: m < 2, dim < 1, radius <= 0.
    """
    m = _check_int(m, "m", minimum=2)
    dim = _check_int(dim, "dim", minimum=1)
    num_classes = _check_int(num_classes, "num_classes", minimum=2)
    if isinstance(radius, bool) or not isinstance(radius, numbers.Real) or not radius > 0:
        raise ValueError(f"radius must be a real number > 0, got {radius!r}")
    rng = make_rng(seed)
    direction = rng.normal(size=(m, dim))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    # radius·U^(1/d) is the radial law of the uniform distribution on the ball; 0.999 keeps ‖x‖ < R after rounding
    x = direction * (0.999 * float(radius) * rng.random((m, 1)) ** (1.0 / dim))
    return x.astype(np.float32), _one_hot(rng.integers(0, num_classes, size=m), num_classes)
