"""pCDBN: a private convolutional deep belief network trained layer by layer (Phan, Wu, Dou 2017).

"Preserving Differential Privacy in Convolutional Deep Belief Networks", Machine Learning 2017
(corrected version, arXiv:1706.08839). What the paper claims, what we prove and why:
``docs/mechanisms/pcdbn.md``.

Used as every training mechanism is: the network is a Keras model (:func:`cdbn_network` builds it),
``tfdpmech.make_private(model, PrivateCDBN(...))``, then ``model.compile()`` and ``model.fit(x, y)``,
which runs Algorithm 1 once (one epoch of the model's ``fit``):

1. For each CRBM layer ℓ (greedy, Bengio et al. 2007): map the training data through the frozen
   layers 1..ℓ−1 (sigmoid + pooling; inference only) and build the layer's objective
   (:class:`~tfdpmech.mechanisms.pcdbn.energy.ChebyshevEnergy`): σ replaced by the degree-L
   surrogate σ̂(a/Z) (Eqs. 12–14), coefficients perturbed once with ``Lap(Δ_ℓ/ε_ℓ)`` (Lemmas 1–2,
   with a constant Z and Δ from the data domain), then trained for ``pretrain_epochs`` on the
   data-free objective.
2. Pooling after every hidden layer (post-processing, no budget).
3. Optional frozen random fully connected layer (a sigmoid ``Dense`` after ``Flatten``;
   data-independent, so free: §4.2's MNIST network has an FC-25 layer whose privacy the paper does
   not address).
4. Output layer: Taylor cross-entropy (Eq. 18) with the functional-mechanism statistics perturbed
   once (:class:`~tfdpmech.mechanisms.pcdbn.softmax_head.FunctionalSoftmaxHead`, the functional head).

Privacy: every layer reads the private data, so the pipeline is ``(Σ_ℓ ε_ℓ + ε_out)``-DP by
sequential composition (pure ε, δ = 0 with the Laplace head; (ε, δ) with the Gaussian head; the paper
states no split). The ledger holds one release per component.
The authors'-code reference mode is a class of its own,
:class:`~tfdpmech.mechanisms.pcdbn.reference.PCDBNReference` (claimed, none proven;
``PrivateCDBN(mode="reference")`` is refused naming it); ``PrivateCDBN`` trains the private mode and
the non-private baselines.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from ...accounting.ledger import PrivacyLedger, Release, ledger_or_new
from ...contract import Mechanism, PreparedFit, check_proven_mode, release
from ...noise import make_rng
from ...release_on_fit import release_on_fit
from ...validation import (
    check_budget_split, check_choice, check_epsilon, check_labels, check_positive_int, check_positive_real, check_real,
)
from .conv_rbm import ConvRBM
from .energy import ENERGY_MODES, ChebyshevEnergy, check_domain
from .monomials import MAX_MONOMIALS
from .network_parts import CDBNParts, cdbn_parts
from .reference import PCDBNReference
from .softmax_head import FunctionalSoftmaxHead

__all__ = ["PrivateCDBN"]


class PrivateCDBN(Mechanism):
    """Trains a (p)CDBN layer by layer: ``make_private(model, PrivateCDBN(...))``, ``compile()``, ``fit(x, y)``.

    Args:
        num_classes: C.
        mode: one of :data:`~tfdpmech.mechanisms.pcdbn.energy.ENERGY_MODES`: ``"exact"`` (CDBN),
            ``"noiseless"`` (TCDBN), ``"private"`` (pCDBN, the default); ``"reference"`` is refused with a
            ValueError naming :class:`~tfdpmech.mechanisms.pcdbn.reference.PCDBNReference`.
        epsilon: total ε (private); None for the non-private baselines.
        split: how ε is divided over the components ``crbm_layer_1..`` and ``output_layer`` (one
            per ConvRBM layer of the model, then the head): None (equal fractions), a sequence of
            fractions summing to 1, a dict ``{component: ε}`` summing to ``epsilon``, or ``"same"``
            (every component gets ``epsilon``, the authors' code; the ledger then totals
            ``(#components)·ε``). Its length is checked against the model by ``make_private``.
        fc_scale: the model's frozen random FC layer (if it has one) gets weights
            N(0, (fc_scale/√fan_in)²) and a bias that centres its inputs at ½.
        pretrain_epochs: epochs per CRBM layer.
        batch_size: mini-batch size (private: steps per epoch = ceil(n / batch_size)).
        learning_rate: Adam step size of the CRBM layers.
        head_epochs, head_learning_rate: for the head trained by gradient (exact).
        head_ridge: ρ of the closed-form Taylor head (relative to n).
        head_mechanism, head_delta: the calibration of the functional head's one release: ``"laplace"``
            (pure ε, the paper's) or ``"gaussian"`` with ``head_delta`` (then the pipeline is (ε, δ)-DP;
            the model's head is ``FeatureMap(clip_norm=True)`` then ``Dense(C, use_bias=False)``).
        neg_chains, gibbs_steps, l1: see :class:`~tfdpmech.mechanisms.pcdbn.energy.ChebyshevEnergy`.
        max_monomials: private-mode expansion limit per layer.
        seed: master seed (None: OS entropy).
        ledger: a :class:`~tfdpmech.accounting.ledger.PrivacyLedger` to record into (new if None).

    Raises:
        ValueError / TypeError: unknown mode, ε <= 0, ε missing for a private mode or given for a
            baseline, a split that does not add up.

    Example:
        >>> model = cdbn_network([ConvRBM(8, 5, approx="chebyshev_sigmoid", degree=3)], (28, 28, 1), 10)
        >>> cdbn = PrivateCDBN(num_classes=10, epsilon=2.0, seed=0)
        >>> model = tfdpmech.make_private(model, cdbn)  # doctest: +SKIP
        >>> model.compile(metrics=["accuracy"])  # doctest: +SKIP
        >>> model.fit(x_train, y_train)  # doctest: +SKIP
        >>> print(model.privacy_ledger.summary())  # doctest: +SKIP
    """

    settings = ("mode", "epsilon", "pretrain_epochs", "batch_size", "num_classes")
    paper = "Phan et al. 2016, Private Convolutional Deep Belief Network (pCDBN)"
    described = {"pretrain_epochs": "pretrain_epochs"}
    modes = ENERGY_MODES

    def __init__(self, *, num_classes: int = 10, mode: str = "private", epsilon: float | None = None, split=None,
                 fc_scale: float = 4.0, pretrain_epochs: int = 5, batch_size: int = 128, learning_rate: float = 0.01,
                 head_epochs: int = 10, head_learning_rate: float = 0.01, head_ridge: float = 1e-3,
                 head_mechanism: str = "laplace", head_delta: float | None = None, neg_chains: int = 32,
                 gibbs_steps: int = 1, l1: float = 0.0, max_monomials: int = MAX_MONOMIALS, seed=None,
                 ledger: PrivacyLedger | None = None):
        self.mode = check_proven_mode(type(self), mode, PCDBNReference, ENERGY_MODES)
        self.num_classes = check_positive_int(num_classes, "num_classes", minimum=2)
        self.private = self.mode == "private"
        if self.private:
            if epsilon is None:
                raise ValueError(f"mode={mode!r} needs epsilon > 0 (the total budget)")
            self.epsilon = check_epsilon(epsilon)
            self.split = _check_split(split, self.epsilon)
        else:
            if epsilon is not None or split is not None:
                raise ValueError(f"mode={mode!r} is a non-private baseline; pass epsilon=None and split=None")
            self.epsilon, self.split = None, None
        self.fc_scale = check_positive_real(fc_scale, "fc_scale")
        self.pretrain_epochs = check_positive_int(pretrain_epochs, "pretrain_epochs")
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.learning_rate = check_positive_real(learning_rate, "learning_rate")
        self.head_epochs = check_positive_int(head_epochs, "head_epochs")
        self.head_learning_rate = check_positive_real(head_learning_rate, "head_learning_rate")
        self.head_ridge = check_real(head_ridge, "head_ridge", minimum=0.0)
        self.head_mechanism = check_choice(head_mechanism, "head_mechanism", ("laplace", "gaussian"))
        self.head_delta = head_delta
        if self.private:  # the head's arguments are checked now, before any layer spends budget
            FunctionalSoftmaxHead(self.num_classes, epsilon=self.epsilon, mechanism=head_mechanism, delta=head_delta)
        # checked here, not when the first layer trains: nothing may be refused after budget was spent
        self.neg_chains = check_positive_int(neg_chains, "neg_chains")
        self.gibbs_steps = check_positive_int(gibbs_steps, "gibbs_steps")
        self.l1 = check_real(l1, "l1", minimum=0.0)
        self.max_monomials = check_positive_int(max_monomials, "max_monomials")
        self._rng = make_rng(seed)
        self.ledger = ledger_or_new(ledger)
        self.parts: CDBNParts | None = None  # the model's layers, once make_private gave the model
        self.components: list[str] = []
        self.budget: dict | None = None
        self.objectives: list[ChebyshevEnergy] = []
        self.history: dict = {}
        self.model: keras.Model | None = None

    # -- the model --------------------------------------------------------------------------------
    def private_model(self, model, **options):
        """``model`` (a :func:`cdbn_network`) whose first ``fit(x, y)`` runs Algorithm 1 once.

        ``compile`` takes ``metrics`` (for ``evaluate``: the model outputs logits, the loss is
        categorical cross-entropy on one-hot labels); the optimizers are the mechanism's own.
        ``fit(x, y)`` is one epoch: every layer trains ``pretrain_epochs``, the head once; Keras
        callbacks see that epoch's end.

        Raises:
            TypeError: a model that is not ConvRBM… → Flatten → [sigmoid Dense] → head, or a model
                other than the one this mechanism was given first; an unknown option.
            ValueError: a ``split`` whose length does not match the model's layers.
        """
        self._take(model)
        return release_on_fit(model, self, options, epochs=1, epochs_fix=(
            "one epoch of fit is the whole layer-wise training; set pretrain_epochs and head_epochs on the "
            "PrivateCDBN"))

    def _take(self, model) -> None:
        if self.parts is not None:
            if model is not self.parts.model:
                raise TypeError("model: this PrivateCDBN trains the model it was given first; construct a new "
                                "PrivateCDBN (a new budget) for another model")
            return
        parts = cdbn_parts(model, self.num_classes, self.head_mechanism if self.private else "laplace")
        components = [f"crbm_layer_{i + 1}" for i in range(len(parts.layers))] + ["output_layer"]
        budget = self._split(components) if self.private else {c: None for c in components}
        self.parts, self.components, self.budget = parts, components, budget

    def _split(self, comps) -> dict:
        split = self.split
        if split is None:
            return {c: self.epsilon / len(comps) for c in comps}
        if split == "same":
            return {c: self.epsilon for c in comps}
        if isinstance(split, dict):
            if set(split) != set(comps):
                raise ValueError(f"split must give ε for exactly the model's components {comps}, got {sorted(split)}")
            return {c: split[c] for c in comps}
        if len(split) != len(comps):
            raise ValueError(f"split has {len(split)} fractions for the model's {len(comps)} components {comps}: one "
                             "per ConvRBM layer, then the head")
        return {c: self.epsilon * f for c, f in zip(comps, split)}

    def prepare(self, model=None, x=None, y=None, *, metrics=None, verbose: int = 0) -> PreparedFit:
        """The contract (what ``make_private``'s first ``fit`` calls): ``fit()`` runs Algorithm 1 once.

        Raises:
            TypeError: no model, or a model of another structure (see :meth:`private_model`).
            ValueError: missing data; at ``fit``: epochs other than 1, keywords other than ``verbose``.
        """
        if model is None:
            raise TypeError("model: PrivateCDBN trains a CDBN model: make_private(cdbn_network(layers, input_shape, "
                            "num_classes), PrivateCDBN(...)), then compile() and fit(x, y)")
        self._take(model)
        if x is None or y is None:
            raise ValueError("PrivateCDBN.prepare needs the private images and labels: prepare(model, x, y)")
        x = check_domain(x, self.parts.layers[0].visible_max)
        y = check_labels(y, "y", num_classes=self.num_classes)
        if len(x) != len(y):
            raise ValueError(f"x has {len(x)} records but y has {len(y)}")
        if tuple(x.shape[1:]) != tuple(model.input_shape[1:]):
            raise ValueError(f"x: records of shape {tuple(x.shape[1:])}, but the model takes "
                             f"{tuple(model.input_shape[1:])}")
        prepared = PreparedFit(model, x, y=y, epochs=1)

        def layerwise(epochs, callbacks, **kwargs):
            verbosity = kwargs.pop("verbose", verbose)
            if kwargs:
                raise ValueError(f"PrivateCDBN's layer-wise training takes no {sorted(kwargs)}")
            history = keras.callbacks.History()
            every = keras.callbacks.CallbackList([*callbacks, history], model=model)
            every.on_train_begin()
            every.on_epoch_begin(0)
            logs = self._train(x, y, verbosity)
            model.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True), metrics=metrics)
            every.on_epoch_end(0, logs)
            every.on_train_end(logs)
            return history

        prepared.custom_fit = layerwise
        return prepared

    # -- Algorithm 1 --------------------------------------------------------------------------
    def _train(self, x, y, verbose: int) -> dict:
        """Train every layer and the head once, in the model's own layers (``x``, ``y`` checked by :meth:`prepare`);
        the last epoch's loss of each layer."""
        if self.model is not None:
            raise RuntimeError("this PrivateCDBN already spent its budget; make_private with a new one to train again")
        parts = self.parts
        feats = x
        for i, layer in enumerate(parts.layers):  # step 1: greedy layer-wise training
            name = self.components[i]
            init = self._rng.normal(0.0, 0.1, tuple(layer.kernel.shape))  # seeded, data-independent
            layer.kernel.assign(np.clip(init, -layer.weight_bound, layer.weight_bound).astype(np.float32))
            obj = ChebyshevEnergy(layer, self.mode, epsilon=self.budget[name], seed=int(self._rng.integers(2**31)),
                                  neg_chains=self.neg_chains, gibbs_steps=self.gibbs_steps, l1=self.l1,
                                  max_monomials=self.max_monomials, component=name, ledger=self.ledger)
            self.history[name] = obj.fit(feats, epochs=self.pretrain_epochs, batch_size=self.batch_size,
                                         learning_rate=self.learning_rate, verbose=verbose)
            self.objectives.append(obj)
            feats = _predict(layer, feats)  # step 2: frozen layer + pooling (post-processing)
        del x
        flat = feats.reshape(len(feats), -1)
        if parts.fc is not None:  # step 3: data-independent random projection
            fc, width = parts.fc, flat.shape[1]
            # seeded numpy draw (same on every Keras version), independent of the data
            kernel = self._rng.normal(0.0, self.fc_scale / math.sqrt(width), (width, fc.units))
            fc.set_weights([kernel.astype(np.float32),
                            (-0.5 * kernel.sum(axis=0)).astype(np.float32)])  # centres inputs at the midpoint ½
            fc.trainable = False
            flat = _predict(fc, flat)
            if self.private:
                release(self.ledger, Release("random_fc", "none", 0.0, 0.0, "weights drawn independently of the data "
                                           "and frozen: no release", neighbours="replace_one", protects="record"))
        parts.head.set_weights(self._fit_head(flat, y, verbose).get_weights())  # step 4
        for layer in (*parts.layers, parts.head):
            layer.trainable = False
        self.model = parts.model
        return {f"{name}_loss": float(self.history[name][-1]) for name in self.components[:-1]}

    def _fit_head(self, flat, y, verbose):
        """The head's weights: a functional head's release (private, noiseless) or an exact softmax fit."""
        name, eps = "output_layer", self.budget["output_layer"]
        if self.mode in ("private", "noiseless"):
            head_mode = "functional" if self.mode == "private" else "noiseless"  # the head's own words
            extra = dict(mechanism=self.head_mechanism, delta=self.head_delta) if self.mode == "private" else {}
            head = FunctionalSoftmaxHead(self.num_classes, head_mode, epsilon=eps, ridge=self.head_ridge, **extra,
                                         seed=int(self._rng.integers(2**31)), component=name,
                                         ledger=self.ledger).fit(flat, y)  # recorded in this ledger by the release
            self.head = head
            layer = head.dense_layer()
            return layer.layers[-1] if isinstance(layer, keras.Sequential) else layer  # the Gaussian head's Dense
        dense = keras.layers.Dense(self.num_classes, name="head")
        dense.build((None, flat.shape[1]))
        opt = keras.optimizers.Adam(self.head_learning_rate)
        loss_fn = keras.losses.CategoricalCrossentropy(from_logits=True)  # CDBN (exact): softmax cross-entropy

        @tf.function
        def step(p, yy):
            with tf.GradientTape() as tape:
                loss = loss_fn(yy, dense(p))
            grads = tape.gradient(loss, dense.trainable_variables)
            opt.apply_gradients(zip(grads, dense.trainable_variables))
            return loss

        order = np.random.default_rng(int(self._rng.integers(2**31)))
        bs = min(self.batch_size, len(flat))
        for epoch in range(self.head_epochs):
            perm = order.permutation(len(flat))
            losses = [float(step(tf.constant(flat[perm[i:i + bs]]), tf.constant(y[perm[i:i + bs]])))
                      for i in range(0, len(flat) - bs + 1, bs)]
            if verbose:
                print(f"[head] epoch {epoch + 1}/{self.head_epochs} loss {np.mean(losses):.5g}")
        return dense

    # -- reporting ----------------------------------------------------------------------------
    def epsilon_claimed(self) -> float | None:
        """Total claimed ε (None for the non-private baselines)."""
        return self.ledger.epsilon_claimed() if self.private else None

    def epsilon_provable(self) -> float | None:
        """Total provable ε, or None (non-private baseline)."""
        return self.ledger.epsilon_provable() if self.private else None

    def report(self) -> dict:
        """Mode, budget split, claimed and provable ε, and the ledger."""
        return {"mode": self.mode, "private": self.private, "budget": self.budget,
                "epsilon_claimed": self.epsilon_claimed(), "epsilon_provable": self.epsilon_provable(),
                "ledger": self.ledger.to_dict() if self.private else None,
                "note": None if self.private else "non-private baseline: trained on raw data, no DP guarantee"}


def _check_split(split, epsilon):
    """``split`` checked without the model: its length (the model's ConvRBM layers + 1) is checked by ``make_private``."""
    if split is None:
        return None
    if isinstance(split, str):
        return check_choice(split, "split", ("same",))
    if isinstance(split, dict):
        return check_budget_split(epsilon, dict(split))
    try:
        fractions = tuple(float(f) for f in split)
    except (TypeError, ValueError):
        raise TypeError(f"split must be None, 'same', a dict {{component: ε}} or a sequence of fractions, got "
                        f"{split!r}") from None
    if any(not f > 0 for f in fractions) or not math.isclose(sum(fractions), 1.0, rel_tol=1e-9):
        raise ValueError(f"the ε split does not add up: fractions {list(fractions)} must be > 0 and sum to 1 "
                         f"(they sum to {sum(fractions):g})")
    return fractions


def _predict(layer, x, batch: int = 512) -> np.ndarray:
    return np.concatenate([np.asarray(layer(tf.constant(x[i:i + batch]))) for i in range(0, len(x), batch)])
