"""The monomial algebra of pCDBN's polynomial energy (Phan, Wu, Dou 2017, §3, Eqs. 12–16).

With the sigmoid replaced by a degree-L polynomial (Eq. 14), one filter's energy summed over the
data is a polynomial in the d = N_W²·C_in + 1 entries of the filter vector w̃ (weights and bias),
with one monomial per multiset γ of variables of each order m = l + 1 (α_l ≠ 0). Its coefficients
``λ_γ = −(α_{m−1}/Z^{m−1})(m!/γ!)·S_γ`` need the data sums ``S_γ = Σ_records Σ_positions ṽ^γ``,
computed here by one GEMM of lower-order features per order; these are what the functional
mechanism perturbs (:class:`~tfdpmech.mechanisms.pcdbn.energy.ChebyshevEnergy`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import tensorflow as tf

from .conv_rbm import ConvRBM

__all__ = [
    "MAX_MONOMIALS",
    "energy_orders",
    "monomial_count",
    "monomial_table",
    "multinomial_factors",
    "monomial_features",
    "check_functional_feasible",
]

MAX_MONOMIALS = 1_000_000  # distinct monomials per layer that mode="private" expands explicitly


def energy_orders(alpha) -> list[int]:
    """Orders m = l + 1 of the monomials of Ê in w̃ (one per non-zero α_l of Eq. 14)."""
    return [l + 1 for l, a in enumerate(np.asarray(alpha, dtype=np.float64)) if a != 0.0]


def monomial_count(d: int, alpha) -> int:
    """Σ_m C(d + m − 1, m): distinct monomials of one filter's polynomial."""
    return int(sum(math.comb(d + m - 1, m) for m in energy_orders(alpha)))


def monomial_table(d: int, m: int) -> np.ndarray:
    """Sorted variable indices of every degree-m monomial in d variables, shape (C(d+m−1, m), m)."""
    if m == 0:
        return np.zeros((1, 0), dtype=np.int32)
    count = math.comb(d + m - 1, m)
    flat = np.fromiter(itertools.chain.from_iterable(itertools.combinations_with_replacement(range(d), m)),
                       dtype=np.int32, count=count * m)
    return flat.reshape(count, m)


def multinomial_factors(table: np.ndarray) -> np.ndarray:
    """``m!/γ!`` for each sorted row of a monomial table (float64)."""
    n, m = table.shape
    denom = np.ones(n)
    run = np.ones(n)
    for j in range(1, m):
        run = np.where(table[:, j] == table[:, j - 1], run + 1.0, 1.0)
        denom *= run
    return math.factorial(m) / denom


def _rank_lookup(d: int, r: int) -> np.ndarray:
    table = monomial_table(d, r)
    if r == 0:
        return np.zeros((), dtype=np.int64)
    lut = np.full((d,) * r, -1, dtype=np.int64)
    lut[tuple(table.T)] = np.arange(len(table))
    return lut


def monomial_features(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Every monomial of ``table`` evaluated on each row of ``x``: shape (rows, monomials)."""
    out = np.ones((x.shape[0], table.shape[0]))
    for j in range(table.shape[1]):
        out *= x[:, table[:, j]]
    return out


def check_functional_feasible(layer: ConvRBM, max_monomials: int = MAX_MONOMIALS) -> int:
    """Refuse a layer/degree whose explicit monomial expansion is too large (C(d+m−1, m) per order m).

    Returns:
        the monomial count.

    Raises:
        ValueError: more than ``max_monomials`` monomials; the message gives the count.
    """
    d = layer.patch_dim
    count = monomial_count(d, layer.alpha)
    if count > max_monomials:
        orders = energy_orders(layer.alpha)
        raise ValueError(
            f"mode='private' (the functional mechanism) is infeasible for this layer: approx={layer.approx!r} degree={layer.degree} gives "
            f"monomial orders {orders} in d={d} variables (N_W²·C_in + 1), i.e. {count:,} monomials, above the "
            f"limit max_monomials={max_monomials:,}. Use degree=3 (the paper finds L >= 3 enough) on small layers, "
            "approx='chebyshev_sigmoid' with degree=1 for wide layers, fewer input channels or a smaller kernel"
        )
    return count


def _exact_coefficients(layer: ConvRBM, x, *, chunk: int = 8192) -> dict:
    """Noise-free λ_γ and λ_c of Ê over ``x`` (Eq. 14 expanded in w̃). Internal: never exported."""
    d = layer.patch_dim
    orders = energy_orders(layer.alpha)
    splits = {m: (m // 2, m - m // 2) for m in orders}
    rs = sorted({r for m in orders for r in splits[m]})
    tables = {r: monomial_table(d, r) for r in rs}
    grams = {m: np.zeros((len(tables[splits[m][0]]), len(tables[splits[m][1]]))) for m in orders}
    s0 = 0.0
    n_img = max(1, chunk // max(1, int(np.prod(layer.hidden_shape(x.shape)))))
    for start in range(0, len(x), n_img):
        xb = x[start : start + n_img]
        s0 += float(np.sum(xb, dtype=np.float64))
        p = layer.patches(tf.constant(xb)).numpy().astype(np.float64).reshape(-1, d)
        feats = {r: monomial_features(p, tables[r]) for r in rs}
        for m in orders:
            r1, r2 = splits[m]
            grams[m] += feats[r1].T @ feats[r2]  # S_γ by one GEMM of lower-order features
    coeffs = {}
    for m in orders:
        r1, r2 = splits[m]
        table = monomial_table(d, m)
        i1 = _rank_lookup(d, r1)[tuple(table[:, :r1].T)] if r1 else np.zeros(len(table), dtype=np.int64)
        i2 = _rank_lookup(d, r2)[tuple(table[:, r1:].T)]
        s_gamma = grams[m][i1, i2]
        scale = layer.alpha[m - 1] / layer.z ** (m - 1)
        coeffs[m] = -scale * multinomial_factors(table) * s_gamma  # λ_γ = −(α_{m−1}/Z^{m−1})(m!/γ!)S_γ
    coeffs["c"] = -s0 if layer.visible_bias_enabled else 0.0  # λ_c = −s_0
    return coeffs
