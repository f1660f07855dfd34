"""AdLM and ILM as the authors' public code runs them: the ``"reference"`` mode.

Phan, Wu, Hu, Dou, "Adaptive Laplace Mechanism: Differential Privacy Preservation in Deep
Learning", ICDM'17 (correction version, arXiv:1709.05750). The paper states Algorithm 1 with
noise injected once, per record, before training, and claims ``ε1 + ε2 + ε3`` (Theorem 1). The
authors' public MNIST code (``haiphanNJIT/PrivateDeepLearning`` at ``77fb357``,
``AdLM/MNIST/AdLM.py`` and ``dpLRP_MNIST.py``) trains differently, and that code produced the
paper's curves. This module re-implements that code path: :mod:`.reference_steps` holds one small function
per step, each naming the source line it mirrors; :class:`AdLMReference` runs them in order.

Privacy: the ledger records the paper's ε as *claimed* and **none proven**: the labels reach the
trained network without noise at every step, and the input noise is one draw shared by the whole
batch (and redrawn each step), so no per-record guarantee follows. Use
:class:`tfdpmech.mechanisms.AdLM` (the ``"private"`` mode) for a proven per-record bound.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from ...accounting.ledger import PrivacyLedger, Release, ledger_or_new
from ...contract import Mechanism, PreparedFit, refuse_model, release
from ...noise import make_rng
from ...released_data import array_fingerprint
from .allocation import BudgetAllocation
from .networks import authors_mnist_network
from ...validation import (
    check_batch_size,
    check_budget_split,
    check_epsilon,
    check_one_hot,
    check_positive_int,
    check_positive_real,
    check_step_count,
    check_unit_interval,
)
from . import reference_steps
from .reference_loop import train_steps
from .reference_steps import (
    DELTA2_MNIST,
    LEARNING_RATE,
    NOISY_INPUT_CLIP,
    RELEVANCE_D,
    RELEVANCE_SAMPLES,
    R_LOWERBOUND,
    averaged_relevance,
    budget_ratios_on_grid,
    draw_noise_map,
    draw_weight_noise,
    inner_crop,
    input_noise_scales,
    loss_sensitivity_code,
    next_batch_indices,
    pad_to_grid,
    perturb_inputs,
    private_sharpened_relevance,
    reference_loss,
    reference_optimizer,
    relevance_noise_scale,
    sharpen,
    taylor_terms,
    to_code_range,
    train_relevance_model,
)

__all__ = ["AdLMReference", "ILMReference", "CODE_PATH", "REFERENCE_REASON", *reference_steps.__all__]

CODE_PATH = "authors' code path (haiphanNJIT/PrivateDeepLearning@77fb357, AdLM/MNIST/AdLM.py)"
REFERENCE_REASON = "labels used without noise at every step; noise shared by the batch"


# ------------------------------------------------------------------------------------------------
# The mode
# ------------------------------------------------------------------------------------------------
class AdLMReference(Mechanism):
    """AdLM as the authors' MNIST code trains it (the reference mode); ledger: claimed, none proven.

    Args:
        eps1, eps2, eps3: the budgets the code assigns (its MNIST run: 0.075, 0.075, 0.15).
        batch_size: L, the batch size and the divisor of the noise scales (the code: 1,800).
        epsilon: optional total; must equal ``eps1 + eps2 + eps3``.
        allocation: ``"relevance"`` (AdLM: sharpened relevance on the 32×32 grid),
            ``"uniform"`` (ILM, ``generateIdLMNoise``) or a
            :class:`~tfdpmech.mechanisms.adlm.allocation.BudgetAllocation` giving β on the 28×28 inputs.
        delta2: Δ2 of the first layer (the code's 9,800 for the MNIST network).
        hidden_units: |h| of FC-25; Δ3 follows from it.
        learning_rate: Adam's step (the code: 3e-4).
        seed: seeds the weights, the relevance sample, the once-drawn noise, the batch order
            and the per-step noise generator; None uses OS entropy.
        ledger: a :class:`~tfdpmech.accounting.ledger.PrivacyLedger` to record into.

    Example:
        >>> ref = AdLMReference.from_total(0.3, batch_size=1000, seed=0)           # doctest: +SKIP
        >>> ref.fit_relevance(train_relevance_model(x_pub, y_pub), x_priv)        # doctest: +SKIP
        >>> hist = ref.fit(x_priv, y_priv, steps=3000, x_test=x_te, y_test=y_te)  # doctest: +SKIP
    """

    settings = ("mode", "eps1", "eps2", "eps3", "batch_size")
    name = "adlm"
    paper = "Phan et al. 2017, Adaptive Laplace Mechanism (ICDM): the authors' MNIST code"
    mode = "reference"
    modes = ("reference",)

    def __init__(self, eps1, eps2, eps3, batch_size, *, epsilon=None, allocation="relevance",
                 delta2: float = DELTA2_MNIST, hidden_units: int = 25, learning_rate: float = LEARNING_RATE,
                 seed: int | None = None, ledger: PrivacyLedger | None = None):
        parts = {"eps2": eps2, "eps3": eps3}
        if allocation == "relevance" or eps1 is not None:
            parts = {"eps1": eps1, **parts}
        split = check_budget_split(epsilon, parts)
        self.eps1 = split.get("eps1")
        self.eps2, self.eps3 = split["eps2"], split["eps3"]
        self.batch_size = check_batch_size(batch_size)
        if not (isinstance(allocation, BudgetAllocation) or allocation in ("relevance", "uniform")):
            raise ValueError(f"allocation must be 'relevance', 'uniform' or a BudgetAllocation, got {allocation!r}")
        self.allocation = allocation
        self.delta2 = check_positive_real(delta2, "delta2")
        self.hidden_units = check_positive_int(hidden_units, "hidden_units")
        self.learning_rate = check_positive_real(learning_rate, "learning_rate")
        self.seed = seed
        self._rng = make_rng(seed)
        self.ledger = ledger_or_new(ledger)
        self.beta: np.ndarray | None = None
        self.relevance: np.ndarray | None = None
        self.relevance_details: dict = {}
        self.model: keras.Model | None = None
        self.history: dict = {"step": [], "accuracy": [], "loss": []}
        self._fitted = False

    @classmethod
    def from_total(cls, epsilon, batch_size, *, split=(0.25, 0.25, 0.5), **kwargs):
        """Split a total ε as the code does: ε1 : ε2 : ε3 = 1 : 1 : 2 (``AdLM.py:98-100``)."""
        epsilon = check_epsilon(epsilon)
        if len(split) != 3 or not math.isclose(sum(split), 1.0) or min(split) <= 0:
            raise ValueError(f"split must be three positive fractions summing to 1, got {split!r}")
        return cls(*(epsilon * s for s in split), batch_size, epsilon=epsilon, **kwargs)

    # -- step 2/3 ---------------------------------------------------------------------------
    def fit_relevance(self, relevance_model, x_private01, *, samples: int = RELEVANCE_SAMPLES,
                      start: str = "all_logits") -> np.ndarray:
        """Relevance on the 32×32 grid, sharpened and noised as ``dpLRP_MNIST.py`` does; returns the 28×28 β.

        Args:
            relevance_model: a model on 32×32 inputs in [−1, 1] (see :func:`train_relevance_model`),
                trained on public data.
            x_private01: the private training images in [0, 1], shape (n, 28, 28, 1).
            samples: how many of them LRP averages over (the code: 2,000).
            start: LRP seed (the code: all outputs; see :func:`averaged_relevance`).
        """
        if self.allocation != "relevance":
            raise ValueError("fit_relevance applies to allocation='relevance' only (ILM and a given "
                             "BudgetAllocation need no relevance step)")
        x = check_unit_interval(x_private01, "x_private")
        n = len(x)
        avg = averaged_relevance(relevance_model, pad_to_grid(to_code_range(x)), samples=samples, rng=self._rng,
                                 start=start)
        r_noisy, noise = private_sharpened_relevance(avg, self.eps1, n, self._rng)
        self.relevance = r_noisy
        self.beta = inner_crop(budget_ratios_on_grid(r_noisy))
        floor = int(np.sum(self.beta <= R_LOWERBOUND))
        self.relevance_details = {"n": n, "samples": min(samples, n), "lrp_start": start, "noise_scale": relevance_noise_scale(self.eps1, n),
                                  "pixels_at_floor": floor, "beta_sum_inner": float(self.beta.sum()),
                                  "noise_fingerprint": array_fingerprint(noise)}
        release(self.ledger, Release(
            component="relevance", mechanism="laplace", epsilon_claimed=self.eps1, epsilon_provable=None,
            neighbours="replace_one", protects="record",
            basis=(f"none proven ({CODE_PATH}): {REFERENCE_REASON}; in this step the sharpening "
                   "((R-min)/(max-min))^4 uses the data's min and max before the noise, and the scale 2d/(eps1*|D|) "
                   f"divides by the training-set size while the mean is over {min(samples, n)} records"),
            sensitivity=2.0 * RELEVANCE_D / n, noise_scale=relevance_noise_scale(self.eps1, n), reproduction=True,
            details=dict(self.relevance_details),
        ))
        return self.beta

    def ratios(self, feature_hw=(28, 28)) -> np.ndarray:
        """The β map the input noise uses (H, W)."""
        if isinstance(self.allocation, BudgetAllocation):
            return np.asarray(self.allocation.ratios(tuple(feature_hw) + (1,)))[..., 0]
        if self.allocation == "uniform":
            return np.ones(tuple(feature_hw))  # AdLM.py:62-66 generateIdLMNoise: the same scale everywhere
        if self.beta is None:
            raise ValueError("call fit_relevance(relevance_model, x_private) before fit(); AdLM's noise needs β")
        return self.beta

    # -- steps 4-7 --------------------------------------------------------------------------
    def build(self, num_classes: int = 10, input_shape=(28, 28, 1)) -> keras.Model:
        """Build the network, the optimiser, the once-drawn weight noise and the per-step generator."""
        seed = None if self.seed is None else int(self._rng.integers(2**31 - 8))
        self.model = authors_mnist_network(num_classes, self.hidden_units, seed=seed, input_shape=input_shape)
        self.num_classes = num_classes
        self.optimizer = reference_optimizer(self.learning_rate)
        self.delta3 = loss_sensitivity_code(num_classes, self.hidden_units)
        self.weight_noise = draw_weight_noise(self.delta3, self.eps3, self.hidden_units, num_classes, self._rng)
        self.generator = (tf.random.Generator.from_seed(int(self._rng.integers(2**31)))
                          if self.seed is not None else tf.random.Generator.from_non_deterministic_state())
        self.scales = input_noise_scales(self.ratios(input_shape[:2]), self.delta2, self.eps2, self.batch_size)
        self._scales_tf = tf.constant(self.scales, tf.float32)
        self._noise_tf = tf.constant(self.weight_noise, tf.float32)
        self._draw = tf.function(lambda: draw_noise_map(self._scales_tf, self.generator))
        self._step = tf.function(self._train_step)
        return self.model

    def _train_step(self, x, y):
        noise = draw_noise_map(self._scales_tf, self.generator)  # one map per step, shared by the batch
        x_bar = perturb_inputs(x, noise)
        w_out = self.model.get_layer("w_out").kernel
        with tf.GradientTape() as tape:
            z = self.model(x_bar, training=True)
            loss = reference_loss(z, y, w_out, self._noise_tf, self.batch_size)
        variables = self.model.trainable_variables
        grads = tape.gradient(loss, variables)
        self.optimizer.apply_gradients(zip(grads, variables))
        return loss

    def predict_logits(self, x01) -> np.ndarray:
        """Logits on clean inputs, all records in **one** batch (batch norm uses their statistics)."""
        if self.model is None:
            raise ValueError("the model is not built; call fit() first")
        x = perturb_inputs(to_code_range(check_unit_interval(x01, "x")), 0.0)  # AdLM.py:288-289: zero noise map
        return np.asarray(self.model(x, training=False))

    def predict_proba(self, x01) -> np.ndarray:
        """Softmax of :meth:`predict_logits` (for the reports; prediction is the argmax)."""
        return tf.nn.softmax(self.predict_logits(x01)).numpy()

    def evaluate(self, x01, y) -> float:
        """Accuracy on clean inputs in one batch (``AdLM.py:276-277, 289``)."""
        y = check_one_hot(y, "y")
        return float(np.mean(np.argmax(self.predict_logits(x01), 1) == np.argmax(y, 1)))

    def _record_training(self, n: int) -> None:
        common = {"code_path": CODE_PATH, "batch_size": self.batch_size, "n": n, "noise": "one map per step, "
                  "shared by the batch, redrawn every step", "allocation": self._allocation_name()}
        release(self.ledger, Release(
            component="first_layer_inputs", mechanism="laplace", epsilon_claimed=self.eps2, epsilon_provable=None,
            neighbours="replace_one", protects="record",
            basis=(f"none proven ({CODE_PATH}): {REFERENCE_REASON}; a fresh map each step (the draws compose over "
                   "steps), then clipped to [-10, 10]; the map only bounds the batch sum"),
            sensitivity=self.delta2, noise_scale=float(np.min(self.scales)), reproduction=True,
            details={**common, "scale_min": float(np.min(self.scales)), "scale_median": float(np.median(self.scales)),
                     "scale_max": float(np.max(self.scales)), "clip": NOISY_INPUT_CLIP},
        ))
        release(self.ledger, Release(
            component="loss_coefficients", mechanism="laplace", epsilon_claimed=self.eps3, epsilon_provable=None,
            neighbours="replace_one", protects="record",
            basis=(f"none proven ({CODE_PATH}): {REFERENCE_REASON}; the once-drawn noise N/L only enters through "
                   "-B*M*sum(N/L*W_out), the Taylor loss itself uses the clean labels"),
            sensitivity=self.delta3, noise_scale=self.delta3 / self.eps3, reproduction=True,
            details={**common, "noise_fingerprint": array_fingerprint(self.weight_noise)},
        ))

    def _allocation_name(self) -> str:
        if isinstance(self.allocation, BudgetAllocation):
            return self.allocation.name
        return self.allocation

    def prepare(self, model=None, x=None, y=None, *, relevance_model=None, steps=None, **fit_options) -> PreparedFit:
        """The contract: relevance (when the allocation needs it), then ``fit()`` runs
        ``epochs · (n // batch_size)`` steps of the authors' loop on the network it builds; with ``steps``,
        it runs those steps with ``fit_options`` (``eval_every``, ``x_test``/``y_test``, ``x_val``/``y_val``,
        ``state_path``, ``verbose``: see :meth:`fit`), whatever the epochs.

        Raises:
            ValueError: a ``model`` (this path trains the authors' network), ``steps`` or ``eval_every`` not
                an integer >= 1, the relevance allocation without ``relevance_model`` (all before any budget
                is spent), bad data.
        """
        refuse_model(self, model)
        if steps is not None:  # checked before the relevance step spends eps1
            steps = check_step_count(steps, "steps", "the authors' code trains 80,001; pass e.g. steps=8000")
            check_step_count(fit_options.get("eval_every", 250), "eval_every", "pass e.g. eval_every=500")
        x = check_unit_interval(x, "x")
        if self.allocation == "relevance" and self.beta is None:
            if relevance_model is None:
                raise ValueError("the relevance allocation needs relevance_model= (trained on public data only, see "
                                 "train_relevance_model), or call fit_relevance() first")
            self.fit_relevance(relevance_model, x)
        per_epoch = self.steps_per_epoch = len(x) // self.batch_size

        prepared = PreparedFit(None, x, y=y, epochs=None if steps is None else 1)

        def authors_loop(epochs, callbacks, **kwargs):
            if steps is None:
                history = self.fit(x, y, steps=epochs * per_epoch, callbacks=callbacks, steps_per_epoch=per_epoch,
                                   **kwargs)
            else:  # the run counts steps and evaluates itself: one "epoch"
                history = self.fit(x, y, steps=steps, **{**fit_options, **kwargs})
            prepared.model = self.model
            return history

        prepared.custom_fit = authors_loop
        return prepared

    def describe(self) -> dict:
        """The code path, batch size, steps per epoch (after :meth:`prepare`) and the relevance step's scalars."""
        facts = {"code_path": CODE_PATH, "batch_size": self.batch_size}
        if getattr(self, "steps_per_epoch", None) is not None:
            facts["steps_per_epoch"] = self.steps_per_epoch
        facts.update({k: v for k, v in self.relevance_details.items() if isinstance(v, (int, float, str))})
        return facts

    def fit(self, x01, y, *, steps: int, x_test=None, y_test=None, eval_every: int = 250, x_val=None, y_val=None,
            state_path=None, callback=None, callbacks=(), steps_per_epoch: int | None = None, verbose: int = 0) -> dict:
        """Train for ``steps`` steps on the private data; optionally evaluate every ``eval_every`` steps.

        Args:
            x01: private training images in [0, 1], shape (n, 28, 28, 1), n >= batch_size.
            y: their one-hot labels.
            steps: optimiser steps (the code: 80,001).
            x_test, y_test: if given, test accuracy is logged at step 0, every ``eval_every`` steps
                and at the end (``AdLM.py:285-294``).
            x_val, y_val: if given (with the test set), the validation accuracy is logged beside it.
            state_path: a ``.npz`` file: the run is saved there every ``eval_every`` steps and at the end,
                and continues from it when it exists (:mod:`.reference_state`; ``seed`` must be set).
            callback: optional ``callback(step, accuracy, loss)`` after each evaluation (and its save).
            callbacks: Keras callbacks whose ``on_epoch_begin``/``on_epoch_end`` are called every
                ``steps_per_epoch`` steps (default: ``n // batch_size``, one pass).

        Returns:
            ``{"step": [...], "accuracy": [...], "loss": [...], "seconds": float, ...}``
            (:func:`~.reference_loop.train_steps`).

        Raises:
            ValueError: bad data, ``steps`` or ``eval_every`` not an integer >= 1, fewer records than one
                batch, missing relevance, a second call (the budget is spent), a state saved with other
                settings or past ``steps``, or a state without a seed.
        """
        if self._fitted:
            raise ValueError("this reference run already spent its budget; create a new one to train again")
        steps = check_step_count(steps, "steps", "the authors' code trains 80,001 steps; pass e.g. steps=8000")
        eval_every = check_step_count(eval_every, "eval_every", "pass the steps between evaluations, e.g. 500")
        x = check_unit_interval(x01, "x")
        if x.ndim != 4 or x.shape[-1] != 1:
            raise ValueError(f"x must be grey images of shape (n, 28, 28, 1) (the authors' MNIST code path), got "
                             f"shape {x.shape}")
        y = check_one_hot(y, "y")
        if len(x) != len(y):
            raise ValueError(f"x has {len(x)} records but y has {len(y)}")
        check_batch_size(self.batch_size, "batch_size", n=len(x))
        if state_path is not None and self.seed is None:
            raise ValueError("state_path needs seed=: a resumed run draws its once-only noise again from the seed")
        per_epoch = check_positive_int(steps_per_epoch or max(len(x) // self.batch_size, 1), "steps_per_epoch")
        return train_steps(self, x, y, steps=steps, eval_every=eval_every, x_test=x_test, y_test=y_test,
                           x_val=x_val, y_val=y_val, state_path=state_path, callback=callback, callbacks=callbacks,
                           per_epoch=per_epoch, verbose=verbose)

    def report(self) -> dict:
        """Mode, claimed and provable ε, the relevance facts and the ledger."""
        return {"mechanism": self.name, "mode": self.mode, "code_path": CODE_PATH,
                "epsilon_claimed": self.ledger.epsilon_claimed(), "epsilon_provable": self.ledger.epsilon_provable(),
                "relevance": self.relevance_details, "ledger": self.ledger.to_dict()}


class ILMReference(AdLMReference):
    """ILM (AdLM App. C) on the authors' code path: the same scale ``Δ2/(ε2·L)`` on every pixel.

    No relevance step, so ε1 is not spent and the claimed total is ``ε2 + ε3``.
    """

    name = "ilm"

    def __init__(self, eps2, eps3, batch_size, **kwargs):
        kwargs.setdefault("allocation", "uniform")
        super().__init__(None, eps2, eps3, batch_size, **kwargs)

    @classmethod
    def from_total(cls, epsilon, batch_size, *, split=(0.25, 0.25, 0.5), **kwargs):
        """ILM with the ε2, ε3 that :meth:`AdLMReference.from_total` would use (ε1 unspent)."""
        epsilon = check_epsilon(epsilon)
        return cls(epsilon * split[1], epsilon * split[2], batch_size, **kwargs)
