"""ε and δ as people read them: every printed number errs on the safe side.

* An upper bound on ε (a claimed or a provable ε, a per-query ε) is rounded **up**:
  1.1113 prints as ``1.12``, 0.9999 as ``1``; the reader never sees a smaller ε than the one
  that holds.
* A lower bound on ε (an audit's empirical bound) is rounded **down**: 0.716 prints as ``0.71``;
  the reader never sees a stronger attack than the one measured.
* δ is printed with its own digits (``1e-05``, ``1.5e-06``), never rounded to one significant
  figure; only a δ with more than :data:`DELTA_DIGITS` significant digits (such as 1/n²) is
  rounded, and then up.

ε is shown with two decimals, or two significant figures when it is below 0.1 (0.0123 → ``0.013``
as an upper bound), without trailing zeros. Before rounding, a value is read at 12 significant
digits, the precision of the float arithmetic that produced it, so that a sum such as
0.1 + 0.2 = 0.30000000000000004 prints as ``0.3``, not ``0.31``.
"""

from __future__ import annotations

import math
import numbers
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

__all__ = ["epsilon_upper", "epsilon_lower", "delta_text", "DELTA_DIGITS"]

DELTA_DIGITS = 4  # significant digits of δ shown exactly; more are rounded up
_FLOAT_DIGITS = 12  # the precision at which a float is read before it is rounded for display


def _checked(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}; pass a float")
    value = float(value)
    if math.isnan(value) or value < 0:
        raise ValueError(f"{name} must be >= 0 (inf for no privacy), got {value!r}")
    return value


def _decimal(value: float) -> Decimal:
    return Decimal(f"{value:.{_FLOAT_DIGITS}g}")


def _plain(number: Decimal) -> str:
    text = format(number, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _epsilon(value, rounding, name: str) -> str:
    value = _checked(value, name)
    if math.isinf(value):
        return "∞"
    d = _decimal(value)
    if d == 0:
        return "0"
    decimals = max(2, 1 - d.adjusted())  # two decimals, at least two significant figures
    rounded = d.quantize(Decimal(1).scaleb(-decimals), rounding=rounding)
    return f"{float(rounded):g}" if d.adjusted() < -4 else _plain(rounded)  # 1.2e-05, not 0.000012


def epsilon_upper(value) -> str:
    """An upper bound on ε (claimed, provable, per query) for display, rounded up.

    Raises:
        TypeError / ValueError: not a real number >= 0 (∞ is shown as ``∞``).
    """
    return _epsilon(value, ROUND_CEILING, "epsilon")


def epsilon_lower(value) -> str:
    """A lower bound on ε (an audit's) for display, rounded down.

    Raises:
        TypeError / ValueError: not a real number >= 0.
    """
    return _epsilon(value, ROUND_FLOOR, "epsilon lower bound")


def delta_text(value) -> str:
    """δ for display with its own digits (``1e-05``, ``1.5e-06``, ``0``); beyond
    :data:`DELTA_DIGITS` significant digits it is rounded up.

    Raises:
        TypeError / ValueError: not a real number >= 0.
    """
    value = _checked(value, "delta")
    if math.isinf(value):
        return "∞"
    d = _decimal(value).normalize()
    if d == 0:
        return "0"
    if len(d.as_tuple().digits) > DELTA_DIGITS:
        d = d.quantize(Decimal(1).scaleb(d.adjusted() - DELTA_DIGITS + 1), rounding=ROUND_CEILING)
    return f"{float(d):g}"
