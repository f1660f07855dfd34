"""Group privacy: what a record-level (ε, δ) guarantee says about a person who holds m records.

A mechanism that is (ε, δ)-DP for data sets differing in one record is, for data sets differing in m records
(one person's m records added or removed), (m·ε, δ_m)-DP with

    δ_m = δ · (1 + e^ε + e^{2ε} + … + e^{(m−1)ε})          (≤ m · e^{(m−1)ε} · δ)

by chaining the one-record guarantee along m neighbouring data sets x₀, …, x_m: P[M(x₀) ∈ S] ≤ e^ε P[M(x₁) ∈ S]
+ δ ≤ … ≤ e^{mε} P[M(x_m) ∈ S] + δ Σ_{i<m} e^{iε} (the standard group-privacy argument; Dwork & Roth 2014,
Theorem 2.2, state it for δ = 0). It holds for any mechanism, so it is what a
record-level run proves for a person; the ε comes from ``dp_accounting`` (the run's ledger), the chain is closed
form. It is often loose — a user-level run (:mod:`tfdpmech.mechanisms.dpsgd.sampling.user_sampling`) accounts for a
person directly — and where δ_m ≥ 1 nothing is proven for the group.
"""

from __future__ import annotations

import math
import numbers

__all__ = ["group_epsilon_delta"]


def group_epsilon_delta(epsilon: float, delta: float, records: int) -> tuple[float, float]:
    """``(m·ε, δ_m)`` for a group of ``records`` = m records from a record-level (ε, δ) guarantee (module
    docstring); ``δ_m`` is ``inf`` where it overflows and may be ≥ 1 (then no guarantee holds for the group).

    Raises:
        TypeError / ValueError: ε or δ not a real number ≥ 0 (δ ≤ 1), m not an int ≥ 1.
    """
    for value, name in ((epsilon, "epsilon"), (delta, "delta")):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
            raise ValueError(f"{name} must be a real number >= 0, got {value!r}")
    if delta > 1:
        raise ValueError(f"delta must be at most 1, got {delta!r}")
    if isinstance(records, bool) or not isinstance(records, numbers.Integral) or records < 1:
        raise ValueError(f"records must be an int >= 1 (the records one person holds), got {records!r}")
    m, eps, delta = int(records), float(epsilon), float(delta)
    if delta == 0:
        return m * eps, 0.0
    try:
        # Σ_{i<m} e^{iε} = (e^{mε} − 1) / (e^ε − 1), or m when ε = 0
        geometric = float(m) if eps == 0 else math.expm1(m * eps) / math.expm1(eps)
    except OverflowError:
        return m * eps, math.inf
    return m * eps, delta * geometric
