"""DP-ERM training recipe in Keras: projected full-batch gradient descent for exactly T steps.

The recipe of Kang et al. 2020 (Algorithm 1, lines 6–10: T full-batch gradient steps from θ_0 = 0):

* The models: :func:`tfdpmech.mechanisms.input_perturbation.models.linear_model` (θ_0 = 0, L2(λ/2), projection onto
  ‖θ‖ <= D) and :func:`tfdpmech.mechanisms.input_perturbation.models.paper_mlp`.
* :class:`InputPerturbationBudget`: checks full batch and plain SGD, counts optimizer steps,
  stops at T, refuses step T+1 (strict), logs ``ip_epsilon`` and the ledger's claimed/provable ε.
* :func:`fit_dp_erm`: compile with plain SGD and ``model.fit`` with ``batch_size = n``.
* :func:`erm_objective` / :func:`erm_optimum`: the numpy objective and its L-BFGS optimum L*
  (for the optimality gap ``L(θ) − L*`` on clean data and for the Keras-equivalence check).
"""

from __future__ import annotations

import warnings

import keras
import numpy as np
import tensorflow as tf
from scipy.optimize import minimize

from ...accounting.callbacks import PrivacyBudget
from ...released_data import ReleasedDataGuard, array_fingerprint
from ...validation import check_array

__all__ = [
    "InputPerturbationBudget",
    "fit_dp_erm",
    "erm_objective",
    "erm_optimum",
    "unregularized_biases",
]

FORBIDDEN_FIT_ARGS = ("validation_split", "sample_weight", "class_weight", "steps_per_epoch")


def unregularized_biases(model) -> list[str]:
    """Names of layers whose intercept is trained without an L2 penalty."""
    return [layer.name for layer in model.layers
            if getattr(layer, "use_bias", False) and getattr(layer, "bias_regularizer", None) is None]


def _is_plain_sgd(optimizer) -> bool:
    if type(optimizer).__name__ != "SGD":
        return False
    momentum = float(getattr(optimizer, "momentum", 0.0) or 0.0)
    nesterov = bool(getattr(optimizer, "nesterov", False))
    decay = getattr(optimizer, "weight_decay", None)
    return momentum == 0.0 and not nesterov and not decay


class InputPerturbationBudget(ReleasedDataGuard, PrivacyBudget):
    """Guards the T full-batch steps the noise was calibrated for and logs ε every epoch.

    * ``set_model``: the model refuses every batch that is not part of the perturbed data
      (:class:`~tfdpmech.validation.ReleasedData`): a model fitted on the raw features never logs ε.

    * ``on_train_begin``: the mechanism has perturbed data; the fit runs the calibrated number of
      batches per epoch (1 for full batch); the optimizer is plain SGD (warn otherwise: the proof
      covers gradient descent only); no unregularised intercept with shared noise (zero privacy).
    * ``on_train_batch_begin``: with the ``paper`` calibration, a step beyond T raises
      (``strict``) or warns.
    * ``on_train_batch_end``: counts the step on the mechanism (persists across ``fit`` calls) and
      sets ``model.stop_training`` at T.
    * ``on_epoch_end``: ``ip_epsilon`` (paper accountant ε(t), or the fixed ε of the local Gaussian
      release) plus ``epsilon_claimed`` / ``epsilon_provable`` of the ledger.

    Args:
        mechanism: an :class:`~tfdpmech.mechanisms.input_perturbation.InputPerturbation` after ``perturb``.
        strict: None to follow ``mechanism.strict``.
        verbose: 1 prints one line per epoch.
    """

    def __init__(self, mechanism, strict=None, verbose: int = 0):
        super().__init__(mechanism.ledger, verbose=verbose)
        self.mechanism = mechanism
        self.strict = mechanism.strict if strict is None else bool(strict)

    def released_data(self):
        if self.mechanism.released is None:
            raise RuntimeError("call InputPerturbation.perturb(x, y) before training: there is no perturbed data yet")
        return self.mechanism.released

    def _fail(self, message, exc=ValueError):
        if self.strict:
            raise exc(message)
        warnings.warn(message, UserWarning, stacklevel=3)

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        mech = self.mechanism
        if mech.sigma is None:
            raise RuntimeError("call InputPerturbation.perturb(x, y) before training: there is no perturbed data yet")
        if mech.noise_structure == "shared" and unregularized_biases(self.model):
            raise ValueError(
                f"layer(s) {unregularized_biases(self.model)} have an unregularised intercept and the noise is shared: "
                "the intercept absorbs the shared shift and the weights equal the clean fit, zero privacy "
                "(docs/mechanisms/input_perturbation.md); remove the bias or regularise it"
            )
        steps = (self.params or {}).get("steps")
        n_records = int(mech.release.details["n"])
        expected = -(-n_records // (mech.batch_size or n_records))
        if mech.mode == "reference" and steps is not None and steps != expected:
            self._fail(
                f"this fit runs {steps} batches per epoch, but the noise was calibrated for {expected} (full batch: "
                f"batch_size=n={n_records}); the paper's proof needs full-batch gradient descent. Fit with "
                "batch_size=len(x_noisy) (InputPerturbation.fit does) or calibrate with batch_size= and "
                "assumptions=InputPerturbationAssumptions(strict=False)"
            )
        optimizer = getattr(self.model, "optimizer", None)
        if mech.mode == "reference" and optimizer is not None and not _is_plain_sgd(optimizer):
            warnings.warn(
                f"optimizer {type(optimizer).__name__} is not plain SGD (momentum 0, no weight decay): the paper's "
                "analysis covers gradient descent only (Algorithm 1, line 8); T counts optimizer steps", UserWarning,
                stacklevel=2,
            )

    def on_train_batch_begin(self, batch, logs=None):
        mech = self.mechanism
        if mech.mode == "reference" and mech.steps_taken >= mech.T_effective:
            self._fail(
                f"the noise was calibrated for T={mech.T_effective} gradient steps, all taken; another step spends "
                "budget that was never charged. Perturb fresh data with a new InputPerturbation (and a larger epochs)",
                RuntimeError,
            )

    def on_train_batch_end(self, batch, logs=None):
        mech = self.mechanism
        mech.steps_taken += 1
        if mech.mode == "reference" and mech.steps_taken >= mech.T_effective:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if logs is not None:
            logs["ip_epsilon"] = self.mechanism.epsilon_after(self.mechanism.steps_taken)
            logs["ip_steps"] = self.mechanism.steps_taken


def fit_dp_erm(mechanism, model, x_noisy, y, *, learning_rate=None, callbacks=(), verbose: int = 0,
               validation_data=None, **fit_kwargs):
    """Compile ``model`` with plain SGD (if not compiled) and run T full-batch steps on the noisy data.

    Args:
        mechanism: the :class:`~tfdpmech.mechanisms.input_perturbation.InputPerturbation` that produced
            ``x_noisy``.
        model: a Keras model with logits output (:func:`~tfdpmech.mechanisms.input_perturbation.models.linear_model` or
            :func:`~tfdpmech.mechanisms.input_perturbation.models.paper_mlp`).
        x_noisy, y: exactly the arrays :meth:`InputPerturbation.perturb` returned.
        learning_rate: SGD step; None means ``1/β̂`` with β̂ the smoothness of the noisy
            objective (``sup φ''·λ_max(X̃ᵀX̃/n) + λ``, computed from the noisy data: post-processing).
        callbacks: further callbacks (after the budget callback).
        verbose: Keras verbosity.
        validation_data: held-out, non-private data only (monitoring private data is another release).
        **fit_kwargs: other ``model.fit`` arguments; ``validation_split``, ``sample_weight``,
            ``class_weight`` and ``steps_per_epoch`` are refused (they change the n records each
            gradient averages over, or their weights, which Eq. 9 assumes).

    Returns:
        The Keras ``History``; ``history.history["ip_epsilon"]`` holds ε per epoch.

    Raises:
        ValueError: ``x_noisy`` is not the perturbed data, a forbidden fit argument, a batch size
            the noise was not calibrated for (strict), an unregularised intercept with shared noise.
    """
    mech = mechanism
    if mech.sigma is None or mech.fingerprint is None:
        raise RuntimeError("call InputPerturbation.perturb(x, y) first and fit the arrays it returns")
    bad = [k for k in FORBIDDEN_FIT_ARGS if k in fit_kwargs]
    if bad:
        raise ValueError(
            f"{bad} change the records or weights each gradient averages over, which the noise was not calibrated "
            "for (Eq. 9 assumes n equally weighted records); split the data before perturbing and pass held-out "
            "data as validation_data"
        )
    x_noisy = check_array(x_noisy, "x_noisy", ndim_min=2)
    if array_fingerprint(np.asarray(x_noisy, dtype=np.float32)) != mech.fingerprint:
        raise ValueError(
            "x_noisy is not the array InputPerturbation.perturb returned (its fingerprint differs); train on the "
            "perturbed data only, unmodified"
        )
    n = x_noisy.shape[0]
    batch_size = fit_kwargs.pop("batch_size", mech.batch_size or n)
    if mech.mode == "reference" and batch_size != (mech.batch_size or n):
        message = (f"batch_size={batch_size}, but the noise was calibrated for {mech.batch_size or n} (full batch); "
                   "the paper's proof needs full-batch gradient descent")
        if mech.strict:
            raise ValueError(message)
        warnings.warn(message, UserWarning, stacklevel=2)
    if mech.noise_structure == "shared" and unregularized_biases(model):
        raise ValueError(
            f"layer(s) {unregularized_biases(model)} have an unregularised intercept and the noise is shared: zero "
            "privacy (docs/mechanisms/input_perturbation.md); remove the bias or regularise it"
        )
    if not (getattr(model, "compiled", False) or getattr(model, "_is_compiled", False)):
        lr = mech.learning_rate_hint if learning_rate is None else float(learning_rate)
        loss = (keras.losses.BinaryCrossentropy(from_logits=True) if mech.num_classes == 2
                else keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=lr), loss=loss, metrics=["accuracy"])
    epochs = fit_kwargs.pop("epochs", mech.epochs)
    fit_kwargs.setdefault("shuffle", False)
    callbacks = [mech.callback(verbose=0), *callbacks]
    if batch_size >= n:
        # One constant element = one full batch per epoch: the same frozen tensor every step (no map, no
        # redraw), and Keras 3 does not re-slice the arrays every epoch (about 5x faster for small T-step runs).
        full = tf.data.Dataset.from_tensors((tf.constant(x_noisy, tf.float32), tf.constant(np.asarray(y))))
        return model.fit(full, epochs=epochs, verbose=verbose, callbacks=callbacks,
                         validation_data=validation_data, **fit_kwargs)
    return model.fit(x_noisy, y, batch_size=batch_size, epochs=epochs, verbose=verbose, callbacks=callbacks,
                     validation_data=validation_data, **fit_kwargs)


# ------------------------------------------------------------------------------------------------
# The numpy objective (clean data), for the optimality gap and the Keras-equivalence check
# ------------------------------------------------------------------------------------------------
def _softplus(z):
    return np.logaddexp(0.0, z)


def erm_objective(theta, x, y, l2: float, num_classes: int = 2, *, return_grad: bool = False):
    """``(1/n) Σ ℓ(θ; x_i, y_i) + (λ/2)‖θ‖²`` for logistic (softplus(−y·xθ), y ∈ {±1}) or softmax loss.

    Args:
        theta: (d,) or (d, 1) for binary, (d, M) for multinomial.
        x: (n, d) features.
        y: labels {0, 1} / {−1, +1} (binary) or class ids (multinomial).
        l2: λ.
        num_classes: 2 or M.
        return_grad: also return the gradient with θ's shape.

    Returns:
        The objective value (and the gradient).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y).astype(np.int64).ravel()
    theta = np.asarray(theta, dtype=np.float64)
    n = x.shape[0]
    if num_classes == 2:
        w = theta.reshape(-1)
        s = np.where(y > 0, 1.0, -1.0)  # {0,1} or {−1,+1} -> ±1
        m = s * (x @ w)
        value = float(np.mean(_softplus(-m)) + 0.5 * l2 * w @ w)
        if not return_grad:
            return value
        coef = -s / (1.0 + np.exp(np.clip(m, -700, 700)))  # φ'(m)·y
        return value, (x.T @ coef / n + l2 * w).reshape(theta.shape)
    W = theta.reshape(x.shape[1], num_classes)
    logits = x @ W
    shift = logits.max(axis=1, keepdims=True)
    logz = np.log(np.exp(logits - shift).sum(axis=1)) + shift[:, 0]
    value = float(np.mean(logz - logits[np.arange(n), y]) + 0.5 * l2 * np.sum(W * W))
    if not return_grad:
        return value
    p = np.exp(logits - logz[:, None])
    p[np.arange(n), y] -= 1.0
    return value, (x.T @ p / n + l2 * W).reshape(theta.shape)


def erm_optimum(x, y, l2: float, num_classes: int = 2, *, gtol: float = 1e-10):
    """The non-private optimum θ*, L* of :func:`erm_objective` with scipy L-BFGS (clean data).

    Returns:
        ``(theta_star, L_star)``; θ* has shape (d,) for binary and (d, M) otherwise.
    """
    x = np.asarray(x, dtype=np.float64)
    shape = (x.shape[1],) if num_classes == 2 else (x.shape[1], num_classes)

    def fun(flat):
        value, grad = erm_objective(flat.reshape(shape), x, y, l2, num_classes, return_grad=True)
        return value, grad.ravel()

    res = minimize(fun, np.zeros(int(np.prod(shape))), jac=True, method="L-BFGS-B",
                   options={"gtol": gtol, "ftol": 1e-15, "maxiter": 10_000})
    return res.x.reshape(shape), float(res.fun)
