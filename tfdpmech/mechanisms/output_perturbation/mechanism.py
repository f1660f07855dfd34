"""Output perturbation with a convexified loss (Lu et al.): train normally, pay per query.

Lu, Asghar, Kaafar, Webb, Dickinson, "A Differentially Private Framework for Deep Learning with
Convexified Loss Functions". What the paper claims, what we prove and why:
``docs/mechanisms/output_perturbation.md``.

The recipe, as the paper's steps:

1. Train a non-private MLP ``m → 128 (tanh) → C`` (Table 4) with
   :class:`~tfdpmech.losses.ConvexifiedCrossEntropy` (Eq. 22) and ``L2(c)`` on every kernel (Eq. 23);
   :func:`tfdpmech.mechanisms.output_perturbation.convexified_mlp.convexified_mlp` builds it.
2. :func:`~tfdpmech.mechanisms.output_perturbation.sensitivity.compute_bounds` reads the model and
   n and returns ρ, Δ₂W, Δω, Δz_T, Δp and the OARO bound (Eq. 15, 18–21, 30).
3. :class:`DPPredictor` answers queries: it charges the :class:`QueryBudgetAccountant` first, then
   runs the logits model and :class:`NoisyOutputNeuron` (Algorithm 1), and records each answered
   batch in a :class:`PrivacyLedger`. Queries compose sequentially (Theorem 1; §4.1).

Ledger honesty: ``mode="reference"`` (Algorithm 1, one sampled logit) is recorded as *claimed*
only: Theorem 6 does not hold for C ≥ 3 (the proof's Eqs. 26–27 treat exact ratios of unperturbed
logits as noisy) and the sensitivity bound (Eq. 18, Corollary 1) is not proven either.
``mode="private"`` (noise on every logit) is recorded with provable ε **none** as well: its noise
would give the claimed ε if Δz_T bounded one record's effect on a logit, but no bound offered here is
proven for a full MLP, and a proof conditional on an unproven bound is no proof; the release's
details keep the ε the bound would give (``epsilon_if_the_bound_held``). The Gaussian variant's "ε"
is a GDP μ (§3.1, Theorems 2–3). Proven output perturbation is
:class:`tfdpmech.mechanisms.output_perturbation.OutputPerturbationHead` (Chaudhuri et al. 2011, on public features).
"""

from __future__ import annotations

import contextlib
import math
import threading
import warnings

import keras
import numpy as np
import tensorflow as tf

from ...accounting.gaussian import gdp_epsilon
from ...accounting.ledger import PrivacyLedger, Release, ledger_or_new
from ...accounting.query_budget import QueryBudgetAccountant, UnlimitedAccountant
from ...contract import Mechanism, PreparedFit
from ...contract import release as record_release
from .noisy_output_neuron import GAUSSIAN_SPLITS, NOISE_TYPES, OUTPUT_MODES, NoisyOutputNeuron
from .convexified_mlp import logits_model_from
from ...validation import check_array, check_choice, check_positive_int, warn_unproven_mode
from .sensitivity import OutputPerturbationBounds, describe_mlp

__all__ = ["DPPredictor", "EXPORT_WARNING"]

EXPORT_WARNING = (
    "the exported model adds fresh output noise on every call, but budget enforcement does NOT travel with the "
    "file: a client holding it can query without limit and average the noise away. Serve it only behind a "
    "DPPredictor (or another QueryBudgetAccountant) on the server"
)


class DPPredictor(Mechanism):
    """Answer queries with Lu et al.'s output perturbation under a query budget.

    Args:
        logits_model: a trained Keras MLP returning logits (or softmax: it is stripped with
            :func:`~tfdpmech.mechanisms.output_perturbation.convexified_mlp.logits_model_from`). Never exposed to clients.
        bounds: :class:`OutputPerturbationBounds` from :func:`compute_bounds` on that model.
        accountant: a :class:`QueryBudgetAccountant`; its per-query amount is the query's ε (μ
            for Gaussian noise).
        noise: ``"gaussian"`` or ``"laplace"``.
        gaussian_split: ``"paper"`` or ``"reference_code"``.
        mode: ``"private"`` (the default: noise on every logit; none proven either, see above, and it
            warns so once) or ``"reference"`` (Algorithm 1: one
            sampled logit; claimed only; warns
            :class:`~tfdpmech.privacy_warnings.UnprovenModeWarning` once per process).
        seed: seed of the noise generator (None: OS entropy).
        cache_identical_queries: return the stored answer for a byte-identical repeated row at no
            extra budget (post-processing of a released answer).
        ledger: a :class:`PrivacyLedger` to record answered batches into (new if None).

    Raises:
        ValueError / TypeError: unknown noise, split or mode; Laplace noise with a GDP
            accountant; bounds that do not match the model.

    Example:
        >>> acct = QueryBudgetAccountant(1.0, max_queries=100, composition="gdp")
        >>> pred = DPPredictor(model, compute_bounds(model, n_train=10000), acct)
        >>> pred.predict_labels(x_query)
    """

    paper = "Lu et al., output perturbation with a convexified loss: noise on every answer"
    kind = "query"
    described = {"noise": "noise"}
    modes = ("private", "reference")

    def __init__(self, logits_model, bounds: OutputPerturbationBounds, accountant, *, noise: str = "gaussian",
                 gaussian_split: str = "paper", mode: str = "private", seed: int | None = None,
                 cache_identical_queries: bool = False, ledger: PrivacyLedger | None = None):
        if not isinstance(bounds, OutputPerturbationBounds):
            raise TypeError(f"bounds must be OutputPerturbationBounds (from compute_bounds), got {type(bounds).__name__}")
        if not isinstance(accountant, (QueryBudgetAccountant, UnlimitedAccountant)):
            raise TypeError(f"accountant must be a QueryBudgetAccountant, got {type(accountant).__name__}")
        ledger = ledger_or_new(ledger)  # type-checked before anything else
        self.noise = check_choice(noise, "noise", NOISE_TYPES)
        self.gaussian_split = check_choice(gaussian_split, "gaussian_split", GAUSSIAN_SPLITS)
        self.mode = check_choice(mode, "mode", OUTPUT_MODES)
        if self.mode != "private":
            warn_unproven_mode(type(self).__name__, self.mode)
        else:  # Lu et al.'s output perturbation has no proven mode: say so, and where the proven one is
            warn_unproven_mode(type(self).__name__, self.mode, why=(
                "adds noise on every logit scaled to Δz_T, which is not a proven bound for a trained MLP, so its ε "
                "is none proven (the ledger records it so); tfdpmech.mechanisms.output_perturbation.OutputPerturbationHead is the proven "
                "output perturbation (Chaudhuri et al. 2011, on public features)"))
        if self.noise == "laplace" and accountant.composition == "gdp":
            raise ValueError("GDP composition applies to Gaussian noise only; use composition='basic' with Laplace noise")
        self._given_model = logits_model
        self._logits_model = logits_model_from(logits_model)
        widths = describe_mlp(self._logits_model)["widths"]
        if widths[0] != bounds.input_dim or widths[-1] != bounds.num_classes:
            raise ValueError(
                f"bounds were computed for {bounds.input_dim} features and {bounds.num_classes} classes, but the model "
                f"has {widths[0]} and {widths[-1]}; compute the bounds on this model"
            )
        self.bounds = bounds
        self.num_classes = bounds.num_classes
        self.accountant = accountant
        self.ledger = ledger
        self.cache_identical_queries = bool(cache_identical_queries)
        self._cache: dict[bytes, np.ndarray] = {}
        self._lock = threading.Lock()
        self._seed = seed
        self._layer = self._make_layer(accountant.per_query, seed)
        self._evaluating = False

    def _make_layer(self, epsilon_query: float, seed) -> NoisyOutputNeuron:
        return NoisyOutputNeuron(
            epsilon_query=epsilon_query, delta_z=self.bounds.delta_z, delta_p=self.bounds.delta_p,
            num_classes=self.num_classes, noise=self.noise, gaussian_split=self.gaussian_split,
            mode=self.mode, seed=seed,
        )

    @property
    def epsilon_query(self) -> float:
        """The per-query budget (ε, or μ for Gaussian noise)."""
        return self._layer.epsilon_query

    @property
    def noise_layer(self) -> NoisyOutputNeuron:
        return self._layer

    # -- input checks --------------------------------------------------------------------------
    def _check_x(self, x) -> np.ndarray:
        x = check_array(x, "x", ndim_min=1).astype(np.float32)
        shape = tuple(int(s) for s in self._logits_model.inputs[0].shape[1:])
        if x.shape == shape:
            x = x[None]
        if x.shape[1:] != shape:
            raise ValueError(f"x must have shape (k, {', '.join(map(str, shape))}), got {x.shape}")
        bound = self.bounds.input_bound
        worst = float(np.max(np.abs(x)))
        if worst > bound * (1 + 1e-6):
            raise ValueError(
                f"x has |values| up to {worst:g}, outside the assumed range [-{bound:g}, {bound:g}] that the "
                "sensitivity bound (x_0) relies on; scale the features with public bounds (e.g. divide by the "
                "public maximum) before querying. Nothing was charged or released"
            )
        return x

    # -- ledger ----------------------------------------------------------------------------------
    def release(self, k: int = 1) -> Release:
        """The ledger entry for ``k`` answered queries (claimed and provable ε), without answering."""
        k = check_positive_int(k, "k")
        eps_q = self.epsilon_query
        gaussian = self.noise == "gaussian"
        composition = self.accountant.composition
        claimed = k * eps_q  # the paper composes queries linearly for both noise types (Theorem 1, §5.4.5)
        bound_name = f"sensitivity_mode={self.bounds.sensitivity_mode!r}, λ convention {self.bounds.lambda_convention!r}"
        details = {"mode": self.mode, "queries": k, "epsilon_query": eps_q, "composition": composition,
                   "sensitivity_bound": bound_name, "delta_z": self.bounds.delta_z, "delta_p": self.bounds.delta_p}
        if self.mode == "reference":
            provable = None
            basis = (
                "Lu et al. Theorem 6 / GDP split as published; contested: for C >= 3 the released ratios of the "
                "unperturbed logits are exact, so no finite ε follows (Eqs. 26-27), and the sensitivity bound "
                f"({bound_name}) is not proven for a full MLP (Eq. 18, Corollary 1); see "
                "docs/mechanisms/output_perturbation.md"
            )
            if gaussian:
                basis += "; the Gaussian 'ε' is a GDP μ (Theorems 2-3)"
        else:
            # noise on every logit: the Laplace / Gaussian mechanism WOULD give the ε below if Δz_T bounded
            # how far one record moves a logit; it does not (Eq. 18 and Corollary 1 are not bounds), and a
            # proof that rests on an unproven bound is no proof: provable none
            provable = None
            if gaussian:
                mu = math.sqrt(k) * eps_q if composition == "gdp" else k * eps_q
                report_delta = getattr(self.accountant, "delta_for_report", 1e-5)
                details.update(mu=mu, epsilon_if_the_bound_held=gdp_epsilon(mu, report_delta),
                               delta_if_the_bound_held=report_delta)
                how = "Gaussian mechanism on all C logits, σ = √C·Δz_T/μ (μ-GDP if √C·Δz_T bounded their L2 change)"
            else:
                details.update(epsilon_if_the_bound_held=claimed)
                how = "Laplace mechanism on all C logits, b = C·Δz_T/ε (ε-DP if C·Δz_T bounded their L1 change)"
            details["unproven_premise"] = "sensitivity bound Δz_T"
            basis = (
                f"none proven: {how}, but Δz_T={self.bounds.delta_z:.6g} ({bound_name}) is not a bound on a full "
                "MLP: Eq. 18 divides an L2 bound by √|W| (one weight may take the whole change), Corollary 1 ignores "
                "the hidden layers and the output bias, and Theorem 4 needs the exact minimiser of a strongly convex "
                "objective (docs/mechanisms/output_perturbation.md). A proof that rests on an unproven bound is no "
                "proof. Proven output perturbation: tfdpmech.mechanisms.output_perturbation.OutputPerturbationHead (runner: outpert_head)"
            )
        return Release(
            component="query_answers", mechanism=f"output_perturbation/{self.mode}/{self.noise}",
            epsilon_claimed=claimed, epsilon_provable=provable, basis=basis,
            sensitivity=self.bounds.delta_z, noise_scale=self._layer.noise_scale,
            reproduction=self.mode == "reference", details=details,
            # Lu et al. §3: neighbours differ by adding or removing one row (Theorem 4 compares X and X^(−i))
            neighbours="add_remove", protects="record",
        )

    def _record(self, k: int) -> None:
        record_release(self.ledger, self.release(k))

    def prepare(self, model=None, x=None, y=None) -> PreparedFit:
        """The contract for a query-time mechanism: nothing to train; the returned model is this
        predictor, whose ``predict`` charges the query budget on every answered batch.

        Raises:
            ValueError: a ``model`` other than the one this predictor wraps, or data (nothing is
                trained at query time).
        """
        if model is not None and model is not self._given_model:
            raise ValueError("DPPredictor answers with the model given to its constructor; call prepare() without a "
                             "model (or create a DPPredictor for the other model)")
        if x is not None or y is not None:
            raise ValueError("DPPredictor trains nothing: its budget is spent per answered query; pass no x, y")
        return PreparedFit(self)

    def predict(self, x) -> np.ndarray:
        """Keras-style name of :meth:`predict_proba` (the same budget: one query per uncached row)."""
        return self.predict_proba(x)

    # -- answering ---------------------------------------------------------------------------
    def _answer(self, x: np.ndarray) -> np.ndarray:
        logits = self._logits_model(tf.constant(x), training=False)
        return np.asarray(self._layer(logits, training=False).numpy(), dtype=np.float64)

    def predict_proba(self, x) -> np.ndarray:
        """Noisy probability vectors, one per row; each uncached row costs one query.

        The budget is charged before anything is computed; a refused charge releases nothing.

        Raises:
            BudgetExhaustedError: the rows would exceed the budget (nothing is answered).
            ValueError: ``x`` of the wrong shape, NaN/inf, or outside the assumed input range.
        """
        x = self._check_x(x)
        if not self.cache_identical_queries:
            self.accountant.charge(len(x))
            if self.accountant.limited:
                self._record(len(x))
            return self._answer(x)
        with self._lock:
            keys = [row.tobytes() for row in x]
            new = sorted({k for k in keys if k not in self._cache}, key=keys.index)
            if new:
                self.accountant.charge(len(new))
                if self.accountant.limited:
                    self._record(len(new))
                rows = np.stack([x[keys.index(k)] for k in new])
                for k, ans in zip(new, self._answer(rows)):
                    self._cache[k] = ans
            return np.stack([self._cache[k] for k in keys])

    def predict_labels(self, x) -> np.ndarray:
        """``argmax`` of :meth:`predict_proba` (same budget: one query per row)."""
        return np.argmax(self.predict_proba(x), axis=1)

    @contextlib.contextmanager
    def evaluation_mode(self):
        """Answer without a budget inside the block, for evaluation harnesses only (as in the paper's §5.3).

        Queries made here are not charged to the production accountant nor recorded in the
        ledger; nothing answered here is covered by a budget.
        """
        saved = self.accountant
        self.accountant = UnlimitedAccountant(self.epsilon_query)
        try:
            yield self
        finally:
            self.accountant = saved

    def as_keras_model(self) -> keras.Model:
        """``logits_model → NoisyOutputNeuron`` as one Keras model, for export.

        Warns (``UserWarning``) that budget enforcement does not travel with the file.
        """
        warnings.warn(EXPORT_WARNING, UserWarning, stacklevel=2)
        shape = tuple(int(s) for s in self._logits_model.inputs[0].shape[1:])
        inp = keras.Input(shape=shape)
        layer = NoisyOutputNeuron.from_config({**self._layer.get_config(), "name": "noisy_output_neuron"})
        return keras.Model(inp, layer(self._logits_model(inp)), name="dp_output_perturbation")

    def __repr__(self) -> str:
        return (f"DPPredictor(mode={self.mode!r}, {self.noise}, ε_query={self.epsilon_query:g}, "
                f"Δz_T={self.bounds.delta_z:.4g}, {self.accountant!r})")
