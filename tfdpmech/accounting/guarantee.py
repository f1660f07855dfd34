"""A ledger's total guarantee: a proven (ε, δ) with its argument, or none proven with the reason.

:class:`Guarantee` and :class:`NoneProven` are what
:meth:`~tfdpmech.accounting.ledger.PrivacyLedger.provable` returns; :func:`format_epsilon` prints a
claimed and a provable ε side by side, rounded on the safe side.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

from .display import delta_text, epsilon_upper

__all__ = ["Guarantee", "NoneProven", "NONE_PROVEN", "format_epsilon"]

NONE_PROVEN = "none proven"


# ---------------------------------------------------------------------------------------------------------------
# values: a proven guarantee, or none proven with the reason
# ---------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Guarantee:
    """A proven (ε, δ) guarantee of a whole ledger and the argument behind it."""

    epsilon: float
    delta: float
    basis: str

    def __bool__(self) -> bool:
        return True


@dataclasses.dataclass(frozen=True)
class NoneProven:
    """No proven guarantee exists; ``reason`` says why. Falsy, prints as ``"none proven"``.

    In JSON it is written as ``"epsilon_provable": null`` next to ``"provable_basis": reason``.
    """

    reason: str
    epsilon = None

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return NONE_PROVEN


def _describe(value) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60] + '...' if len(text) > 60 else text}"


def format_epsilon(claimed: float, provable, delta: float = 0.0) -> str:
    """Render claimed and provable ε together, e.g. ``claimed ε=0.3 | provable ε=11.2``.

    ``provable`` is a number, None or a :class:`NoneProven`. Both ε are upper bounds and are
    rounded up (:func:`~tfdpmech.accounting.display.epsilon_upper`: 11.1729 shows as 11.18); δ
    keeps its digits (:func:`~tfdpmech.accounting.display.delta_text`).

    Raises:
        TypeError / ValueError: ``claimed`` or ``provable`` not a real number >= 0 (∞ allowed: no
            privacy), ``delta`` negative or NaN.
    """
    for name, value in (("claimed", claimed), ("provable", provable), ("delta", delta)):
        if name == "provable" and (value is None or isinstance(value, NoneProven)):
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"format_epsilon: {name} must be a real number, got {_describe(value)}; pass a float")
        if math.isnan(value) or value < 0:  # a composed δ >= 1 is vacuous but still shown as it is
            raise ValueError(f"format_epsilon: {name} must be >= 0 (inf for no privacy), got {value!r}")
    d = f", δ={delta_text(delta)}" if delta else ""
    prov = NONE_PROVEN if provable is None or isinstance(provable, NoneProven) else f"ε={epsilon_upper(provable)}{d}"
    return f"claimed ε={epsilon_upper(claimed)} | provable {prov}"
