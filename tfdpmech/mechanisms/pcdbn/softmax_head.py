"""pCDBN's private output layer: the functional head on feature arrays (Phan, Wu, Dou 2017, §3.3).

Per record and class the order-2 Taylor polynomial of the sigmoid cross-entropy at z = 0 is
``log 2 + (½ − y)z + z²/8`` (Eq. 18, with Eq. 17's sign corrected; the same coefficients as
AdLM Eq. 25). With ``z_l = W_lᵀp`` the data enter through ``S1 = Pᵀ(½ − Y)`` and ``S2 = PᵀP``:
Algorithm 1 step 4 applies the functional mechanism to them. :class:`FunctionalSoftmaxHead`
is that step, done by :class:`~tfdpmech.mechanisms.functional_head.FunctionalHead` (released once, Laplace or
Gaussian, tight replace-one sensitivity, PSD projection, closed-form solve), for features
that are arrays already (the pooled ConvRBM outputs). When those features come from layers
trained on the same private data, their own releases are recorded in the same ledger and
compose sequentially (adaptively: the head's sensitivity holds for any feature map fixed before
its release).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from ...accounting.ledger import Release
from ..adlm.taylor_cross_entropy import LOG2, PHI2
from ...validation import check_array, check_choice, check_epsilon, check_one_hot, check_positive_int, check_real
from ..functional_head.feature_map import FeatureMap, feature_map
from ..functional_head.functional import FunctionalHead, functional_statistics, project_psd

__all__ = ["FunctionalSoftmaxHead", "HEAD_MODES", "head_sensitivity", "taylor_sigmoid_ce", "project_psd"]

HEAD_MODES = ("functional", "noiseless")


def head_sensitivity(num_features: int, num_classes: int, *, quadratic: str = "shared") -> float:
    """The papers' looser Δ of the head's coefficients, features in [0, 1] (bias counted in ``num_features``).

    ``"per_class"`` (AdLM Lemma 5 and the pCDBN authors' code): ``C·(|p| + ¼|p|²)``, a quadratic
    term for every class; ``"shared"``: ``C·|p| + ¼|p|²``. Used by pCDBN's reference mode; the private
    head uses the exact :func:`tfdpmech.mechanisms.functional_head.laplace_sensitivity` (smaller still).
    """
    check_choice(quadratic, "quadratic", ("shared", "per_class"))
    p, c = int(num_features), int(num_classes)
    return float(c * p + p * p / 4.0) if quadratic == "shared" else float(c * (p + p * p / 4.0))


def taylor_sigmoid_ce(z, y) -> np.ndarray:
    """Per-record ``Σ_j [log 2 + (½ − y_j) z_j + z_j²/8]`` (Eq. 18 closed form), float64."""
    z = np.asarray(z, dtype=np.float64)
    return np.sum(LOG2 + (0.5 - np.asarray(y)) * z + PHI2 * z * z, axis=-1)


class FunctionalSoftmaxHead:
    """A C-class one-vs-rest Taylor head on feature arrays, its statistics released once.

    Args:
        num_classes: C.
        mode: ``"functional"`` (a private release) or ``"noiseless"`` (the TCDBN head; no DP).
        epsilon: ε of the head (functional mode only).
        mechanism: ``"laplace"`` (pure ε; features in [0, 1]) or ``"gaussian"`` ((ε, δ); each feature
            vector with its bias clipped to unit L2 norm).
        delta: δ of the Gaussian calibration.
        ridge: ρ of ``(S̄2 + ρ·n·I)`` relative to the record count n, or None for the head's default rule
            (noiseless mode: 10⁻³).
        seed: seed of the once-only noise draw (None: OS entropy).
        component: name of the release in the ledger.
        ledger: the :class:`~tfdpmech.accounting.ledger.PrivacyLedger` the release is recorded in
            (pCDBN's; the functional head's own new one if None).

    Raises:
        ValueError / TypeError: unknown mode, ε missing/<= 0 in functional mode or given in noiseless
            mode, ridge < 0.

    Reference: Phan, Wu, Dou 2017, §3.3 (Eqs. 17–18) and Algorithm 1 step 4; Zhang et al., PVLDB 2012.
    """

    def __init__(self, num_classes: int, mode: str = "functional", *, epsilon: float | None = None,
                 mechanism: str = "laplace", delta: float | None = None, ridge: float | None = 1e-3, seed=None,
                 component: str = "output_layer", ledger=None):
        self.num_classes = check_positive_int(num_classes, "num_classes")
        if self.num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        self.mode = check_choice(mode, "mode", HEAD_MODES)
        if ridge is not None:
            ridge = check_real(ridge, "ridge")
        if ridge is not None and not ridge >= 0:
            raise ValueError(f"ridge must be >= 0 (relative to n) or None, got {ridge}")
        self.ridge = None if ridge is None else float(ridge)
        self.mechanism = mechanism
        self.component = component
        if self.mode == "functional":
            if epsilon is None:
                raise ValueError("mode='functional' needs epsilon > 0 for the output layer")
            self.epsilon = check_epsilon(epsilon)
            self._head_args = dict(mechanism=mechanism, epsilon=self.epsilon, delta=delta, seed=seed,
                                   component=component, ledger=ledger)
            FunctionalHead(None, self.num_classes, **self._head_args)  # argument checks, before any release
        else:
            if epsilon is not None:
                raise ValueError("mode='noiseless' is the non-private TCDBN head; pass epsilon=None")
            self.epsilon = None
        self.release: Release | None = None
        self.head: FunctionalHead | None = None
        self.kernel = self.bias = None
        self._s1 = self._s2_psd = None

    def fit(self, features, y=None) -> "FunctionalSoftmaxHead":
        """Compute the statistics once, release them (functional mode), project and solve.

        Args:
            features: frozen top-layer features, shape (n, |p|) (flattened); in [0, 1] for Laplace; or a
                finite ``tf.data.Dataset`` of ``(features, y)`` batches (functional mode; ``y=None``), streamed
                once as in :meth:`tfdpmech.mechanisms.functional_head.FunctionalHead.fit`.
            y: one-hot labels (n, C).

        Raises:
            StatisticsReleasedError / RuntimeError: called twice (the budget is taken).
            ValueError: features outside the calibrated domain, labels not one-hot, mismatched lengths.
        """
        if self.kernel is not None:
            if self.head is not None:
                self.head.fit(features, y)  # raises StatisticsReleasedError
            raise RuntimeError("fit() already ran: the head's statistics are computed once")
        if isinstance(features, tf.data.Dataset):  # one streamed pass; ρ·n with n counted in it
            if self.mode != "functional":
                raise ValueError("a tf.data.Dataset is accepted in mode='functional' (a private release); the "
                                 "noiseless TCDBN head takes feature arrays")
            self.head = FunctionalHead(None, self.num_classes, **self._head_args)
            self.head._ridge_per_record = self.ridge  # noqa: SLF001 - None keeps the head's default rule
            self.head.fit(features, y)
            self.release = self.head.release
            w = self.head.kernel
            self.kernel, self.bias = w[:-1].astype(np.float32), w[-1].astype(np.float32)
            return self
        p = check_array(features, "features", ndim_min=2).reshape(len(features), -1).astype(np.float64)
        y = check_one_hot(y, "y", num_classes=self.num_classes).astype(np.float64)
        if len(p) != len(y):
            raise ValueError(f"features has {len(p)} records but y has {len(y)}")
        n = len(p)
        if self.mode == "functional":
            ridge = None if self.ridge is None else self.ridge * n
            self.head = FunctionalHead(None, self.num_classes, ridge=ridge, **self._head_args)
            self.head.fit(p, y)
            self.release = self.head.release
            w = self.head.kernel
        else:
            if p.min() < 0.0 or p.max() > 1.0:
                raise ValueError(f"features must lie in [0, 1], got [{p.min():g}, {p.max():g}]")
            s1, s2 = functional_statistics(feature_map(p, clip_norm=False), y)
            self._s1, self._s2_psd = s1, project_psd(s2)
            ridge = (1e-3 if self.ridge is None else self.ridge) * n
            self._quadratic = self._s2_psd + ridge * np.eye(len(s2))
            w = -4.0 * np.linalg.solve(self._quadratic, s1)  # W_l = −4(S2 + ρnI)⁻¹ S1_l
            self.n = n
        del p, y
        self.kernel, self.bias = w[:-1].astype(np.float32), w[-1].astype(np.float32)
        return self

    def objective(self, kernel, bias) -> float:
        """The objective the closed form minimises (per record): ``(1/n)[⟨S̄1, W⟩ + ⅛ Σ_l W_lᵀ(S̄2 + ρI)W_l]``."""
        if self.kernel is None:
            raise RuntimeError("call fit() first")
        w = np.concatenate([np.asarray(kernel, np.float64), np.asarray(bias, np.float64)[None, :]], axis=0)
        if self.head is not None:
            return self.head.objective(w)
        return float((np.sum(self._s1 * w) + PHI2 * np.sum(w * (self._quadratic @ w))) / self.n)

    def dense_layer(self, name: str = "private_head"):
        """A frozen Keras layer mapping the features to logits; predict with argmax.

        ``Dense(C)`` with the solved kernel and bias (Laplace, noiseless); for the Gaussian
        calibration a ``Sequential`` of :class:`~tfdpmech.mechanisms.functional_head.FeatureMap` (bias, unit-norm clip)
        and ``Dense(C, use_bias=False)``, the map the statistics were computed with.
        """
        if self.kernel is None:
            raise RuntimeError("call fit() first")
        d = self.kernel.shape[0]
        if self.head is not None and self.mechanism == "gaussian":
            dense = keras.layers.Dense(self.num_classes, use_bias=False, name=f"{name}_dense")
            layer = keras.Sequential([keras.Input((d,)), FeatureMap(clip_norm=True), dense], name=name)
            dense.set_weights([np.concatenate([self.kernel, self.bias[None, :]], axis=0)])
        else:
            layer = keras.layers.Dense(self.num_classes, name=name)
            layer.build((None, d))
            layer.set_weights([self.kernel, self.bias])
        layer.trainable = False
        return layer

    def export_statistics(self, noisy: bool = True) -> dict:
        """The released ``m1_bar`` (S̄1) and PSD-projected ``m2_bar`` (S̄2⁺), safe to share in functional mode.

        Raises:
            ValueError: ``noisy=False``, or noiseless mode (its statistics are the raw data's).
        """
        if not noisy or self.mode != "functional":
            raise ValueError("noise-free statistics are never exported; only the released statistics of "
                             "mode='functional' can be exported, with noisy=True")
        if self.head is None:
            raise RuntimeError("call fit() first")
        return {"m1_bar": self.head.statistics()["s1_bar"], "m2_bar": self.head._s2_psd.copy()}
