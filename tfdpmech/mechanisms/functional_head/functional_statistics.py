"""The functional head's statistics (S1, S2) and the post-processing of their one noisy release.

``S1 = pᵀ(½ − Y)`` and ``S2 = pᵀp`` of the order-2 Taylor cross-entropy (AdLM Eq. 25; Zhang et al.,
PVLDB 2012, §5); after the release: the PSD projection, the public ridge rule and the pseudo-records
whose Taylor loss is the released objective (:class:`~tfdpmech.mechanisms.functional_head.FunctionalHead`).
"""

from __future__ import annotations

import math

import numpy as np

from ..adlm.taylor_cross_entropy import PHI2

__all__ = ["functional_statistics", "project_psd", "default_ridge", "symmetric_from_triangle", "pseudo_records"]


def functional_statistics(p, y) -> tuple:
    """Exact ``S1 = pᵀ(½ − Y)`` (d × C) and ``S2 = pᵀp`` (d × d), float64. Never released as is."""
    p = np.asarray(p, dtype=np.float64)
    return p.T @ (0.5 - np.asarray(y, dtype=np.float64)), p.T @ p


def project_psd(m, floor: float = 0.0) -> np.ndarray:
    """Symmetrise and raise eigenvalues below ``floor`` to it (post-processing of a released matrix)."""
    m = np.asarray(m, dtype=np.float64)
    m = 0.5 * (m + m.T)
    vals, vecs = np.linalg.eigh(m)
    return (vecs * np.maximum(vals, floor)) @ vecs.T


def default_ridge(noise_std: float, dim: int, n: int) -> float:
    """``ρ = max(½·√d·s, 10⁻³·n)``: public quantities only (S2's noise std s, the dimension d, n).

    ``2√d·s`` is about the spectral norm of a symmetric d×d noise matrix with entry std s; a
    quarter of it was the best of {¼, ½, 1, 2}× on a simulation that used public records only
    (features trained on 600 public images, the head fitted on 200 others with ε scaled by
    n/200 so the relative noise matches, accuracy on the last 200 public images). The floor
    10⁻³·n keeps the solve stable when the noise is tiny (n is public under replace-one DP).
    """
    return max(0.5 * math.sqrt(dim) * float(noise_std), 1e-3 * float(n))


def symmetric_from_triangle(tri: np.ndarray, d: int) -> np.ndarray:
    """The symmetric d × d matrix whose upper triangle (row by row, ``np.triu_indices``) is ``tri``."""
    out = np.zeros((d, d))
    out[np.triu_indices(d)] = tri
    return out + np.triu(out, 1).T


def pseudo_records(quadratic, s1_bar, n: int) -> tuple:
    """``d`` records whose Taylor loss is ``(1/n) Σ_l [W_lᵀ S̄1_l + ⅛ W_lᵀ Q W_l]`` (up to a constant).

    With ``Q/n = V Λ Vᵀ`` the records are ``r_k = √λ_k v_k`` and their coefficients ``(0, t_k, ⅛)``
    with ``T = Λ^{-1/2} Vᵀ S̄1/n``.

    Returns:
        ``(x, y)``: float32 ``(d, d)`` inputs and ``(d, C, 3)`` coefficient targets.
    """
    vals, vecs = np.linalg.eigh(quadratic / n)
    vals = np.maximum(vals, np.finfo(np.float64).tiny)
    x = (vecs * np.sqrt(vals)).T
    t = (vecs.T @ (s1_bar / n)) / np.sqrt(vals)[:, None]
    coeffs = np.zeros((s1_bar.shape[0], s1_bar.shape[1], 3))
    coeffs[..., 1] = t
    coeffs[..., 2] = PHI2
    return x.astype(np.float32), coeffs.astype(np.float32)
