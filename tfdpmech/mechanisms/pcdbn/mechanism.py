"""pCDBN: a private convolutional deep belief network trained layer by layer (Phan, Wu, Dou 2017).

"Preserving Differential Privacy in Convolutional Deep Belief Networks", Machine Learning 2017
(corrected version, arXiv:1706.08839). What the paper claims, what we prove and why:
``docs/mechanisms/pcdbn.md``.

Algorithm 1, as steps of :meth:`PrivateCDBN.fit`:

1. For each CRBM layer ℓ (greedy, Bengio et al. 2007): map the training data through the frozen
   layers 1..ℓ−1 (sigmoid + pooling; inference only) and build the layer's objective
   (:class:`~tfdpmech.mechanisms.pcdbn.energy.ChebyshevEnergy`): σ replaced by the degree-L
   surrogate σ̂(a/Z) (Eqs. 12–14), coefficients perturbed once with ``Lap(Δ_ℓ/ε_ℓ)`` (Lemmas 1–2,
   with a constant Z and Δ from the data domain), then trained for ``pretrain_epochs`` on the
   data-free objective.
2. Pooling after every hidden layer (post-processing, no budget).
3. Optional frozen random fully connected layer (``fc_units``; data-independent, so free: §4.2's
   MNIST network has an FC-25 layer whose privacy the paper does not address).
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
from typing import Sequence

import keras
import numpy as np
import tensorflow as tf

from ...accounting.ledger import PrivacyLedger, Release, ledger_or_new
from ...contract import Mechanism, PreparedFit, check_proven_mode, refuse_model, release
from .conv_rbm import ConvRBM
from .softmax_head import FunctionalSoftmaxHead
from ...noise import make_rng
from ...validation import (
    check_budget_split, check_choice, check_epsilon, check_labels, check_positive_int, check_positive_real, check_real,
)
from .energy import ENERGY_MODES, ChebyshevEnergy, check_domain
from .monomials import MAX_MONOMIALS
from .reference import PCDBNReference

__all__ = ["PrivateCDBN"]


class PrivateCDBN(Mechanism):
    """Builder that trains a (p)CDBN layer by layer and returns an ordinary Keras model.

    Args:
        layers: unbuilt :class:`~tfdpmech.layers.ConvRBM` layers, bottom first (required).
        num_classes: C.
        mode: one of :data:`~tfdpmech.mechanisms.pcdbn.energy.ENERGY_MODES`: ``"exact"`` (CDBN),
            ``"noiseless"`` (TCDBN), ``"private"`` (pCDBN, the default); ``"reference"`` is refused with a
            ValueError naming :class:`~tfdpmech.mechanisms.pcdbn.reference.PCDBNReference`.
        epsilon: total ε (private); None for the non-private baselines.
        split: how ε is divided over the components ``crbm_layer_1..`` and ``output_layer``:
            None (equal fractions), a sequence of fractions summing to 1, a dict ``{component: ε}``
            summing to ``epsilon``, or ``"same"`` (every component gets ``epsilon``, the authors'
            code; the ledger then totals ``(#components)·ε``).
        fc_units: width of a frozen random sigmoid layer before the head (None: head on the
            pooled conv features). Data-independent, so it costs no budget.
        fc_scale: its weights are N(0, (fc_scale/√fan_in)²); its bias centres inputs at ½.
        pretrain_epochs: epochs per CRBM layer.
        batch_size: mini-batch size (private: steps per epoch = ceil(n / batch_size)).
        learning_rate: Adam step size of the CRBM layers.
        head_epochs, head_learning_rate: for the head trained by gradient (exact).
        head_ridge: ρ of the closed-form Taylor head (relative to n).
        head_mechanism, head_delta: the calibration of the functional head's one release: ``"laplace"``
            (pure ε, the paper's) or ``"gaussian"`` with ``head_delta`` (then the pipeline is (ε, δ)-DP).
        neg_chains, gibbs_steps, l1: see :class:`~tfdpmech.mechanisms.pcdbn.energy.ChebyshevEnergy`.
        max_monomials: private-mode expansion limit per layer.
        seed: master seed (None: OS entropy).
        ledger: a :class:`~tfdpmech.accounting.ledger.PrivacyLedger` to record into (new if None).

    Raises:
        ValueError / TypeError: empty or non-ConvRBM layers, unknown mode, ε <= 0, ε missing for a
            private mode or given for a baseline, a split that does not add up.

    Example:
        >>> cdbn = PrivateCDBN([ConvRBM(8, 5, degree=3)], mode="private", epsilon=2.0, seed=0)
        >>> model = cdbn.fit(x_train, y_train)  # doctest: +SKIP
        >>> print(cdbn.ledger.summary())  # doctest: +SKIP
    """

    settings = ("mode", "epsilon", "pretrain_epochs", "batch_size", "num_classes")
    paper = "Phan et al. 2016, Private Convolutional Deep Belief Network (pCDBN)"
    described = {"pretrain_epochs": "pretrain_epochs"}
    modes = ENERGY_MODES

    def __init__(self, layers: Sequence[ConvRBM] | None = None, *, num_classes: int = 10, mode: str = "private",
                 epsilon: float | None = None, split=None, fc_units: int | None = None, fc_scale: float = 4.0, pretrain_epochs: int = 5,
                 batch_size: int = 128, learning_rate: float = 0.01, head_epochs: int = 10,
                 head_learning_rate: float = 0.01, head_ridge: float = 1e-3, head_mechanism: str = "laplace",
                 head_delta: float | None = None, neg_chains: int = 32,
                 gibbs_steps: int = 1, l1: float = 0.0, max_monomials: int = MAX_MONOMIALS, seed=None,
                 ledger: PrivacyLedger | None = None):
        mode = check_proven_mode(type(self), mode, PCDBNReference, ENERGY_MODES)
        layers = list(layers or ())
        if not layers or not all(isinstance(l, ConvRBM) for l in layers):
            raise TypeError("layers must be a non-empty list of tfdpmech ConvRBM layers")
        self.layers = layers
        self.num_classes = check_positive_int(num_classes, "num_classes", minimum=2)
        self.mode = mode
        self.private = self.mode == "private"
        self.components = [f"crbm_layer_{i + 1}" for i in range(len(layers))] + ["output_layer"]
        if self.private:
            if epsilon is None:
                raise ValueError(f"mode={mode!r} needs epsilon > 0 (the total budget)")
            self.epsilon = check_epsilon(epsilon)
            self.budget = self._split(split)
        else:
            if epsilon is not None or split is not None:
                raise ValueError(f"mode={mode!r} is a non-private baseline; pass epsilon=None and split=None")
            self.epsilon, self.budget = None, {c: None for c in self.components}
        self.fc_units = None if fc_units is None else check_positive_int(fc_units, "fc_units")
        self.fc_scale = check_positive_real(fc_scale, "fc_scale")
        self.pretrain_epochs = check_positive_int(pretrain_epochs, "pretrain_epochs")
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.learning_rate = check_positive_real(learning_rate, "learning_rate")
        self.head_epochs = check_positive_int(head_epochs, "head_epochs")
        self.head_learning_rate = check_positive_real(head_learning_rate, "head_learning_rate")
        self.head_ridge = check_real(head_ridge, "head_ridge", minimum=0.0)
        self.head_mechanism, self.head_delta = head_mechanism, head_delta
        if self.mode == "private":  # the head's arguments are checked now, before any layer spends budget
            FunctionalSoftmaxHead(self.num_classes, epsilon=self.budget["output_layer"], mechanism=head_mechanism,
                                  delta=head_delta)
        # checked here, not when the first layer trains: nothing may be refused after budget was spent
        self.neg_chains = check_positive_int(neg_chains, "neg_chains")
        self.gibbs_steps = check_positive_int(gibbs_steps, "gibbs_steps")
        self.l1 = check_real(l1, "l1", minimum=0.0)
        self.max_monomials = check_positive_int(max_monomials, "max_monomials")
        self._rng = make_rng(seed)
        self.ledger = ledger_or_new(ledger)
        self.objectives: list[ChebyshevEnergy] = []
        self.history: dict = {}
        self.model: keras.Model | None = None

    def _split(self, split) -> dict:
        comps = self.components
        if split is None:
            return {c: self.epsilon / len(comps) for c in comps}
        if isinstance(split, str):
            check_choice(split, "split", ("same",))
            return {c: self.epsilon for c in comps}
        if isinstance(split, dict):
            unknown = set(split) - set(comps)
            if unknown or set(split) != set(comps):
                raise ValueError(f"split must give ε for exactly the components {comps}, got {sorted(split)}")
            return check_budget_split(self.epsilon, {c: split[c] for c in comps})
        fractions = [float(f) for f in split]
        if len(fractions) != len(comps):
            raise ValueError(f"split has {len(fractions)} fractions for {len(comps)} components {comps}")
        if any(not f > 0 for f in fractions) or not math.isclose(sum(fractions), 1.0, rel_tol=1e-9):
            raise ValueError(f"the ε split does not add up: fractions {fractions} must be > 0 and sum to 1 "
                             f"(they sum to {sum(fractions):g})")
        return {c: self.epsilon * f for c, f in zip(comps, fractions)}

    # -- Algorithm 1 --------------------------------------------------------------------------
    def fit(self, x, y, *, verbose: int = 0) -> keras.Model:
        """Train every layer and the head once; return a Keras model of logits for inference.

        Args:
            x: all private training images in [0, 1], NHWC.
            y: one-hot or integer labels.
            verbose: 1 prints per-epoch losses.

        Returns:
            ``keras.Sequential``: Input → ConvRBM… → Flatten → [frozen FC] → Dense(C) logits.

        Raises:
            RuntimeError: called twice (the budget is spent).
            ValueError: images outside [0, 1], bad labels, a layer too large for the private mode.
        """
        if self.model is not None:
            raise RuntimeError("this PrivateCDBN already spent its budget; create a new one to train again")
        x = check_domain(x, self.layers[0].visible_max)
        y = check_labels(y, "y", num_classes=self.num_classes)
        if len(x) != len(y):
            raise ValueError(f"x has {len(x)} records but y has {len(y)}")
        inputs, feats = x, x
        for i, layer in enumerate(self.layers):  # step 1: greedy layer-wise training
            name = self.components[i]
            if not layer.built:
                layer.build((None,) + feats.shape[1:])
            init = self._rng.normal(0.0, 0.1, tuple(layer.kernel.shape))  # seeded, data-independent
            layer.kernel.assign(np.clip(init, -layer.weight_bound, layer.weight_bound).astype(np.float32))
            obj = ChebyshevEnergy(layer, self.mode, epsilon=self.budget[name], seed=int(self._rng.integers(2**31)),
                                  neg_chains=self.neg_chains, gibbs_steps=self.gibbs_steps, l1=self.l1,
                                  max_monomials=self.max_monomials, component=name)
            self.history[name] = obj.fit(feats, epochs=self.pretrain_epochs, batch_size=self.batch_size,
                                         learning_rate=self.learning_rate, verbose=verbose)
            if obj.release is not None:
                release(self.ledger, obj.release)
            self.objectives.append(obj)
            feats = _predict(layer, feats)  # step 2: frozen layer + pooling (post-processing)
        del x, inputs
        extra = []
        flat = feats.reshape(len(feats), -1)
        if self.fc_units is not None:  # step 3: data-independent random projection
            fc = keras.layers.Dense(self.fc_units, activation="sigmoid", name="random_fc")
            fc.build((None, flat.shape[1]))
            # seeded numpy draw (same on every Keras version), independent of the data
            kernel = self._rng.normal(0.0, self.fc_scale / math.sqrt(flat.shape[1]), (flat.shape[1], self.fc_units))
            fc.set_weights([kernel.astype(np.float32),
                            (-0.5 * kernel.sum(axis=0)).astype(np.float32)])  # centres inputs at the midpoint ½
            fc.trainable = False
            extra.append(fc)
            flat = _predict(fc, flat)
            if self.private:
                release(self.ledger, Release("random_fc", "none", 0.0, 0.0, "weights drawn independently of the data "
                                           "and frozen: no release", neighbours="replace_one", protects="record"))
        head = self._fit_head(flat, y, verbose)  # step 4
        model = keras.Sequential([keras.Input(self.layers[0].visible_hw + (self.layers[0].in_channels,)),
                                  *self.layers, keras.layers.Flatten(), *extra, head], name=f"cdbn_{self.mode}")
        for layer in self.layers:
            layer.trainable = False
        self.model = model
        return model

    def _fit_head(self, flat, y, verbose):
        name, eps = "output_layer", self.budget["output_layer"]
        if self.mode in ("private", "noiseless"):
            head_mode = "functional" if self.mode == "private" else "noiseless"  # the head's own words
            extra = dict(mechanism=self.head_mechanism, delta=self.head_delta) if self.mode == "private" else {}
            head = FunctionalSoftmaxHead(self.num_classes, head_mode, epsilon=eps, ridge=self.head_ridge, **extra,
                                         seed=int(self._rng.integers(2**31)), component=name).fit(flat, y)
            if head.release is not None:
                release(self.ledger, head.release)
            self.head = head
            return head.dense_layer()
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
        dense.trainable = False
        return dense

    def prepare(self, model=None, x=None, y=None, *, verbose: int = 0) -> PreparedFit:
        """The contract: ``fit()`` trains every layer (``pretrain_epochs`` each) and the head, once.

        Raises:
            ValueError: a ``model`` (the network is the layers given to the constructor), missing
                data, epochs other than ``pretrain_epochs``, or Keras callbacks (the layer-wise
                training has its own loop).
        """
        refuse_model(self, model)
        if x is None or y is None:
            raise ValueError("PrivateCDBN.prepare needs the private images and labels: prepare(x=..., y=...)")
        prepared = PreparedFit(None, x, y=y, epochs=self.pretrain_epochs, takes_callbacks=False)

        def layerwise(epochs, callbacks, **kwargs):
            if callbacks:
                raise ValueError("PrivateCDBN trains layer by layer with its own loop and takes no Keras callbacks; "
                                 "its ledger holds every release")
            prepared.model = self.fit(x, y, verbose=kwargs.pop("verbose", verbose))
            if kwargs:
                raise ValueError(f"PrivateCDBN's layer-wise training takes no {sorted(kwargs)}")
            return prepared.model

        prepared.custom_fit = layerwise
        return prepared

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


def _predict(layer, x, batch: int = 512) -> np.ndarray:
    return np.concatenate([np.asarray(layer(tf.constant(x[i:i + batch]))) for i in range(0, len(x), batch)])
