"""The Rényi orders tfdpmech asks ``dp_accounting``'s RDP accountant for.

``dp_accounting.rdp.RdpAccountant`` (0.5 and later) evaluates a Poisson-subsampled Gaussian at a
fractional order by a series (``_compute_log_a_frac``; Mironov, Talwar & Zhang 2019, §3.3) that it
stops after 1,000 terms. At the lowest fractional orders of its default list (1.1 to 2.2, measured
over q ∈ [1e-4, 0.99] and σ ∈ [0.02, 50]) the series does not settle in time when q is large and σ
moderate (q = 0.25 and σ ∈ [0.3, 2]: the demo's DP-SGD): the library logs one warning per order and
leaves the order out. Integer orders are finite sums, and fractional orders from 2.5 up always settled.

An order α cannot give an ε below ``order_floor(α, δ) = log(1 − 1/α) − log(δ·α)/(α − 1)``: the
library converts RDP r ≥ 0 to ``ε = r + log(1 − 1/α) − log(δ·α)/(α − 1)`` (Canonne, Kamath & Steinke
2020, Prop. 12). So an order whose floor lies above an ε already certified cannot lower the minimum
over orders. :func:`rdp_epsilon` first asks for the orders that always settle, then adds the low
fractional orders whose floor lies below that ε (at δ = 1e-5: only when ε > 7.06, the floor of 2.4):
the result is the default orders' ε, and the low orders are asked for only where they can lower it.
With ``at_most`` (a calibration asking "is ε ≤ target?") only the orders whose floor is at most the
target are added: the answer is exact whenever ε ≤ target and above the target otherwise, so the
calibrated σ is the default orders' one. (One corner: the library reads ε = 0 from an order whose
RDP is below about δ²; an order left out there changes an ε below log(1/δ)/1023, about 0.01, upward.)
"""

from __future__ import annotations

import math

__all__ = ["ALWAYS_SETTLES_FROM", "order_floor", "rdp_orders", "rdp_accountant", "rdp_epsilon"]

ALWAYS_SETTLES_FROM = 2.5  # fractional orders from here up: the library's series always settled


def _default_orders(dp_accounting) -> tuple:
    return tuple(float(a) for a in dp_accounting.rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS)


def order_floor(alpha: float, delta: float) -> float:
    """The smallest ε the RDP order ``alpha`` can give at ``delta`` (its RDP being >= 0)."""
    return math.log1p(-1.0 / alpha) - math.log(delta * alpha) / (alpha - 1.0)


def rdp_orders(dp_accounting, delta: float, at_most: float = -math.inf) -> tuple:
    """dp_accounting's default orders that always settle, and the others whose floor is <= ``at_most``."""
    return tuple(a for a in _default_orders(dp_accounting)
                 if a.is_integer() or a >= ALWAYS_SETTLES_FROM or order_floor(a, delta) <= at_most)


def rdp_accountant(dp_accounting, delta: float, at_most: float = -math.inf):
    """An ``RdpAccountant`` (add-or-remove-one adjacency) over :func:`rdp_orders`."""
    return dp_accounting.rdp.RdpAccountant(orders=rdp_orders(dp_accounting, delta, at_most))


def rdp_epsilon(dp_accounting, event, delta: float, at_most: float = math.inf) -> float:
    """ε of ``event`` at ``delta`` by RDP, equal to that of dp_accounting's default orders.

    With a finite ``at_most``: exact when that ε is <= ``at_most``, above ``at_most`` otherwise.
    """
    if math.isfinite(at_most):
        return float(rdp_accountant(dp_accounting, delta, at_most).compose(event).get_epsilon(delta))
    settled = rdp_orders(dp_accounting, delta)
    epsilon = float(dp_accounting.rdp.RdpAccountant(orders=settled).compose(event).get_epsilon(delta))
    orders = rdp_orders(dp_accounting, delta, epsilon)
    if len(orders) == len(settled):
        return epsilon
    return min(epsilon, float(dp_accounting.rdp.RdpAccountant(orders=orders).compose(event).get_epsilon(delta)))
