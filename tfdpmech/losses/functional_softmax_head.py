"""pCDBN's private output layer: Taylor-expanded cross-entropy perturbed once by FM (spec §4.4, §8.5).

Per record and class the order-2 Taylor polynomial of the sigmoid cross-entropy at z = 0 is
``log 2 + (½ − y)z + z²/8`` (Eq. 18, with Eq. 17's sign corrected; the same coefficients as
:func:`tfdpmech.losses.taylor_coefficients`). With z_j = W_jᵀp the data enter through
``m1 = Pᵀ(½ − Y)`` and ``M2 = PᵀP``; FM perturbs both once with ``Lap(Δ/ε)``,
``Δ = C·|p| + ¼|p|²`` (one quadratic statistic shared by the C classes; spec §4.7 [rec]),
projects ``M̄2`` to positive semi-definite (post-processing), and solves
``W_j = −4(M̄2 + ρI)⁻¹ m̄1_j`` in closed form.
"""

from __future__ import annotations

import keras
import numpy as np

from ..accounting.ledger import Release
from ..noise import laplace, make_rng, noise_fingerprint
from ..validation import check_array, check_choice, check_epsilon, check_one_hot, check_positive_int, check_real
from .taylor_cross_entropy import LOG2, PHI2

__all__ = ["FunctionalSoftmaxHead", "HEAD_MODES", "head_sensitivity", "taylor_sigmoid_ce", "project_psd"]

HEAD_MODES = ("functional", "noiseless")


def head_sensitivity(num_features: int, num_classes: int, *, quadratic: str = "shared") -> float:
    """Δ of the head's coefficients for features in [0, 1] (bias column included in ``num_features``).

    ``"shared"``: ``C·|p| + ¼|p|²``; ``"per_class"`` (authors' code): ``C·(|p| + ¼|p|²)``.
    """
    check_choice(quadratic, "quadratic", ("shared", "per_class"))
    p, c = int(num_features), int(num_classes)
    return float(c * p + p * p / 4.0) if quadratic == "shared" else float(c * (p + p * p / 4.0))


def taylor_sigmoid_ce(z, y) -> np.ndarray:
    """Per-record ``Σ_j [log 2 + (½ − y_j) z_j + z_j²/8]`` (Eq. 18 closed form), float64."""
    z = np.asarray(z, dtype=np.float64)
    return np.sum(LOG2 + (0.5 - np.asarray(y)) * z + PHI2 * z * z, axis=-1)


def project_psd(m, floor: float = 0.0) -> np.ndarray:
    """Symmetrise and clip eigenvalues below ``floor`` (post-processing; spec §8.5)."""
    m = 0.5 * (np.asarray(m, dtype=np.float64) + np.asarray(m, dtype=np.float64).T)
    vals, vecs = np.linalg.eigh(m)
    return (vecs * np.maximum(vals, floor)) @ vecs.T


class FunctionalSoftmaxHead:
    """A C-class one-vs-rest Taylor head whose statistics are perturbed once (functional mechanism).

    Args:
        num_classes: C.
        mode: ``"functional"`` (Laplace noise, ε-DP) or ``"noiseless"`` (TCDBN head; no DP).
        epsilon: ε of the head (functional mode only).
        ridge: ρ of ``(M̄2 + ρ·n·I)``, relative to the public record count n.
        use_bias: append a constant-1 feature (|p| → |p| + 1).
        seed: seed of the once-only Laplace draw (None: OS entropy).
        component: name of the release in the ledger.

    Raises:
        ValueError / TypeError: unknown mode, ε missing/<= 0 in functional mode or given in
            noiseless mode, ridge < 0.

    Reference: Phan, Wu, Dou 2017, §3.3 (Eqs. 17–18); dPA (Phan et al. AAAI'16) for Δ.
    """

    def __init__(self, num_classes: int, mode: str = "functional", *, epsilon: float | None = None,
                 ridge: float = 1e-3, use_bias: bool = True, seed=None, component: str = "output_layer"):
        self.num_classes = check_positive_int(num_classes, "num_classes")
        if self.num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        self.mode = check_choice(mode, "mode", HEAD_MODES)
        if self.mode == "functional":
            if epsilon is None:
                raise ValueError("mode='functional' needs epsilon > 0 for the output layer")
            self.epsilon = check_epsilon(epsilon)
        else:
            if epsilon is not None:
                raise ValueError("mode='noiseless' is the non-private TCDBN head; pass epsilon=None")
            self.epsilon = None
        ridge = check_real(ridge, "ridge")
        if not ridge >= 0:
            raise ValueError(f"ridge must be >= 0, got {ridge}")
        self.ridge = float(ridge)
        self.use_bias = bool(use_bias)
        self._rng = make_rng(seed)
        self.component = component
        self.release: Release | None = None
        self.kernel = self.bias = None
        self._m1_bar = self._m2_bar = None

    def fit(self, features, y) -> "FunctionalSoftmaxHead":
        """Compute the statistics once, perturb them, project, and solve for the weights.

        Args:
            features: frozen top-layer features P in [0, 1], shape (n, |p|).
            y: one-hot labels (n, C).

        Raises:
            RuntimeError: called twice (the budget is taken).
            ValueError: features outside [0, 1], labels not one-hot, or mismatched lengths.
        """
        if self._m1_bar is not None:
            raise RuntimeError("fit() already ran: the head's statistics are released once")
        p = check_array(features, "features", ndim_min=2).reshape(len(features), -1).astype(np.float64)
        if p.min() < -1e-6 or p.max() > 1 + 1e-6:
            raise ValueError(f"features must lie in [0, 1] (Δ assumes it), got [{p.min():g}, {p.max():g}]; "
                             "use sigmoid/pooled ConvRBM outputs or clip with a public bound")
        y = check_one_hot(y, "y", num_classes=self.num_classes).astype(np.float64)
        if len(p) != len(y):
            raise ValueError(f"features has {len(p)} records but y has {len(y)}")
        if self.use_bias:
            p = np.concatenate([p, np.ones((len(p), 1))], axis=1)
        n, k = p.shape
        self.n, self.num_features = n, k
        m1 = p.T @ (0.5 - y)  # λ_m = Σ_i (½ − y_i) p_im
        m2 = p.T @ p  # ⅛ Σ_i p_i p_iᵀ up to the constant ⅛
        if self.mode == "functional":
            self.sensitivity = head_sensitivity(k, self.num_classes)
            scale = self.sensitivity / self.epsilon
            m1 = m1 + laplace(scale, m1.shape, self._rng)  # drawn once
            # the quadratic coefficients are ⅛·M2 (Δ counts them at weight ⅛ per ordered pair)
            m2 = m2 + 8.0 * laplace(scale, m2.shape, self._rng)
            self.release = Release(
                component=self.component, mechanism="laplace", epsilon_claimed=self.epsilon,
                epsilon_provable=self.epsilon,
                basis=("functional mechanism on the order-2 Taylor cross-entropy coefficients (one-vs-rest, one "
                       "shared quadratic statistic): Δ = C·|p| + |p|²/4 for features in [0, 1]; perturbed once, "
                       "PSD projection and closed-form solve are post-processing (spec §4.4, §4.7)"),
                sensitivity=self.sensitivity, noise_scale=scale,
                details={"n": n, "features": k, "classes": self.num_classes,
                         "fingerprint": noise_fingerprint(np.concatenate([m1.ravel(), m2.ravel()]))},
            )
        self._m1_bar = m1
        self._m2_bar = project_psd(m2)  # post-processing: bounded-below quadratic
        del p, y
        w = -4.0 * np.linalg.solve(self._m2_bar + self.ridge * n * np.eye(k), self._m1_bar)  # W_j = −4(M̄2+ρI)⁻¹m̄1_j
        if self.use_bias:
            self.kernel, self.bias = w[:-1].astype(np.float32), w[-1].astype(np.float32)
        else:
            self.kernel, self.bias = w.astype(np.float32), np.zeros(self.num_classes, np.float32)
        return self

    def objective(self, kernel, bias=None) -> float:
        """The objective the closed form minimises: ``(1/n)[⟨m̄1, W⟩ + ⅛ Σ_j W_jᵀ (M̄2 + ρnI) W_j]``."""
        if self._m1_bar is None:
            raise RuntimeError("call fit() first")
        w = np.asarray(kernel, dtype=np.float64)
        if self.use_bias:
            w = np.concatenate([w, np.asarray(bias, dtype=np.float64)[None, :]], axis=0)
        quad = self._m2_bar + self.ridge * self.n * np.eye(len(w))
        return float((np.sum(self._m1_bar * w) + PHI2 * np.sum(w * (quad @ w))) / self.n)

    def dense_layer(self, name: str = "private_head") -> keras.layers.Dense:
        """A ``Dense(C)`` (logits) carrying the solved weights; predict with argmax."""
        if self.kernel is None:
            raise RuntimeError("call fit() first")
        layer = keras.layers.Dense(self.num_classes, name=name)
        layer.build((None, self.kernel.shape[0]))
        layer.set_weights([self.kernel, self.bias])
        layer.trainable = False
        return layer

    def export_statistics(self, noisy: bool = True) -> dict:
        """The released ``m̄1`` and PSD-projected ``M̄2`` (safe to save in functional mode).

        Raises:
            ValueError: ``noisy=False``, or noiseless mode (its statistics are the raw data's).
        """
        if not noisy or self.mode != "functional":
            raise ValueError("noise-free statistics are never exported (spec §8.8 item 11); only the perturbed "
                             "statistics of mode='functional' can be exported, with noisy=True")
        if self._m1_bar is None:
            raise RuntimeError("call fit() first")
        return {"m1_bar": self._m1_bar.copy(), "m2_bar": self._m2_bar.copy()}
