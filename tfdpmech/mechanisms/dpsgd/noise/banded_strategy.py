"""The banded Toeplitz strategy of BandMF: its coefficients, optimised for a run's steps and bands.

Banded matrix factorization (Choquette-Choo et al., "Amplified banded matrix factorization: a unified approach to
private training", NeurIPS 2023, arXiv:2306.08153: the matrix mechanism and its banded strategies) writes the noisy prefix sums that SGD's iterates are as ``A (x + C⁻¹ z)``:
``x`` the steps' clipped gradient sums, ``A`` the n × n lower-triangular matrix of ones (the prefix-sum workload),
``z ~ N(0, σ² sens(C)² C_clip² I)`` and ``C`` the *strategy*: here lower-triangular **Toeplitz** with **b bands**,
``C[t, t − j] = c_j`` for ``0 <= j < b`` (0 elsewhere), ``c_0 = 1`` (McKenna 2024, "Scaling up the banded matrix
factorization mechanism for differentially private ML": Toeplitz strategies, a few coefficients for any n).

What :func:`optimise_coefficients` minimises (the expected total squared error of the n prefix sums, per unit of
``σ² C_clip²``: the matrix mechanism's expected error ``σ² ||A C⁻¹||_F²`` with the noise scaled to C's sensitivity
under b-min-separated participation, Choquette-Choo et al. 2023)::

    loss(c) = ||A C⁻¹||_F² · sens(C)²,    sens(C)² = max_t ||C[:, t]||² = Σ_{j < min(b, n)} c_j²

With ``b = 1`` (``C = I``) it is DP-SGD's ``||A||_F² = n (n + 1) / 2``. Nothing of size n × n is formed: ``C⁻¹`` is
lower-triangular Toeplitz with first column ``r`` (``C r = e_0``: ``r_0 = 1``, ``r_k = −Σ_{j=1}^{b−1} c_j r_{k−j}``,
an all-pole filter); ``A C⁻¹`` is Toeplitz with first column ``s = cumsum(r)``, so
``||A C⁻¹||_F² = Σ_k (n − k) s_k²``, O(n·b). Its gradient by the adjoint: with ``h_i = Σ_{k >= i} 2 (n − k) s_k``
(the loss's gradient in ``r``) and ``λ = C⁻ᵀ h`` (one backward filter pass),
``∂||A C⁻¹||_F² / ∂c_j = −Σ_k λ_k r_{k−j}``.

The optimiser: scipy's L-BFGS-B on ``loss(c) / (n (n + 1) / 2)`` (the ratio to DP-SGD) over ``c_1 … c_{b−1}``,
started from the first b coefficients of ``(1 − x)^{−1/2}`` (the square-root factorization of ``A``, Fichtenberger
et al. 2023, "Constant matters: fine-grained error bound on differentially private continual observation", truncated
to b bands). Coefficients are cached per ``(n, b)``.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import optimize, signal

__all__ = ["BandedStrategy", "banded_strategy", "inverse_column", "prefix_sum_error", "loss_and_gradient",
           "sensitivity", "dense_strategy", "sqrt_coefficients", "dpsgd_loss"]


def sqrt_coefficients(bands: int) -> np.ndarray:
    """The first ``bands`` coefficients of ``(1 − x)^{−1/2}``: ``binom(2k, k) / 4^k`` (1, 1/2, 3/8, ...)."""
    out = np.ones(bands)
    for k in range(1, bands):
        out[k] = out[k - 1] * (2 * k - 1) / (2 * k)
    return out


def _padded(coefficients, n: int) -> np.ndarray:
    c = np.asarray(coefficients, dtype=np.float64)[:n]
    return np.concatenate([c, np.zeros(max(0, n - len(c)))])


def inverse_column(coefficients, n: int) -> np.ndarray:
    """The first column ``r`` of ``C⁻¹`` (n entries): ``C r = e_0`` by forward substitution (an all-pole filter)."""
    c = np.asarray(coefficients, dtype=np.float64)
    impulse = np.zeros(n)
    impulse[0] = 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        return signal.lfilter([1.0], c / c[0], impulse) / c[0]


def sensitivity(coefficients, n: int) -> float:
    """``sens(C)``: the largest column norm of the n × n strategy, its first column's ``sqrt(Σ_{j<min(b,n)} c_j²)``
    (b-min-separated participation: a record's columns never overlap, so one participation moves ``C x`` by at most
    this times the clipping norm; Choquette-Choo et al. 2023)."""
    c = np.asarray(coefficients, dtype=np.float64)[:n]
    return float(np.sqrt(np.sum(c * c)))


def dpsgd_loss(n: int) -> float:
    """DP-SGD's loss for n steps: ``||A||_F² = n (n + 1) / 2``."""
    return n * (n + 1) / 2.0


def prefix_sum_error(coefficients, n: int) -> float:
    """``||A C⁻¹||_F²`` for the n × n strategy of ``coefficients`` (O(n·b), see the module docstring)."""
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.cumsum(inverse_column(coefficients, n))
        return float(np.sum((n - np.arange(n)) * s * s))


def loss_and_gradient(free, n: int) -> tuple[float, np.ndarray]:
    """``loss(c) / (n (n + 1) / 2)`` and its gradient in ``free = c_1 … c_{b−1}`` (``c_0 = 1``)."""
    c = np.concatenate([[1.0], np.asarray(free, dtype=np.float64)])
    r = inverse_column(c, n)
    weights = n - np.arange(n)
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.cumsum(r)
        error = float(np.sum(weights * s * s))
        if not np.isfinite(error):  # an unstable strategy: its inverse grows without bound
            return float("inf"), np.zeros_like(free, dtype=np.float64)
        h = np.cumsum((2.0 * weights * s)[::-1])[::-1]
        lam = signal.lfilter([1.0], c, h[::-1])[::-1]  # C^T λ = h: the same filter, backward in time
    grad_error = np.array([-np.dot(lam[j:], r[:n - j]) for j in range(1, len(c))])
    sens2 = float(np.sum(c[:n] ** 2))
    scale = dpsgd_loss(n)
    grad_sens2 = 2.0 * c[1:] * (np.arange(1, len(c)) < n)
    return error * sens2 / scale, (grad_error * sens2 + error * grad_sens2) / scale


def dense_strategy(coefficients, n: int) -> np.ndarray:
    """The n × n strategy matrix itself (for tests and small checks only)."""
    c = _padded(coefficients, n)
    rows, cols = np.indices((n, n))
    return np.where(rows >= cols, c[np.clip(rows - cols, 0, n - 1)], 0.0)


class BandedStrategy:
    """A b-banded lower-triangular Toeplitz strategy for n steps (see the module docstring).

    Attributes:
        steps (n), bands (b), coefficients (``c_0 = 1, c_1 … c_{b−1}``), sensitivity (``sens(C)``),
        loss (``||A C⁻¹||_F² sens(C)²``), dpsgd_loss (``n (n + 1) / 2``), ratio (loss / dpsgd_loss: below 1 is
        less expected squared error in the prefix sums than DP-SGD's at the same σ).
    """

    def __init__(self, steps: int, bands: int, coefficients):
        self.steps, self.bands = int(steps), int(bands)
        self.coefficients = np.asarray(coefficients, dtype=np.float64)
        self.coefficients.setflags(write=False)
        self.sensitivity = sensitivity(self.coefficients, self.steps)
        self.loss = prefix_sum_error(self.coefficients, self.steps) * self.sensitivity ** 2
        self.dpsgd_loss = dpsgd_loss(self.steps)
        self.ratio = self.loss / self.dpsgd_loss

    def __repr__(self) -> str:
        return (f"BandedStrategy(steps={self.steps}, bands={self.bands}, sensitivity={self.sensitivity:.6g}, "
                f"loss / DP-SGD's = {self.ratio:.4f})")


@functools.lru_cache(maxsize=64)
def _optimised(steps: int, bands: int) -> tuple:
    if bands == 1:
        return (1.0,)
    start = sqrt_coefficients(bands)[1:]
    result = optimize.minimize(loss_and_gradient, start, args=(steps,), jac=True, method="L-BFGS-B",
                               options={"maxiter": 2000, "ftol": 1e-13, "gtol": 1e-10})
    best = result.x if np.isfinite(result.fun) and result.fun <= loss_and_gradient(start, steps)[0] else start
    return (1.0, *map(float, best))


def banded_strategy(steps: int, bands: int) -> BandedStrategy:
    """The optimised ``bands``-banded Toeplitz strategy for ``steps`` steps (cached per ``(steps, bands)``).

    ``bands = 1`` is the identity (DP-SGD). The coefficients minimise ``||A C⁻¹||_F² sens(C)²`` by L-BFGS-B from
    the truncated square-root factorization (never worse than it: the start is kept if the optimiser ends above it).

    Raises:
        ValueError: ``bands`` above ``steps`` (a band longer than the run is no band), or either below 1.
    """
    steps, bands = int(steps), int(bands)
    if steps < 1 or bands < 1 or bands > steps:
        raise ValueError(f"a banded strategy needs 1 <= bands <= steps, got bands={bands}, steps={steps}")
    return BandedStrategy(steps, bands, _optimised(steps, bands))
