"""AdLM and ILM: adaptive (or uniform) Laplace noise drawn once, before ``model.fit``.

Phan, Wu, Hu, Dou, "Adaptive Laplace Mechanism: Differential Privacy Preservation in Deep
Learning", ICDM'17 (correction version, arXiv:1709.05750). What the paper claims, what we prove
and why: ``docs/mechanisms/adlm.md``.

Algorithm 1, as steps of :class:`AdLM`:

1. :meth:`AdLM.fit_relevance` (lines 1–7): LRP relevance averaged over the private data, plus
   ``Lap(Δ_R/ε1)``, ``Δ_R = 2d/n``.
2. :meth:`AdLM.perturb` (lines 8–19): budget ratios β (Eq. 16), noisy inputs
   ``x̄_ij = x_ij + (1/|L|)·Lap(Δ_h0/(β_j ε2))``, noisy bias constant ``b̄``, and noisy Taylor
   coefficients ``ϕ̄ = ϕ + (1/|L|)·Lap(Δ_F/ε3)``. Raw data is not kept.
3. ``model.fit(private_data.to_dataset(), ...)`` with :meth:`AdLM.loss` (lines 20–30).

Privacy: the paper claims ``ε1 + ε2 + ε3`` (Theorem 1, §III-D). In the default
``per_example_frozen`` mode the trained model is post-processing of per-record Laplace releases,
which proves ``ε1 + |L|·d·ε2/Δ_h0 + 2|L|·ε3/Δ_F`` per record (the relevance term only if the
relevance model is independent of the private data). The shared modes apply the authors' shared
noise draw on this package's network (ablations); no per-record guarantee follows for them (Lemma 4, Eqs. 19–21, bounds a batch sum whose
noise is one draw shared by the batch) and the ledger says so.

Modes (the ``mode=`` argument of :class:`AdLM`, :class:`ILM` and AFRRS):

* ``"private"`` (default): this class, Algorithm 1 with the noise drawn once per record.
* the authors' public code path is a class of its own,
  :class:`~tfdpmech.mechanisms.adlm.reference.AdLMReference` (resp. ``ILMReference``); claimed, none
  proven. ``AdLM(..., mode="reference")`` is refused with a ValueError naming it.

The released data (:class:`PrivateData`) and the training callback (:class:`AdLMBudget`) are in
:mod:`~tfdpmech.mechanisms.adlm.private_data` (importable from here).
"""

from __future__ import annotations

import math
import time

import keras
import numpy as np

from ...accounting.ledger import PrivacyLedger, ledger_or_new
from ...contract import Mechanism, PreparedFit, check_proven_mode
from ...metrics import taylor_accuracy
from ...noise import make_rng
from ...released_data import ReleasedData, array_fingerprint
from ...release_on_fit import release_on_fit
from .allocation import BudgetAllocation, get_allocation
from .input_noise import InputNoise
from .per_record_budget import check_per_record_target
from .perturbation import perturb_bias, perturb_coefficients, perturb_features
from .perturbed_bias import PerturbedBias
from .private_relevance import private_relevance
from .releases import record_releases
from .taylor_cross_entropy import TaylorCrossEntropy
from ...validation import (
    check_batch_size,
    check_budget_split,
    check_choice,
    check_epsilon,
    check_fractions,
    check_graph_model,
    check_instance,
    check_interval,
    check_one_hot,
    check_positive_real,
    check_unit_interval,
)
from .private_data import AdLMBudget, PrivateData, _remainder_message
from .reference import AdLMReference, ILMReference
from .sensitivity import DELTA_H0_POLICIES, model_sensitivities

__all__ = ["AdLM", "ILM", "PrivateData", "AdLMBudget", "NOISE_MODES", "MODES"]

NOISE_MODES = ("per_example_frozen", "shared_frozen", "shared_per_step")
MODES = ("private",)  # the authors' code path is AdLMReference / ILMReference


class AdLM(Mechanism):
    """The Adaptive Laplace Mechanism as a once-only preprocessing step for a Keras model.

    Args:
        eps1, eps2, eps3: budgets of the relevance, first-layer and loss steps.
        batch_size: |L|; training must use exactly this batch size.
        epsilon: optional total; if given, ``eps1 + eps2 + eps3`` must equal it.
        mode: ``"private"`` (the only mode of this class); ``"reference"`` is refused with a ValueError
            naming the class of the authors' code path,
            :class:`~tfdpmech.mechanisms.adlm.reference.AdLMReference` (``ILMReference`` for ILM).
        noise_mode: ``per_example_frozen`` (default, Algorithm 1 literally, provable per-record
            bound), ``shared_frozen`` or ``shared_per_step`` (ablations: one draw shared by the
            records on this package's network; claimed only. The authors' code path is
            ``mode="reference"``).
        delta_h0_policy: how Δ_h0 counts neurons and inputs, see :func:`first_layer_sensitivity`.
        perturb_orders: Taylor orders that get noise; ``(1,)`` by default (the only
            label-dependent order of Eq. 25), ``(0, 1, 2)`` for the literal paper (lines 18–19).
        relevance_floor: floor on relevance before Eq. 16 (``R̄_j = 0`` would give infinite noise).
        bias_noise: perturb the bias constant (line 14; the bias input is the constant 1 of Lemma 4's
            proof, so this noise has no privacy role).
        clip_noisy_inputs: optional ``(low, high)`` applied to x̄ after the noise, as the authors'
            MNIST code does with (-10, 10); post-processing, so it costs no privacy.
        seed: seed of the numpy Generator; None uses OS entropy.
        ledger: a :class:`PrivacyLedger` to record into (a new one by default).

    Raises:
        TypeError / ValueError: (all before any budget is spent) a budget that is not a positive
            number, parts that do not add up to ``epsilon``, an unknown mode or policy, a bad
            ``relevance_floor`` or ``clip_noisy_inputs``, a ``ledger`` that is not a PrivacyLedger.

    Example:
        >>> adlm = AdLM(0.075, 0.075, 0.15, batch_size=100, seed=0)          # doctest: +SKIP
        >>> model = tfdpmech.make_private(tfdpmech.models.mnist_cnn(), adlm,  # doctest: +SKIP
        ...                               relevance_model=public_model)     # trained on public data only
        >>> model.compile(optimizer="adam")                                  # doctest: +SKIP
        >>> model.fit(x_train, y_train, epochs=30)  # relevance, perturbation, then training  # doctest: +SKIP
        >>> print(adlm.ledger.summary())                                     # doctest: +SKIP

        :meth:`certify` gives the per-record ε on a model before anything is spent (at |L| = 100:
        0.242, refused above 0.3).
    """

    settings = ("mode", "eps1", "eps2", "eps3", "batch_size", "noise_mode")
    name = "adlm"
    paper = "Phan et al. 2017, Adaptive Laplace Mechanism (ICDM)"
    modes = MODES
    described = {"noise_mode": "noise_mode"}
    allocation_name = "relevance"
    mode = "private"
    reference_class = AdLMReference  # the authors' code path, named when mode='reference' is refused

    def __init__(self, eps1, eps2, eps3, batch_size, *, mode="private", epsilon=None, noise_mode="per_example_frozen",
                 delta_h0_policy="reference_code", perturb_orders=(1,), relevance_floor=1e-5,
                 bias_noise=True, clip_noisy_inputs=None, seed=None, ledger: PrivacyLedger | None = None):
        check_proven_mode(type(self), mode, self.reference_class, MODES)
        parts = {"eps2": eps2, "eps3": eps3}
        if self.allocation_name == "relevance" or eps1 is not None:
            parts = {"eps1": eps1, **parts}
        split = check_budget_split(epsilon, parts)
        self.eps1 = split.get("eps1")
        self.eps2, self.eps3 = split["eps2"], split["eps3"]
        self.batch_size = check_batch_size(batch_size)
        self.noise_mode = check_choice(noise_mode, "noise_mode", NOISE_MODES)
        self.delta_h0_policy = check_choice(delta_h0_policy, "delta_h0_policy", DELTA_H0_POLICIES)
        if isinstance(perturb_orders, (str, bytes)) or not hasattr(perturb_orders, "__iter__"):
            raise TypeError(f"perturb_orders must be a tuple of Taylor orders such as (1,) or (0, 1, 2), "
                            f"got {perturb_orders!r}")
        orders = tuple(sorted(set(perturb_orders)))
        if not orders or any(isinstance(o, bool) or o not in (0, 1, 2) for o in orders):
            raise ValueError(f"perturb_orders must be a non-empty subset of (0, 1, 2), got {perturb_orders!r}")
        self.perturb_orders = orders
        self.relevance_floor = check_positive_real(
            relevance_floor, "relevance_floor", hint="it keeps every feature's budget ratio above 0, e.g. 1e-5")
        if not isinstance(bias_noise, (bool, np.bool_)):
            raise TypeError(f"bias_noise must be True or False, got {bias_noise!r}")
        self.bias_noise = bool(bias_noise)
        if clip_noisy_inputs is not None:
            clip_noisy_inputs = check_interval(clip_noisy_inputs, "clip_noisy_inputs")
        self.clip_noisy_inputs = clip_noisy_inputs
        self.seed = seed
        self._rng = make_rng(seed)
        self.ledger = ledger_or_new(ledger)
        self.released: ReleasedData | None = None
        self.relevance = None
        self.relevance_proven = None
        self.sensitivities: dict = {}

    @classmethod
    def from_total(cls, epsilon, batch_size, *, split=(0.25, 0.25, 0.5), **kwargs) -> "AdLM":
        """Split a total ε into (ε1, ε2, ε3) by ``split`` (default 1:1:2, the authors' MNIST code).

        Raises:
            TypeError / ValueError: ``split`` is not three positive fractions with sum <= 1 (up to 1e-9).
        """
        epsilon = check_epsilon(epsilon)
        split = check_fractions(split, "split", 3, allow_less=True)
        return cls(*(epsilon * s for s in split), batch_size, epsilon=epsilon * math.fsum(split), **kwargs)

    # Step 1 -- lines 1-7 --------------------------------------------------------------------
    def fit_relevance(self, relevance_model, x, y, *, trained_on_private_data: bool = False, mu: float = 1.0,
                      start: str = "true_class_logit", batch_size: int = 256) -> np.ndarray:
        """Private relevance ``R̄`` of the input features (Eqs. 10–12), costing ε1.

        Args:
            relevance_model: a trained, noise-free Keras model (Dense/Conv2D/pooling/ReLU).
            x, y: the private training data the relevance is averaged over.
            trained_on_private_data: True if ``relevance_model`` saw these records; then the
                ε1 bound does not hold (Lemma 1, App. A, bounds only the record's own relevance term)
                and the ledger marks the step *claimed*.
        """
        if not isinstance(trained_on_private_data, (bool, np.bool_)):
            raise TypeError(f"trained_on_private_data must be True or False, got {trained_on_private_data!r}")
        check_unit_interval(x, "x")
        self.relevance, release = private_relevance(
            relevance_model, x, y, self.eps1, rng_or_seed=self._rng, mu=mu, start=start,
            model_trained_on_private_data=trained_on_private_data, ledger=self.ledger, batch_size=batch_size,
        )
        self.relevance_proven = release.guarantee == "proven"
        return self.relevance

    def allocation(self) -> BudgetAllocation:
        """The budget-ratio strategy (relevance-based for AdLM)."""
        return get_allocation(self.allocation_name, self.relevance, floor=self.relevance_floor)

    def loss(self) -> TaylorCrossEntropy:
        """The Taylor loss, calibrated to this mechanism's batch size."""
        return TaylorCrossEntropy(batch_size=self.batch_size)

    def callback(self, model: keras.Model | None = None, verbose: int = 1) -> AdLMBudget:
        """An :class:`AdLMBudget`: logs claimed and provable ε, guards frozen noise, and makes the
        fitted model refuse any data but the released ``(x̄, ϕ̄)`` (a model trained on raw data
        must never log a guarantee)."""
        frozen = []
        if model is not None:
            check_instance(model, "model", keras.Model)
            frozen = [layer.b_bar for layer in model.layers if isinstance(layer, PerturbedBias)]
            frozen += [layer.scales for layer in model.layers if isinstance(layer, InputNoise)]
        return AdLMBudget(self, frozen_weights=frozen, verbose=verbose)

    # Step 2 and Step 4 noise -- lines 8-19 ----------------------------------------------------
    def perturb(self, x, y, model: keras.Model, *, drop_remainder: bool = False) -> PrivateData:
        """Perturb the training data once and configure ``model``'s frozen noise.

        Every check runs before any noise is drawn or any release is recorded. In the per-record
        mode that includes the ε it proves against the ε it was asked for (:meth:`certify`).

        Args:
            x: features in [0, 1], shape (n, *model input shape).
            y: one-hot labels, shape (n, M).
            model: the built Sequential/functional Keras model to train: first Dense/Conv2D is h_0
                (``use_bias=False`` followed by :class:`PerturbedBias`), last hidden layer bounded by
                :class:`UnitClip`.
            drop_remainder: accept that ``n mod batch_size`` records sit out of every epoch when
                ``batch_size`` does not divide ``n`` (the ledger records the number). By default
                that is refused: training uses batches of exactly ``batch_size`` records, so the
                remainder could not be trained on, and no record is dropped without a word.

        Returns:
            :class:`PrivateData`; no reference to ``x`` or ``y`` is kept.

        Raises:
            TypeError / ValueError: data out of range, complex or not one-hot, fewer records than one
                batch, ``batch_size`` not dividing n without ``drop_remainder=True``, an unbuilt or
                subclassed model, a model whose last hidden layer is not bounded, missing relevance
                for AdLM, or a model without the layers the noise mode needs.
            NotCertifiableError: (a ValueError) see :meth:`certify`.
        """
        x, y, n, feature_shape = self._checked_inputs(x, y, model, drop_remainder)
        self.sensitivities = model_sensitivities(model, self.delta_h0_policy)
        delta_h0, delta_f = self.sensitivities["delta_h0"], self.sensitivities["delta_F"]
        beta = self.allocation().ratios(feature_shape)  # Eq. 16
        scales = delta_h0 / (self.batch_size * beta * self.eps2)  # lines 12-13
        self._check_target(inputs=float(np.sum(1.0 / scales)))  # the per-record ε the ledger will record

        x_bar = perturb_features(self, x, scales, model)
        perturb_bias(self, model, delta_h0)
        phi_bar = perturb_coefficients(self, y, delta_f)
        fingerprint = array_fingerprint(np.concatenate([x_bar.ravel()[:4096], phi_bar.ravel()[:4096]]))
        self.released = ReleasedData(
            (x_bar, phi_bar), source=f"{type(self).__name__}.perturb",
            fix="train on PrivateData.to_dataset() (or its x_bar and phi_bar) only",
        )
        record_releases(self, n, int(np.prod(feature_shape)), beta, scales, delta_h0, delta_f, fingerprint)
        return PrivateData(x_bar, phi_bar, self.batch_size, self.noise_mode, fingerprint, bool(drop_remainder))

    def _checked_inputs(self, x, y, model, drop_remainder):
        """Every check of :meth:`perturb` on the data and the model; ``(x, y, n, feature_shape)``."""
        model = check_graph_model(model)
        if not isinstance(drop_remainder, (bool, np.bool_)):
            raise TypeError(f"drop_remainder must be True or False, got {drop_remainder!r}")
        x = check_unit_interval(x, "x")
        feature_shape = tuple(int(s) for s in model.input_shape[1:])
        if x.shape[1:] != feature_shape:
            raise ValueError(f"x has feature shape {x.shape[1:]}, the model expects {feature_shape}")
        y = check_one_hot(y, "y", num_classes=int(model.output_shape[-1]))
        n = x.shape[0]
        if y.shape[0] != n:
            raise ValueError(f"x has {n} records but y has {y.shape[0]}; pass matching arrays")
        check_batch_size(self.batch_size, "batch_size", n=n)
        if n % self.batch_size and not drop_remainder:
            raise ValueError(_remainder_message(n, self.batch_size))
        self._check_noise_layers(model)
        return x, y, n, feature_shape

    def certify(self, model: keras.Model) -> float | None:
        """The per-record ε the private mode proves on ``model`` at ``batch_size``, checked against the
        ε it was asked for (``eps1 + eps2 + eps3``) before anything is released.

        :meth:`prepare` calls it before the relevance step; call it before :meth:`fit_relevance`
        when running the steps yourself (:meth:`perturb` checks again, after ε1 is spent).

        Returns:
            ``ε1 + |L|·d·ε2/Δ_h0 + 2|L|·ε3/Δ_F``; None for the shared modes (nothing proven).

        Raises:
            NotCertifiableError: (a ValueError) that ε exceeds the ε asked for; the message names
                the largest ``batch_size`` that meets it (Algorithm 1's noise shrinks as 1/|L|).
            TypeError / ValueError: a model :meth:`perturb` would refuse.
        """
        model = check_graph_model(model)
        self.sensitivities = model_sensitivities(model, self.delta_h0_policy)
        return self._check_target()

    def _check_target(self, inputs: float | None = None) -> float | None:
        """:meth:`certify` on the known sensitivities (``inputs``: see :func:`check_per_record_target`)."""
        if self.noise_mode != "per_example_frozen":
            return None  # the shared modes prove nothing; the ledger says so
        return check_per_record_target(type(self).__name__, eps1=self.eps1 or 0.0, eps2=self.eps2, eps3=self.eps3,
                                       batch_size=self.batch_size, sensitivities=self.sensitivities, inputs=inputs)

    def _check_noise_layers(self, model) -> None:
        """The layers the noise mode writes to exist (checked before any noise is drawn)."""
        if self.noise_mode == "shared_per_step" and not any(isinstance(l, InputNoise) for l in model.layers):
            raise ValueError(
                "noise_mode='shared_per_step' needs an InputNoise layer in the model; "
                "build it with tfdpmech.models.mnist_cnn(input_noise=True)"
            )
        if self.bias_noise and not any(isinstance(l, PerturbedBias) for l in model.layers):
            raise ValueError(
                "bias_noise=True needs a PerturbedBias layer after the first affine layer "
                "(Conv2D/Dense with use_bias=False); use tfdpmech.models.mnist_cnn or pass bias_noise=False"
            )

    def private_model(self, model, **options):
        """``model`` whose first ``fit(x, y)`` runs Algorithm 1 and trains on the release
        (:func:`tfdpmech.make_private`); ``options`` are :meth:`prepare`'s (``relevance_model``...)."""
        return release_on_fit(model, self, options)

    def prepare(self, model, x=None, y=None, *, relevance_model=None, optimizer="adam", metrics=(taylor_accuracy,),
                drop_remainder: bool = False, shuffle_seed=None, verbose: int = 1) -> PreparedFit:
        """Algorithm 1 as one call: relevance (AdLM, AFRRS), perturbation, ``compile`` with the Taylor loss.

        Args:
            model: the Keras model to train (see :meth:`perturb` for the layers it needs).
            x, y: the private images in [0, 1] and one-hot labels; not kept.
            relevance_model: a trained Keras model that never saw ``x`` (public data only), for the
                relevance step of AdLM and AFRRS; ignored when :meth:`fit_relevance` already ran, and
                not used by ILM.
            optimizer, metrics: passed to ``model.compile``; the targets are the released Taylor
                coefficients, so the default metric is :func:`~tfdpmech.metrics.taylor_accuracy` (the
                fit to the noisy labels: post-processing, no privacy cost).
            drop_remainder, shuffle_seed: see :meth:`perturb` and :meth:`PrivateData.to_dataset`.
            verbose: the budget callback's logging (0: silent).

        Raises:
            ValueError: AdLM/AFRRS without a relevance model, and every error of :meth:`perturb`
                (before the relevance step spends ε1), and of :meth:`fit_relevance`.
            NotCertifiableError: (a ValueError) see :meth:`certify`; raised before any release.
        """
        started = time.perf_counter()
        if self.allocation_name != "uniform" and self.relevance is None:
            if relevance_model is None:
                raise ValueError(f"{type(self).__name__}.prepare needs relevance_model= (a Keras model trained on public "
                                 "data only) for its relevance step, or call fit_relevance() first")
            check_instance(relevance_model, "relevance_model", keras.Model)
            # perturb's checks and the per-record ε against the target, before the relevance step spends ε1
            self._checked_inputs(x, y, model, drop_remainder)
            self.certify(model)
            self.fit_relevance(relevance_model, x, y)
        data = self.perturb(x, y, model, drop_remainder=drop_remainder)
        model.compile(optimizer=optimizer, loss=self.loss(), metrics=list(metrics))
        self.seconds = {"release": time.perf_counter() - started}  # relevance, perturbation, compile
        return PreparedFit(model, data.to_dataset(seed=shuffle_seed), [self.callback(model, verbose=verbose)])

    def report(self, epochs: int | None = None) -> dict:
        """Claimed and provable ε, the mode and the sensitivities."""
        return {"mechanism": self.name, "noise_mode": self.noise_mode, **self.ledger.to_dict(epochs),
                "sensitivities": self.sensitivities}


class ILM(AdLM):
    """The Identical Laplace Mechanism (AdLM App. C): the same noise scale on every feature.

    No relevance step, so ε1 is not spent: the total is ``eps2 + eps3`` (App. C leaves ILM's budget
    unstated).
    """

    name = "ilm"
    allocation_name = "uniform"
    reference_class = ILMReference

    def __init__(self, eps2, eps3, batch_size, **kwargs):
        super().__init__(None, eps2, eps3, batch_size, **kwargs)

    @classmethod
    def from_total(cls, epsilon, batch_size, *, split=(0.25, 0.25, 0.5), **kwargs) -> "ILM":
        """ILM with the same ε2, ε3 as :meth:`AdLM.from_total` would use; ε1 stays unspent.

        Raises:
            TypeError / ValueError: ``split`` is not three positive fractions (ε1, ε2, ε3) with
                sum <= 1 (up to 1e-9); the ε1 share is not spent by ILM.
        """
        epsilon = check_epsilon(epsilon)
        split = check_fractions(split, "split", 3, allow_less=True)
        return cls(epsilon * split[1], epsilon * split[2], batch_size, **kwargs)

    def fit_relevance(self, *args, **kwargs):
        raise ValueError("ILM uses the same budget for every feature and needs no relevance; use AdLM for that")
