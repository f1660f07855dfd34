"""A one-run audit's guesses and scores: which canaries look trained on (Steinke et al. 2023, Algorithm 1 step 3).

:func:`guess_membership` guesses "in" for the k₊ highest scores and "out" for the k₋ lowest;
:func:`loss_scores` and :func:`margin_scores` score canaries from a model's answers.
"""

from __future__ import annotations

import numpy as np

from .canary_bound import _check_int

__all__ = ["guess_membership", "loss_scores", "margin_scores"]


# --- guesses and scores ---------------------------------------------------------------------------
def guess_membership(scores, k_plus: int, k_minus: int) -> np.ndarray:
    """Algorithm 1's guesses: +1 for the k₊ highest scores, −1 for the k₋ lowest, 0 otherwise.

    Ties are broken by canary index (a stable sort), which is public and independent of the
    membership coin flips, so the guesses stay a function of the trained model alone.

    Args:
        scores: (m,) finite or ±inf scores, higher = more likely trained on.
        k_plus: k₊ ≥ 0.
        k_minus: k₋ ≥ 0, with k₊ + k₋ ≤ m.

    Returns:
        int8 array (m,) in {−1, 0, +1}.

    Raises:
        TypeError / ValueError: scores not 1-D numeric or holding NaN; k₊ + k₋ > m.
    """
    scores = _check_scores(scores)
    m = scores.size
    k_plus = _check_int(k_plus, "k_plus")
    k_minus = _check_int(k_minus, "k_minus")
    if k_plus + k_minus > m:
        raise ValueError(
            f"k_plus + k_minus = {k_plus} + {k_minus} = {k_plus + k_minus} exceeds the number of canaries m={m}; "
            "each canary gets at most one guess: lower k_plus or k_minus"
        )
    if k_plus + k_minus == 0:
        raise ValueError("k_plus = k_minus = 0 makes no guess; pass e.g. k_plus = k_minus = m // 4")
    order = np.argsort(-scores, kind="stable")  # highest first
    guesses = np.zeros(m, dtype=np.int8)
    guesses[order[:k_plus]] = 1
    if k_minus:
        guesses[order[m - k_minus:]] = -1
    return guesses


def _check_scores(scores) -> np.ndarray:
    if np.iscomplexobj(scores):
        raise TypeError("scores are complex; pass one real score per canary (the imaginary part would be dropped)")
    try:
        arr = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"scores must be a 1-D numeric array, got {type(scores).__name__}") from exc
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"scores must be a non-empty 1-D array (one score per canary), got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(
            f"scores hold {int(np.isnan(arr).sum())} NaN value(s) (a diverged model?); NaN cannot be ranked: "
            "audit a model whose outputs are finite"
        )
    return arr


def _check_membership(membership, m: int) -> np.ndarray:
    arr = np.asarray(membership)
    if arr.shape != (m,):
        raise ValueError(f"membership must have shape ({m},), one flag per canary, got {arr.shape}")
    if arr.dtype != bool:
        if not np.isin(arr, (0, 1)).all():
            raise ValueError("membership must hold booleans (True = canary was trained on), got other values")
        arr = arr.astype(bool)
    return arr


def _labels_to_int(labels, n: int, num_classes: int) -> np.ndarray:
    arr = np.asarray(labels)
    if arr.ndim == 2:
        if arr.shape != (n, num_classes):
            raise ValueError(f"one-hot labels must have shape ({n}, {num_classes}), got {arr.shape}")
        return np.argmax(arr, axis=1)
    if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"labels must be {n} integer class ids or a ({n}, {num_classes}) one-hot array, "
                         f"got shape {arr.shape} dtype {arr.dtype}")
    if arr.min() < 0 or arr.max() >= num_classes:
        raise ValueError(f"labels must lie in [0, {num_classes - 1}], got [{arr.min()}, {arr.max()}]")
    return arr


def _check_probabilities(probabilities) -> np.ndarray:
    p = np.asarray(probabilities, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(f"probabilities must have shape (m, num_classes >= 2), got {p.shape}")
    if not np.isfinite(p).all():
        raise ValueError("probabilities hold NaN or inf (a diverged model?); the audit needs finite outputs")
    if (p < 0).any() or (p > 1 + 1e-6).any():
        raise ValueError(
            f"probabilities must lie in [0, 1], got [{p.min():.3g}, {p.max():.3g}]; pass softmax outputs, not logits"
        )
    return p


def loss_scores(probabilities, labels) -> np.ndarray:
    """Score = log p(canary label) = −cross-entropy; trained-on canaries fit their label better.

    Args:
        probabilities: (m, M) class probabilities the method answers for the canaries.
        labels: (m,) class ids or (m, M) one-hot canary labels.

    Returns:
        (m,) float64 scores (−inf where p = 0: ranked lowest, never clipped).
    """
    p = _check_probabilities(probabilities)
    y = _labels_to_int(labels, p.shape[0], p.shape[1])
    with np.errstate(divide="ignore"):
        return np.log(p[np.arange(p.shape[0]), y])


def margin_scores(probabilities, labels) -> np.ndarray:
    """Score = log p(canary label) − log max_{j ≠ label} p(j), the logit margin of a softmax.

    Args / Returns: as :func:`loss_scores`. Infinite margins (a probability 0) are kept, never
    clipped.

    Raises:
        ValueError: a row whose label and every other class have probability 0 (no margin).
    """
    p = _check_probabilities(probabilities)
    n = p.shape[0]
    y = _labels_to_int(labels, n, p.shape[1])
    own = p[np.arange(n), y]
    others = p.copy()
    others[np.arange(n), y] = -np.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = np.log(own) - np.log(others.max(axis=1))
    if np.isnan(margin).any():
        raise ValueError("a canary has probability 0 for its label and for every other class; check the outputs")
    return margin
