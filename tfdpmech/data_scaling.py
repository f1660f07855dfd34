"""Scaling to [0, 1]: with public domain bounds (:func:`scale_to_unit`), or with the data's own (leaks).

:func:`scale_to_unit` maps data into [0, 1] with *public* domain bounds and refuses values
outside them. :func:`scale_with_data_bounds` uses the data's own min/max, which leaks information
about the private records, and therefore warns :class:`~tfdpmech.privacy_warnings.PrivacyLeakWarning`
(as diffprivlib does). Both are importable from :mod:`tfdpmech.data`.
"""

from __future__ import annotations

import warnings

import numpy as np

from .validation import PrivacyLeakWarning, check_array

__all__ = ["scale_to_unit", "scale_with_data_bounds"]



def _check_bound(value, name: str) -> np.ndarray:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a real number or array of them, got {value!r}")
    arr = check_array(value, name, ndim_min=0)
    return arr.astype(np.float64)


def scale_to_unit(x, low, high) -> np.ndarray:
    """Map ``x`` from the public domain ``[low, high]`` to [0, 1].

    ``low`` and ``high`` must be known without looking at the private data
    (for 8-bit pixels: 0 and 255). They may be scalars or arrays broadcastable
    to ``x`` (per-feature bounds). Values outside the bounds are refused, never
    clipped: clipping would hide a wrong bound.

    Args:
        x: numeric array.
        low: public lower bound(s).
        high: public upper bound(s), greater than ``low``.

    Returns:
        float32 array of ``x``'s shape with values in [0, 1].

    Raises:
        TypeError: ``x`` or a bound is not numeric.
        ValueError: NaN/inf in ``x`` or the bounds, ``low >= high``, bounds that do
            not broadcast to ``x``, or values of ``x`` outside ``[low, high]``.
    """
    arr = check_array(x, "x", ndim_min=0)
    lo = _check_bound(low, "low")
    hi = _check_bound(high, "high")
    for bname, b in (("low", lo), ("high", hi)):
        try:
            ok = np.broadcast_shapes(b.shape, arr.shape) == arr.shape
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{bname} has shape {b.shape}, which does not broadcast to x's shape {arr.shape}")
    if np.any(lo >= hi):
        raise ValueError(
            f"low must be < high, got low={_short(lo)}, high={_short(hi)}; pass the public domain bounds, "
            "e.g. low=0, high=255 for 8-bit pixels"
        )
    below = arr < lo
    above = arr > hi
    if np.any(below) or np.any(above):
        raise ValueError(
            f"x has {int(np.count_nonzero(below | above))} value(s) outside the public bounds "
            f"[low={_short(lo)}, high={_short(hi)}] (x spans [{float(arr.min()):g}, {float(arr.max()):g}]); "
            "fix the bounds (they must be known without looking at the data) or clean the data first; "
            "values are never clipped silently"
        )
    # float32 arithmetic for 8/16-bit data (large image sets), float64 otherwise. Rounding is
    # monotone, so x in [low, high] still maps into [0, 1] exactly.
    work = np.result_type(arr.dtype, np.float32)
    out = (arr.astype(work) - lo.astype(work)) / (hi.astype(work) - lo.astype(work))
    return np.asarray(out, dtype=np.float32)


def scale_with_data_bounds(x, *, axis=None):
    """Map ``x`` to [0, 1] with bounds taken from ``x`` itself; warns PrivacyLeakWarning.

    The minimum and maximum of the private data are themselves private: a
    mechanism whose sensitivity assumes public bounds is no longer differentially
    private when the bounds come from the data. Prefer :func:`scale_to_unit`
    with public bounds. A constant feature (min == max) maps to 0.

    Args:
        x: numeric array.
        axis: None for one global min/max, or an axis (e.g. 0 for per-feature bounds
            of an (n, d) table).

    Returns:
        ``(scaled, (low, high))``: the float32 scaled array and the bounds used
        (floats, or arrays with ``axis`` kept as size 1).

    Raises:
        TypeError: ``x`` is not numeric.
        ValueError: ``x`` is empty or holds NaN/inf.

    Warns:
        PrivacyLeakWarning: always.
    """
    arr = check_array(x, "x", ndim_min=0)
    warnings.warn(
        "scale_with_data_bounds takes the bounds from the private data itself, which leaks information "
        "and voids the privacy guarantee of mechanisms that assume public bounds; pass public domain "
        "bounds to tfdpmech.data.scale_to_unit instead (e.g. low=0, high=255 for pixels)",
        PrivacyLeakWarning,
        stacklevel=2,
    )
    work = np.result_type(arr.dtype, np.float32)
    a = arr.astype(work)
    lo = a.min(axis=axis, keepdims=axis is not None)
    hi = a.max(axis=axis, keepdims=axis is not None)
    span = hi - lo
    safe = np.where(span > 0, span, 1)
    out = np.asarray((a - lo) / safe, dtype=np.float32)
    if axis is None:
        return out, (float(lo), float(hi))
    return out, (lo.astype(np.float64), hi.astype(np.float64))


def _short(a: np.ndarray) -> str:
    if a.ndim == 0 or a.size == 1:
        return f"{float(a.reshape(-1)[0]):g}"
    return f"array{a.shape}[{float(a.min()):g}..{float(a.max()):g}]"
