"""Input checks shared by every mechanism.

Every check raises a ``ValueError`` or ``TypeError`` whose message names the
argument, shows the offending value and says how to fix it. Nothing here
clips, rescales or drops data: bad input is refused, never repaired.
"""

from __future__ import annotations

import math
import numbers
from typing import Sequence

import numpy as np

__all__ = [
    "PrivacyLeakWarning",
    "check_array",
    "check_unit_interval",
    "check_one_hot",
    "check_labels",
    "check_epsilon",
    "check_positive_real",
    "check_delta",
    "check_positive_int",
    "check_budget_split",
    "check_choice",
    "check_batch_size",
]


class PrivacyLeakWarning(Warning):
    """Warned when a quantity that should be public is taken from the private data.

    It derives from ``Warning`` directly, not from ``UserWarning`` or ``RuntimeWarning``, so the
    common ``warnings.filterwarnings("ignore", category=UserWarning)`` (or numpy's
    ``RuntimeWarning`` noise filters) do not hide a leak.
    """


def _describe(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


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
    if arr.ndim < ndim_min:
        raise ValueError(f"{name} must have at least {ndim_min} dimension(s), got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape}); pass at least one record")
    if not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
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


def check_positive_real(value, name: str, *, hint: str = "") -> float:
    """Check ``value`` is a finite real number > 0.

    Raises:
        TypeError: not a real number.
        ValueError: <= 0, NaN or inf.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive real number, got {_describe(value)}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {value}" + (f"; {hint}" if hint else ""))
    return value


def check_epsilon(eps, name: str = "epsilon") -> float:
    """Check ε is a finite positive real number.

    Raises:
        TypeError: not a real number.
        ValueError: ε <= 0, NaN or inf.
    """
    return check_positive_real(eps, name, hint="pass a privacy budget such as 0.5")


def check_delta(delta, name: str = "delta") -> float:
    """Check δ ∈ (0, 1).

    Raises:
        TypeError: not a real number.
        ValueError: δ outside (0, 1).
    """
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
        raise TypeError(f"{name} must be a real number in (0, 1), got {_describe(delta)}")
    value = float(delta)
    if not (0.0 < value < 1.0):
        raise ValueError(f"{name} must lie in (0, 1), got {value}; a common choice is 1e-5 or 1/n")
    return value


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """Check ``value`` is an integer >= ``minimum``.

    Raises:
        TypeError: not an integer.
        ValueError: below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {_describe(value)}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_budget_split(total, parts: dict, *, rel_tol: float = 1e-9) -> dict:
    """Check every part of an ε split is positive and the parts add up to ``total``.

    Args:
        total: the total budget, or None to skip the sum check.
        parts: ``{name: epsilon}``.

    Raises:
        ValueError: a part is not positive, or the parts do not sum to ``total``.
    """
    checked = {name: check_epsilon(value, name) for name, value in parts.items()}
    if total is not None:
        total = check_epsilon(total, "epsilon")
        s = sum(checked.values())
        if not math.isclose(s, total, rel_tol=rel_tol, abs_tol=1e-12):
            detail = " + ".join(f"{k}={v:g}" for k, v in checked.items())
            raise ValueError(
                f"the ε split does not add up: {detail} = {s:g}, but epsilon={total:g}; "
                "pass parts that sum to the total, or omit the total"
            )
    return checked


def check_choice(value, name: str, choices: Sequence[str]) -> str:
    """Check ``value`` is one of ``choices``.

    Raises:
        ValueError: unknown value; the message lists the valid ones.
    """
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {_describe(value)}")
    return value


def check_batch_size(batch_size, name: str = "batch_size", *, n: int | None = None) -> int:
    """Check a batch size is a positive integer no larger than the number of records.

    Raises:
        TypeError / ValueError: as for :func:`check_positive_int`, or batch larger than ``n``.
    """
    batch_size = check_positive_int(batch_size, name)
    if n is not None and batch_size > n:
        raise ValueError(
            f"{name}={batch_size} exceeds the number of training records n={n}; "
            "no full batch could be formed. Use a smaller batch size"
        )
    return batch_size
