"""Input checks shared by every mechanism.

Every check raises a ``ValueError`` or ``TypeError`` whose message names the
argument, shows the offending value and says how to fix it. Nothing here
clips, rescales or drops data: bad input is refused, never repaired.

The checks of numbers and arguments live here; importable from here too: the checks of data arrays
(:mod:`tfdpmech.array_checks`), the privacy warnings (:mod:`tfdpmech.privacy_warnings`) and the
released-data guard of the noise-once mechanisms (:class:`ReleasedData`, :class:`ReleasedDataGuard`,
:func:`guard_training_data`, :func:`array_fingerprint`, :mod:`tfdpmech.released_data`).
"""

from __future__ import annotations

import math
import numbers
import sys
from collections import abc
from typing import Sequence

import keras
import numpy as np

from .array_checks import check_array, check_labels, check_one_hot, check_unit_interval
from .privacy_warnings import PrivacyLeakWarning, UnprovenModeWarning, warn_unproven_mode
from .released_data import ReleasedData, ReleasedDataGuard, array_fingerprint, guard_training_data

__all__ = [
    "PrivacyLeakWarning",
    "UnprovenModeWarning",
    "warn_unproven_mode",
    "check_array",
    "check_unit_interval",
    "check_one_hot",
    "check_labels",
    "check_epsilon",
    "check_positive_real",
    "check_delta",
    "check_positive_int",
    "check_step_count",
    "check_budget_split",
    "check_choice",
    "check_batch_size",
    "check_real",
    "check_fractions",
    "check_interval",
    "check_instance",
    "check_graph_model",
    "array_fingerprint",
    "ReleasedData",
    "ReleasedDataGuard",
    "guard_training_data",
    "EPSILON_RANGE",
]

# ε outside this range is a mistake: above it a "privacy budget" protects nothing and noise scales
# underflow; below it noise scales (sensitivity / ε) overflow float64 arithmetic downstream.
EPSILON_RANGE = (1e-12, 1e12)


def _describe(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_positive_real(value, name: str, *, hint: str = "") -> float:
    """Check ``value`` is a finite real number > 0.

    Raises:
        TypeError: not a real number.
        ValueError: <= 0, NaN or inf.
    """
    value = _real(value, name, "a positive real number")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {value}" + (f"; {hint}" if hint else ""))
    if value < sys.float_info.min:
        raise ValueError(
            f"{name}={value!r} is subnormal (below {sys.float_info.min:.3g}): quantities divided by it overflow; "
            + (hint if hint else "pass a realistic value")
        )
    return value


def _real(value, name: str, what: str) -> float:
    """``value`` as a float; TypeError for bools and non-numbers, ValueError for numbers too large for a float."""
    if isinstance(value, bool) or isinstance(value, np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {what}, got {_describe(value)} ({type(value).__name__})"
                        + ("; convert strings with float(...)" if isinstance(value, str) else ""))
    try:
        return float(value)
    except OverflowError:
        raise ValueError(
            f"{name} is too large to be a float ({len(str(abs(int(value))))} digits); pass a realistic value"
        ) from None


def check_real(value, name: str, *, minimum: float | None = None, maximum: float | None = None,
               hint: str = "") -> float:
    """Check ``value`` is a finite real number (not a bool or a string), within optional bounds.

    Raises:
        TypeError: not a real number.
        ValueError: NaN, inf, too large for a float, or outside ``[minimum, maximum]``.
    """
    number = _real(value, name, "a real number")
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {number}" + (f"; {hint}" if hint else ""))
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        lo = "-inf" if minimum is None else f"{minimum:g}"
        hi = "inf" if maximum is None else f"{maximum:g}"
        raise ValueError(f"{name} must lie in [{lo}, {hi}], got {number:g}" + (f"; {hint}" if hint else ""))
    return number


def check_epsilon(eps, name: str = "epsilon") -> float:
    """Check ε is a finite positive real number.

    Raises:
        TypeError: not a real number.
        ValueError: ε <= 0, NaN or inf.
    """
    eps = check_positive_real(eps, name, hint="pass a privacy budget such as 0.5")
    lo, hi = EPSILON_RANGE
    if not lo <= eps <= hi:
        raise ValueError(
            f"{name}={eps:g} is outside [{lo:g}, {hi:g}]: "
            + ("a budget this large protects nothing and its noise scales underflow; for non-private training use "
               "the nonprivate baseline" if eps > hi else
               "a budget this small makes the noise scale (sensitivity / ε) overflow")
            + "; pass a privacy budget such as 0.5"
        )
    return eps


def check_delta(delta, name: str = "delta") -> float:
    """Check δ ∈ (0, 1).

    Raises:
        TypeError: not a real number.
        ValueError: δ outside (0, 1).
    """
    value = _real(delta, name, "a real number in (0, 1)")
    if not (0.0 < value < 1.0):
        raise ValueError(f"{name} must lie in (0, 1), got {value}; a common choice is 1e-5 or 1/n")
    return value


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """Check ``value`` is an integer >= ``minimum``.

    Raises:
        TypeError: not an integer.
        ValueError: below ``minimum``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        hint = "; convert strings with int(...)" if isinstance(value, str) else ""
        raise TypeError(f"{name} must be an integer, got {_describe(value)} ({type(value).__name__}){hint}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_step_count(value, name: str, fix: str) -> int:
    """A number of steps or an interval between evaluations: an integer >= 1.

    Raises:
        ValueError: anything else (a bool, a float, a string, 0 or less), naming ``name``, the value and ``fix``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name}={value!r} ({type(value).__name__}) must be an integer >= 1; {fix}")
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


def check_fractions(split, name: str, count: int, *, total: float = 1.0, tol: float = 1e-9,
                    allow_less: bool = False) -> tuple:
    """Check ``split`` is ``count`` positive fractions summing to ``total`` (at most ``total`` if ``allow_less``).

    Raises:
        TypeError: not a sequence of real numbers.
        ValueError: wrong length, a fraction <= 0, or a sum off ``total`` by more than ``tol``.
    """
    if isinstance(split, (str, bytes, dict)) or not isinstance(split, (abc.Sequence, np.ndarray)):
        raise TypeError(f"{name} must be a sequence of {count} fractions, got {type(split).__name__} {_describe(split)}")
    if len(split) != count:
        raise ValueError(f"{name} must have {count} fractions, got {len(split)}: {_describe(split)}")
    fractions = tuple(check_positive_real(f, f"{name}[{i}]") for i, f in enumerate(split))
    s = math.fsum(fractions)
    if s > total * (1 + tol) or (not allow_less and s < total * (1 - tol)):
        bound = "at most" if allow_less else "exactly"
        raise ValueError(
            f"{name}={_describe(split)} sums to {s:.12g}; the fractions must sum to {bound} {total:g} so that no more "
            f"than the total budget is spent. Rescale them, e.g. {name}=tuple(f / sum({name}) for f in {name})"
        )
    return fractions


def check_interval(value, name: str) -> tuple[float, float]:
    """Check ``value`` is a pair ``(low, high)`` of finite reals with ``low < high``.

    Raises:
        TypeError: not a pair of real numbers.
        ValueError: wrong length, NaN/inf, or ``low >= high``.
    """
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, (abc.Sequence, np.ndarray)):
        raise TypeError(f"{name} must be a pair (low, high), got {type(value).__name__} {_describe(value)}")
    if len(value) != 2:
        raise ValueError(f"{name} must be a pair (low, high), got {len(value)} value(s): {_describe(value)}")
    low, high = (_real(v, f"{name}[{i}]", "a real number") for i, v in enumerate(value))
    if not (math.isfinite(low) and math.isfinite(high)) or not low < high:
        raise ValueError(f"{name} must be (low, high) with finite low < high, got {_describe(value)}")
    return low, high


def check_instance(value, name: str, cls, hint: str = ""):
    """Check ``isinstance(value, cls)``; TypeError naming the argument and the expected type otherwise."""
    if not isinstance(value, cls):
        names = " or ".join(c.__name__ for c in (cls if isinstance(cls, tuple) else (cls,)))
        raise TypeError(f"{name} must be a {names}, got {type(value).__name__} {_describe(value)}"
                        + (f"; {hint}" if hint else ""))
    return value


def check_graph_model(model, name: str = "model"):
    """Check ``model`` is a built Sequential or functional ``keras.Model`` whose layers can be inspected.

    The mechanisms read the model's input shape and layer list before any noise is drawn; a
    subclassed model has neither until it is called, an unbuilt ``Sequential`` no input shape.

    Raises:
        TypeError: not a ``keras.Model``.
        ValueError: a subclassed model, or a model without a defined input shape.
    """
    if not isinstance(model, keras.Model):
        raise TypeError(f"{name} must be a keras.Model, got {type(model).__name__} {_describe(model)}")
    functional = isinstance(model, keras.Sequential) or bool(getattr(model, "_is_graph_network", False))
    functional = functional or type(model).__name__ == "Functional"
    if not functional:
        raise ValueError(
            f"{name} {model.name!r} is a subclassed keras.Model ({type(model).__name__}); its layers and input shape "
            "cannot be inspected before it runs. Build the same network as a keras.Sequential or functional model"
        )
    try:
        shape = model.input_shape
    except (AttributeError, ValueError):
        shape = None
    if not model.built or shape is None:
        raise ValueError(
            f"{name} {model.name!r} is not built (no input shape yet); start it with keras.Input(shape) or call "
            f"{name}.build((None, *feature_shape)) first"
        )
    return model
