"""Checks of data arrays: numeric, finite, non-empty; features in [0, 1]; one-hot or integer labels.

Each raises a ``ValueError`` or ``TypeError`` naming the array, the offending values and the fix;
nothing is clipped, rescaled or dropped (importable from :mod:`tfdpmech.validation` too).
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_array", "check_unit_interval", "check_one_hot", "check_labels"]

_CHECK_CHUNK_BYTES = 16 * 2**20  # the finite check reads this much at a time (a memmap is never loaded whole)


def _not_finite_count(arr: np.ndarray) -> int:
    """The NaN and infinite values of ``arr``, counted a block of rows at a time (memory: one block)."""
    if not np.issubdtype(arr.dtype, np.inexact):
        return 0
    if arr.ndim == 0:
        return int(not np.isfinite(arr))
    rows = max(1, _CHECK_CHUNK_BYTES // max(1, arr[0].nbytes))  # slices of rows: never a copy of the whole array
    blocks = (arr[i:i + rows] for i in range(0, len(arr), rows))
    return sum(int(block.size - np.count_nonzero(np.isfinite(block))) for block in blocks)


def check_array(x, name: str, *, ndim_min: int = 1) -> np.ndarray:
    """Return ``x`` as a float ndarray after checking it is numeric, finite and non-empty.

    Raises:
        TypeError: ``x`` is not numeric.
        ValueError: ``x`` is empty, has too few dimensions, or holds NaN/inf.
    """
    try:
        arr = np.asarray(x)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise TypeError(f"{name} must be array-like, got {type(x).__name__}") from exc
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(
            f"{name} must be a numeric array, got dtype {arr.dtype}; convert it with np.asarray(..., dtype=float)"
        )
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(
            f"{name} has complex dtype {arr.dtype}; the mechanisms work on real features and would silently drop "
            f"the imaginary part. Pass real features, e.g. np.real({name}) if the imaginary part is zero, or "
            f"np.concatenate([{name}.real, {name}.imag], axis=-1) to keep both"
        )
    if arr.ndim < ndim_min:
        raise ValueError(f"{name} must have at least {ndim_min} dimension(s), got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape}); pass at least one record")
    bad = _not_finite_count(arr)
    if bad:
        raise ValueError(
            f"{name} contains {bad} NaN or infinite value(s); remove or impute them before the private step"
        )
    return arr


def check_unit_interval(x, name: str = "x", *, tol: float = 1e-6) -> np.ndarray:
    """Check every feature lies in [0, 1] (up to ``tol``); the sensitivities assume it.

    Raises:
        ValueError: values outside [0, 1], NaN or inf.
    """
    arr = check_array(x, name)
    lo, hi = float(arr.min()), float(arr.max())
    if lo < -tol or hi > 1.0 + tol:
        raise ValueError(
            f"{name} must lie in [0, 1] (the sensitivity bounds assume it), got values in [{lo:g}, {hi:g}]; "
            "scale with public domain bounds, e.g. tfdpmech.data.scale_to_unit(x, low=0, high=255) for pixels"
        )
    return arr


def check_one_hot(y, name: str = "y", *, num_classes: int | None = None) -> np.ndarray:
    """Check ``y`` is a (n, M) one-hot matrix.

    Raises:
        ValueError: wrong rank, entries other than 0/1, rows that do not sum to 1,
            or a class count different from ``num_classes``.
    """
    arr = check_array(y, name, ndim_min=2)
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be one-hot of shape (n, num_classes), got shape {arr.shape}; "
            "convert integer labels with keras.utils.to_categorical"
        )
    if num_classes is not None and arr.shape[1] != num_classes:
        raise ValueError(f"{name} has {arr.shape[1]} classes, expected num_classes={num_classes}")
    if not np.all((arr == 0) | (arr == 1)) or not np.all(arr.sum(axis=1) == 1):
        raise ValueError(
            f"{name} must be one-hot (entries 0/1, exactly one 1 per row); "
            "convert integer labels with keras.utils.to_categorical"
        )
    return arr.astype(np.float32)


def check_labels(y, name: str = "y", *, num_classes: int) -> np.ndarray:
    """Return one-hot labels from one-hot or integer labels in ``[0, num_classes)``.

    Raises:
        ValueError: labels out of range, not integers, or not one-hot.
    """
    arr = np.asarray(y)
    if arr.ndim == 2:
        return check_one_hot(arr, name, num_classes=num_classes)
    arr = check_array(arr, name)
    if arr.ndim != 1 or not np.all(arr == np.round(arr)):
        raise ValueError(f"{name} must be integer class ids of shape (n,) or one-hot (n, {num_classes})")
    if arr.min() < 0 or arr.max() >= num_classes:
        raise ValueError(
            f"{name} has labels in [{int(arr.min())}, {int(arr.max())}], outside [0, {num_classes - 1}]; "
            "check num_classes"
        )
    return np.eye(num_classes, dtype=np.float32)[arr.astype(int)]
