"""The functional-mechanism head: statistics aggregated over the private set, perturbed once.

For features ``p_i`` that never saw the private data (bias feature appended) the order-2
Taylor polynomial at 0 of the per-class sigmoid cross-entropy (AdLM Eq. 25; Zhang et al.,
"Functional Mechanism", PVLDB 2012, §5 for logistic regression) summed over the private set is

    L(W) = Σ_l [ W_lᵀ S1_l + ⅛ W_lᵀ S2 W_l ] + n·C·log 2,
    S1 = Σ_i p_i (½·1 − y_i)ᵀ,   S2 = Σ_i p_i p_iᵀ,

so the private data enter only through (S1, S2). The head releases them **once** with noise
calibrated to their replace-one sensitivity (:mod:`tfdpmech.mechanisms.functional_head.sensitivity`), projects the
noisy S̄2 onto the positive semi-definite cone, adds a ridge ρI chosen from public quantities
only (the noise scale and the dimension) and minimises the released objective in closed form,
``W = −4(S̄2 + ρI)⁻¹ S̄1``. Everything after the release is post-processing, so the ε (and δ)
of the release is the head's whole privacy cost, and it is **proven**:

* ``mechanism="laplace"`` (pure ε-DP, the functional mechanism's own calibration): every feature
  in [0, 1] (refused otherwise, never clipped); Laplace noise ``Δ₁/ε`` on each released number
  (Dwork et al. 2006).
* ``mechanism="gaussian"`` ((ε, δ)-DP): each ``p_i`` **including the bias** is clipped to L2 norm
  ≤ 1 (by design: the bias makes every norm ≥ 1, so the clip is a normalisation, which leaves the
  predicted class unchanged; the same map is applied at prediction time); Gaussian noise with σ
  from ``dp_accounting`` for the joint L2 sensitivity Δ₂.

Per-record noise (on each input, or on each record's coefficients) would be local DP and has to
cover a whole record's range; aggregated once, the noise is fixed while the statistics grow
with n. This is the loss-coefficient release of AdLM's Algorithm 1 (lines 16–19, budget ε3,
Lemma 5) done soundly: the noise goes on the coefficients summed over the whole private set, once
(line 19 perturbs each record's coefficients), and the features (AdLM's last hidden layer) come
from a model that never saw the private data.

The same released objective is an ordinary Keras loss: :meth:`FunctionalHead.pseudo_records`
returns ``d`` synthetic records whose :class:`~tfdpmech.losses.TaylorCrossEntropy` equals it up
to a constant, so ``model.compile(loss=TaylorCrossEntropy(any_batch_size=True))`` / ``model.fit`` on them reaches
the closed form.
"""

from __future__ import annotations

import math
import time

import keras
import numpy as np
import tensorflow as tf

from ...accounting.ledger import PrivacyLedger, Release, ledger_or_new
from ...contract import ClosedFormMechanism, release
from ..adlm.taylor_cross_entropy import PHI2
from ...noise import make_rng
from ...released_data import array_fingerprint
from ...validation import (
    check_array, check_choice, check_delta, check_epsilon, check_labels, check_positive_int, check_positive_real,
)
from ...features.extractor import check_extractor_or_none
from . import streaming
from .feature_map import feature_map
from .functional_calibration import functional_calibration
from .functional_model import functional_head_model, trainable_head
from .functional_statistics import (
    default_ridge, functional_statistics, project_psd, pseudo_records, symmetric_from_triangle,
)

__all__ = ["FunctionalHead", "MECHANISMS", "DEFAULT_QUADRATIC_WEIGHT", "functional_statistics", "project_psd", "default_ridge",
           "StatisticsReleasedError"]

MECHANISMS = ("laplace", "gaussian")

# λ on the released S2, chosen from {0.03, 0.1, 0.3, 0.5, 1} (Laplace) and {0.03, …, 1, 1.5, 3} (Gaussian)
# on the public-only simulation described in default_ridge; never on private or test records.
DEFAULT_QUADRATIC_WEIGHT = {"laplace": 0.3, "gaussian": 1.0}


class StatisticsReleasedError(ValueError, RuntimeError):
    """The head's statistics were already released once; a second release would need a new budget."""


class FunctionalHead(ClosedFormMechanism):
    """A linear C-class head trained on (S1, S2) released once with Laplace or Gaussian noise.

    Example:
        >>> feats = tfdpmech.features.public_features(public_model, "hidden_clip", trained_on=x_public)
        >>> head = FunctionalHead(feats, 10, mechanism="gaussian", epsilon=0.5, delta=1e-5, seed=0)
        >>> model = head.fit(x_private, y_private)      # an ordinary Keras model (logits)
        >>> print(head.ledger.summary())

    Args:
        features: a :class:`~tfdpmech.features.FeatureExtractor` (never saw the private data), or
            None when ``fit`` receives feature arrays already (the caller accounts for how they were
            made, e.g. pCDBN's ConvRBM stack).
        num_classes: C >= 2.
        mechanism: ``"gaussian"`` ((ε, δ); features clipped to unit L2 norm with the bias) or
            ``"laplace"`` (pure ε; features must lie in [0, 1]).
        epsilon: ε of the one release.
        delta: δ of the Gaussian calibration (must be None for Laplace).
        ridge: ρ >= 0, or None for ``ridge_factor ×`` :func:`default_ridge` (from the noise scale of the
            released S2 and the dimension: public quantities only).
        ridge_factor: multiplies the default ridge (ignored when ``ridge`` is given).
        quadratic_weight: λ > 0; the release is ``(S1, λ·S2)`` and S̄2 is divided by λ afterwards
            (λ < 1 moves noise from S1 to S2; the sensitivity accounts for it). None: 0.3 for Laplace,
            1 for Gaussian (:data:`DEFAULT_QUADRATIC_WEIGHT`).
        nonnegative: Gaussian only: use the smaller Δ₂ for non-negative features. None: take it from
            the extractor's bounds (known by construction); True is checked on the data (refused,
            never clipped, when violated).
        seed: seed of the once-only noise draw (None: OS entropy).
        batch_size: records per forward pass of the extractor (no effect on privacy); None: the
            extractor's memory-bounded :attr:`~tfdpmech.features.FeatureExtractor.auto_batch_size`.
        component: name of the release in the ledger.
        ledger: a :class:`~tfdpmech.accounting.ledger.PrivacyLedger` to record into (new if None).

    Raises:
        TypeError / ValueError: bad arguments, with the fix; raised before any release.

    Reference: Zhang et al., PVLDB 2012 (functional mechanism), §4–5; Phan et al., AdLM
    (ICDM 2017) Algorithm 1 lines 16–19 and Eq. 25 (Taylor coefficients ``½ − y`` and ``⅛``).
    """

    settings = ("mode", "epsilon", "delta", "mechanism", "num_classes")
    paper = "Zhang et al. 2012, functional mechanism (PVLDB), on features that never saw the private data"
    described = {"noise_scale": "release.noise_scale", "sensitivity": "release.sensitivity", "ridge": "ridge"}

    def __init__(self, features, num_classes: int, *, mechanism: str = "gaussian", epsilon, delta=None,
                 ridge=None, ridge_factor: float = 1.0, quadratic_weight=None, nonnegative=None,
                 seed=None, batch_size: int | None = None, component: str = "functional_head",
                 ledger: PrivacyLedger | None = None):
        self.features = check_extractor_or_none(features)
        self.num_classes = check_positive_int(num_classes, "num_classes", minimum=2)
        self.mechanism = check_choice(mechanism, "mechanism", MECHANISMS)
        self.epsilon = check_epsilon(epsilon)
        if self.mechanism == "laplace":
            if delta is not None:
                raise ValueError(f"delta={delta!r} applies to mechanism='gaussian' only; the Laplace calibration is "
                                 "pure ε-DP: pass delta=None")
            self.delta = 0.0
            if features is not None and not features.unit_bounded:
                raise ValueError(
                    f"mechanism='laplace' needs features in [0, 1] by construction, but {features.name!r} has bounds "
                    f"{list(features.bounds)}; cut the public model at a sigmoid or tfdpmech.layers.UnitClip layer, "
                    "or use mechanism='gaussian' (which clips each feature vector to unit norm)"
                )
            if nonnegative is not None:
                raise ValueError("nonnegative applies to mechanism='gaussian' only; pass nonnegative=None")
        else:
            if delta is None:
                raise ValueError("mechanism='gaussian' needs delta in (0, 1), e.g. delta=1e-5 (below 1/n)")
            self.delta = check_delta(delta)
            if nonnegative is None:
                nonnegative = bool(features is not None and features.nonnegative)
            elif not isinstance(nonnegative, bool):
                raise TypeError(f"nonnegative must be True, False or None, got {nonnegative!r}")
        self.nonnegative = bool(nonnegative)
        if ridge is not None:
            if isinstance(ridge, bool) or not isinstance(ridge, (int, float, np.floating, np.integer)):
                raise TypeError(f"ridge must be a real number >= 0 or None, got {ridge!r}")
            if not (math.isfinite(float(ridge)) and float(ridge) >= 0):
                raise ValueError(f"ridge must be finite and >= 0, got {ridge}; or pass None for the default rule")
        self._ridge_arg = None if ridge is None else float(ridge)
        self._ridge_per_record = None
        self.ridge_factor = check_positive_real(ridge_factor, "ridge_factor")
        if quadratic_weight is None:
            quadratic_weight = DEFAULT_QUADRATIC_WEIGHT[self.mechanism]
        self.quadratic_weight = check_positive_real(quadratic_weight, "quadratic_weight")
        self._rng = make_rng(seed)
        self.batch_size = None if batch_size is None else check_positive_int(batch_size, "batch_size")
        self.component = str(component)
        self.ledger = ledger_or_new(ledger)
        if features is not None:
            release(self.ledger, features.release)
        self.release: Release | None = None
        self.received_release = False  # a non-chief worker holding the chief's release (no release of its own)
        self.kernel = None
        self.model = None
        self._s1_bar = self._s2_bar = self._s2_psd = None

    # -- the one release ------------------------------------------------------------------
    @property
    def released(self) -> bool:
        """The statistics were released (here, or on the chief and received: :attr:`received_release`)."""
        return self.release is not None or self.received_release

    def _features_of(self, x) -> np.ndarray:
        if self.features is None:
            return check_array(x, "x", ndim_min=2).reshape(len(x), -1).astype(np.float64)
        self.features.check_disjoint(x, "x")
        return self.features(x, batch_size=self.batch_size, name="x")  # frozen weights, per-record features checked

    def fit(self, x, y=None, *, strategy=None, max_records: int | None = None) -> keras.Model:
        """Compute (S1, S2) over the private set, release them once with noise, and solve for W.

        ``x`` may be a ``tf.data.Dataset`` of ``(x, y)`` batches of any length (``y=None`` then): the
        statistics are accumulated in float64 in one pass, memory independent of n, every record
        checked as it streams (a record that breaks a check stops the pass with its index; nothing is
        released). n is counted in the pass and the release comes after it: a dataset that cannot end is
        refused before anything is read, any other stops past ``max_records``. Under ``tf.distribute`` (``strategy``, or an
        open ``strategy.scope()``) each replica sums its shard, the sums are all-reduced (SUM), and the
        release happens once, on the chief, with one noise draw; the other workers receive the released
        statistics and record no release (:mod:`tfdpmech.mechanisms.functional_head.streaming`).

        Args:
            x: private records (inputs of the extractor, or feature arrays when ``features`` is None), or a
                finite ``tf.data.Dataset`` of ``(x, y)`` batches.
            y: labels, one-hot ``(n, C)`` or integer ``(n,)``; None for a dataset.
            strategy: None (one process; the ambient ``tf.distribute`` strategy if a scope is open), or a
                ``tf.distribute.MirroredStrategy`` / ``MultiWorkerMirroredStrategy``.
            max_records: the cap of a dataset pass (None: ``streaming.DEFAULT_MAX_RECORDS``, 10⁸).

        Returns:
            the trained Keras model (logits; also :attr:`model`), with ``privacy_ledger``; the head
            keeps :attr:`kernel`, :attr:`release` and :attr:`ledger`.

        Raises:
            StatisticsReleasedError (a ValueError): called a second time; the statistics are released
                once per budget.
            ValueError / TypeError: labels that are not one-hot/in range, lengths that differ, NaN/inf,
                features outside [0, 1] (Laplace) or negative when ``nonnegative`` (Gaussian), an
                extractor whose weights changed, or private records shared with its public data; a dataset of
                infinite cardinality, labels passed next to a dataset, an unsupported strategy (TPU, parameter
                server, central storage).
        """
        if self.released:
            raise StatisticsReleasedError(
                f"{self.component}: the statistics were already released once (ε={self.epsilon:g}); releasing them "
                "again would spend a second budget. Build a new FunctionalHead (and account for both) instead"
            )
        strategy = streaming.check_strategy(strategy)
        if isinstance(x, tf.data.Dataset) or strategy is not None:
            cap = streaming.DEFAULT_MAX_RECORDS if max_records is None else check_positive_int(max_records, "max_records")
            streaming.fit_stream(self, x, y, strategy, cap)
            return self._trained_model()
        y = check_labels(y, "y", num_classes=self.num_classes).astype(np.float64)
        x_arr = check_array(x, "x", ndim_min=2)
        if len(x_arr) != len(y):
            raise ValueError(f"x has {len(x_arr)} records but y has {len(y)}; pass one label per record")
        started = time.perf_counter()
        f = self._features_of(x_arr)
        features_done = time.perf_counter()
        n, d_real = f.shape
        if self.mechanism == "laplace" and (f.min() < 0.0 or f.max() > 1.0):
            raise ValueError(
                f"mechanism='laplace' needs every feature in [0, 1] (the sensitivity assumes it), got values in "
                f"[{f.min():g}, {f.max():g}]; they are never clipped silently. Use bounded features (sigmoid, "
                "UnitClip, or scale with public bounds) or mechanism='gaussian'"
            )
        if self.mechanism == "gaussian" and self.nonnegative and f.min() < 0.0:
            raise ValueError(
                f"nonnegative=True but the features reach {f.min():g}; pass nonnegative=False (a larger Δ₂) or use "
                "non-negative features"
            )
        p = feature_map(f, clip_norm=self.mechanism == "gaussian")
        del f, x_arr
        s1, s2 = functional_statistics(p, y)
        del p, y
        self._release_and_solve(s1, s2, n, d_real, started, features_done)
        return self._trained_model()

    def _ridge_for(self, noise_std: float, d: int, n: int) -> float:
        """ρ from public quantities: the given ridge, ``ridge_per_record·n``, or the default rule."""
        if self._ridge_per_record is not None:  # pCDBN's head: ρ relative to n, known after a streamed pass
            return self._ridge_per_record * n
        if self._ridge_arg is not None:
            return self._ridge_arg
        return self.ridge_factor * default_ridge(noise_std / self.quadratic_weight, d, n)

    def _calibration(self, d_real: int):
        """``(sensitivity, noise scale, noise std, basis)`` of the release for ``d_real`` features (public)."""
        return functional_calibration(self.mechanism, self.epsilon, self.delta, d_real, self.num_classes,
                                      quadratic_weight=self.quadratic_weight, nonnegative=self.nonnegative)

    def _release_and_solve(self, s1, s2, n: int, d_real: int, started: float, features_done: float, *,
                           finish: bool = True):
        """The one release of the exact (S1, S2) of n records (noise drawn once, here only), then the solve."""
        d = d_real + 1
        tri = np.triu_indices(d)
        sens, scale, noise_std, basis = self._calibration(d_real)
        lam = self.quadratic_weight
        ridge = self._ridge_for(noise_std, d, n)
        record = Release(
            component=self.component, mechanism=self.mechanism, epsilon_claimed=self.epsilon,
            epsilon_provable=self.epsilon, delta=self.delta, sensitivity=sens, noise_scale=scale, basis=basis,
            neighbours="replace_one", protects="record",  # (S1, S2) sensitivities are for replacing one record
            details={
                "n": n, "features": d_real, "classes": self.num_classes, "released_numbers": int(s1.size + len(tri[0])),
                "ridge": ridge, "quadratic_weight": lam,
                "ridge_rule": (f"{self.ridge_factor:g}·max(½·√d·(S2 noise std), 1e-3·n)" if self._ridge_arg is None else "given"),
                "statistics_fingerprint": None,  # of the released statistics, set by the release
                "features_fingerprint": None if self.features is None else self.features.fingerprint,
            },
        )

        # the released λ·S2 (its upper triangle noised, mirrored), rescaled: post-processing
        s2_bar_of = lambda noise: (lam * s2 + symmetric_from_triangle(noise["s2"], d)) / lam  # noqa: E731
        # the one release: S1 and the upper triangle of λ·S2, noise drawn once, here only
        released = release(self.ledger, record, value={"s1": s1, "s2": (lam * s2)[tri]}, rng=self._rng,
                           details_of=lambda noisy, noise: {"statistics_fingerprint": array_fingerprint(
                               np.concatenate([noisy["s1"].ravel(), s2_bar_of(noise)[tri]]))})
        s1_bar, s2_bar, self.release = released.value["s1"], s2_bar_of(released.noise), released.record
        del s1, s2, released
        self._s1_bar, self._s2_bar, self.n, self.num_features, self.ridge = s1_bar, s2_bar, n, d, ridge
        return self._solve_and_build(started, features_done) if finish else self

    def _solve_and_build(self, started: float, features_done: float):
        self._s2_psd = project_psd(self._s2_bar)  # post-processing: a bounded-below quadratic
        self.kernel = self.solve()
        solved = time.perf_counter()
        # wall-clock seconds of the two parts (measured, for the benchmark): the private set's features,
        # then statistics + noise + release + PSD projection + solve
        self.seconds = {"features": features_done - started, "statistics_release_solve": solved - features_done}
        self.model = self.to_keras()
        return self

    # -- post-processing of the release ---------------------------------------------------
    def _need_release(self):
        if not self.released:
            raise RuntimeError("call fit(x_private, y_private) first: nothing has been released yet")

    def _quadratic(self) -> np.ndarray:
        return self._s2_psd + self.ridge * np.eye(self.num_features)

    def solve(self) -> np.ndarray:
        """``W = −4(S̄2⁺ + ρI)⁻¹ S̄1`` (d × C, last row the bias), the minimiser of :meth:`objective`.

        Raises:
            ValueError: the quadratic is singular (only possible with ``ridge=0``).
        """
        self._need_release()
        try:
            return -4.0 * np.linalg.solve(self._quadratic(), self._s1_bar)
        except np.linalg.LinAlgError as exc:
            raise ValueError(f"the released quadratic is singular with ridge={self.ridge:g}; pass ridge > 0 "
                             "(or None for the default rule)") from exc

    def objective(self, kernel) -> float:
        """The released objective per record: ``(1/n) Σ_l [W_lᵀ S̄1_l + ⅛ W_lᵀ(S̄2⁺ + ρI)W_l]``."""
        self._need_release()
        w = np.asarray(kernel, dtype=np.float64).reshape(self.num_features, self.num_classes)
        return float((np.sum(self._s1_bar * w) + PHI2 * np.sum(w * (self._quadratic() @ w))) / self.n)

    def pseudo_records(self) -> tuple:
        """``d`` synthetic records whose Taylor loss is the released objective (up to a constant).

        With ``(S̄2⁺ + ρI)/n = V Λ Vᵀ``, the records are ``r_k = √λ_k v_k`` and their coefficients
        ``(0, t_k, ⅛)`` with ``T = Λ^{-1/2} Vᵀ S̄1/n``: then ``Σ_k Σ_l [t_kl z_kl + ⅛ z_kl²]`` with
        ``z_k = Wᵀ r_k`` equals :meth:`objective`. Train a ``Dense(C, use_bias=False)`` on them with
        ``TaylorCrossEntropy(any_batch_size=True)`` (see :meth:`trainable_head`): post-processing of
        the release, at no privacy cost, for any number of epochs.

        Returns:
            ``(x, y)``: float32 ``(d, d)`` inputs and ``(d, C, 3)`` coefficient targets.
        """
        self._need_release()
        return pseudo_records(self._quadratic(), self._s1_bar, self.n)

    def trainable_head(self, name: str = "functional_head_trainable") -> keras.Model:
        """``Input(d) → Dense(C, use_bias=False)`` compiled-ready for :meth:`pseudo_records`."""
        self._need_release()
        return trainable_head(self.num_features, self.num_classes, name=name)

    def check_features_unchanged(self) -> None:
        """Refuse an extractor (or its frozen copy, which the head's model holds) whose weights changed
        after the release.

        Raises:
            ValueError: a fingerprint differs.
        """
        if self.features is not None:
            self.features.check_unchanged()

    def to_keras(self, kernel=None, name: str = "functional_head_model") -> keras.Model:
        """An ordinary Keras model: extractor (frozen) → :class:`FeatureMap` → ``Dense(C)`` logits.

        Args:
            kernel: the head's ``(d, C)`` weights (bias last); default the closed form.

        Returns:
            a non-trainable Keras model (training it further changes nothing); predict with argmax.
            It saves and loads as ``.keras``.
        """
        self._need_release()
        self.check_features_unchanged()
        w = self.kernel if kernel is None else np.asarray(kernel, dtype=np.float64)
        if w.shape != (self.num_features, self.num_classes):
            raise ValueError(f"kernel must have shape {(self.num_features, self.num_classes)}, got {w.shape}")
        return functional_head_model(self.features, w, clip_norm=self.mechanism == "gaussian", name=name)

    def predict(self, x, batch_size: int = 512) -> np.ndarray:
        """Logits of :attr:`model` on ``x`` (after checking the extractor is unchanged)."""
        self._need_release()
        self.check_features_unchanged()
        return self.model.predict(np.asarray(x, dtype=np.float32), batch_size=batch_size, verbose=0)

    def statistics(self) -> dict:
        """The released (noisy) statistics: ``s1_bar`` and the symmetric ``s2_bar`` (safe to share)."""
        self._need_release()
        return {"s1_bar": self._s1_bar.copy(), "s2_bar": self._s2_bar.copy()}

    def __repr__(self) -> str:
        state = repr(self.ledger) if self.released else "not released yet"
        return (f"FunctionalHead({self.mechanism}, ε={self.epsilon:g}"
                + (f", δ={self.delta:g}" if self.delta else "") + f", classes={self.num_classes}; {state})")
