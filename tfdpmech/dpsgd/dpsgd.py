"""DP-SGD through tensorflow-privacy, calibrated to a target (ε, δ).

DP-SGD (Abadi et al., "Deep Learning with Differential Privacy", CCS 2016) clips each
example's gradient to L2 norm ``l2_norm_clip`` = C, sums the clipped gradients of a batch,
adds Gaussian noise N(0, σ²C²) and takes an optimizer step. This module trains any Keras
architecture that way with tensorflow-privacy 0.9.0 and calibrates the noise multiplier σ to a
target ε with the library's own accounting.

Accounting (``noise_multiplier_for_epsilon`` / ``epsilon_for_noise_multiplier``):
    ``dp_accounting``'s RDP accountant (``dp_accounting.rdp.RdpAccountant``, default orders,
    add-or-remove-one-example adjacency) composes ``steps = ceil(epochs · n / batch_size)`` Poisson
    subsampled Gaussian mechanisms, each sampling every example with probability
    ``q = batch_size / n``; the RDP bound is converted to (ε, δ). This is exactly
    tensorflow-privacy's "ε assuming Poisson sampling" of
    ``compute_dp_sgd_privacy_statement`` (the library's standard assumption). The smallest σ
    with ε(σ) ≤ target is found with ``dp_accounting.calibrate_dp_mechanism`` (Brent's method;
    ε is decreasing in σ), so the achieved ε never exceeds the target.

    Sampling assumption: the guarantee is proven for Poisson sampling. The training pipeline
    (``tf.data`` shuffle + fixed-size batches, as in tensorflow-privacy's tutorials) samples
    differently; tensorflow-privacy states that for shuffled data the actual ε "is believed" to
    be close to the Poisson value. The ledger therefore records the Poisson ε as *claimed* and
    the ε that holds for *any* data order (no amplification by sampling, each example once per
    epoch: ``epochs`` Gaussian mechanisms composed by RDP) as *provable*; the latter is also in
    ``details["epsilon_any_order"]``.

    With microbatches of more than one example (``num_microbatches < batch_size``) a
    neighbouring dataset can change one microbatch's clipped mean gradient arbitrarily within
    the clip ball, which doubles the sensitivity to 2C under add-or-remove adjacency; the
    accounting then uses σ/2 (tensorflow-privacy's ``used_microbatching=True``; "How to DP-fy
    ML", Ponomareva et al. 2023, Sec 5.6).

Training paths (``path=``):
    ``"fast_clipping"``: tensorflow-privacy's fast gradient clipping (``DPSequential`` /
        ``DPModel`` with a ``LayerRegistry``): per-example gradient norms from one extra backward
        pass (the "ghost norm" trick, Goodfellow 2015, arXiv:1510.01799), then the gradient of
        the clip-weighted loss, with a standard Keras optimizer. Usable only when every layer with trainable weights is in the registry and
        the model is a ``Sequential`` or functional model. tensorflow-privacy 0.9.0's default
        registry (``layer_registry.make_default_layer_registry``) holds exactly two classes:
        ``tf.keras.layers.Dense`` and ``tf.keras.layers.Embedding``. **Conv2D is not supported**
        (nor BatchNormalization, LayerNormalization, EinsumDense, MultiHeadAttention: 0.9.0 ships
        registry functions for the last three in ``registry_functions/`` but does not register
        them by default). Layers without trainable weights (Flatten, pooling, activations,
        Dropout, Reshape) do not matter. Lookup is by exact class, so a subclass of ``Dense``
        is not supported.
    ``"microbatch"``: the DP Keras optimizers (``DPKerasAdamOptimizer`` /
        ``DPKerasSGDOptimizer``, built on the legacy Keras optimizers) with a per-example
        (reduction ``NONE``) loss and ``num_microbatches = batch_size`` by default. Works for any
        model (subclassed too) whose layers do not mix the examples of a batch. Cost warning:
        the optimizer takes ``tape.jacobian`` of the batch's per-example losses, i.e. one
        vectorized backward pass over the *whole batch* per example, so time and memory grow
        with ``batch_size²``. Measured on 2 shared CPU cores: the 784-128-10 MLP at batch 250 is
        40-57× slower than non-private training; the MNIST CNN (``standard_cnn``) runs 20-80 ex/s
        at batch 25-50 (non-private: ~1500 ex/s) and at batch 250 exhausted 23 GB of memory.
    ``"vectorized"``: tensorflow-privacy's ``DPSequential`` / ``DPModel`` without a layer registry:
        per-example (per-microbatch) gradients from ``tf.vectorized_map`` over single examples,
        clipped, summed and noised in the model's ``train_step`` with a standard optimizer. Any
        layer works; linear cost in the batch size (``standard_cnn`` at batch 250: 0.25-0.5 of the
        non-private speed). Needs a ``Sequential`` or functional model.
    ``"auto"`` picks ``"fast_clipping"`` when :func:`supports_fast_clipping` holds, else
        ``"vectorized"`` for Sequential/functional models, else ``"microbatch"``.

Guards: the compiled model refuses (``tf.errors.InvalidArgumentError`` naming the fix) any batch
that does not hold exactly ``batch_size`` examples and any optimizer step beyond the
``steps`` the ε was computed for. Layers that mix the records of a batch in training
(``BatchNormalization``, :class:`tfdpmech.layers.BatchMinMax`) are refused: per-example clipping
does not bound their sensitivity.

Example:
    >>> dp = DPSGD(epsilon=1.0, delta=1e-5, batch_size=250, epochs=5, n=8000)
    >>> model = dp.compile(tfdpmech.models.standard_mlp())
    >>> model.fit(dp.dataset(x_train, y_train), epochs=dp.epochs, callbacks=[dp.callback()])
    >>> print(dp.ledger.summary())

tensorflow-privacy is imported only when this API is used: ``import tfdpmech`` works without it
(for instance on the TensorFlow ≥ 2.16 / Keras 3 stack, where tensorflow-privacy does not import).
"""

from __future__ import annotations

import functools
import math
import numbers

import keras
import numpy as np
import tensorflow as tf

from ..callbacks import PrivacyBudget
from ..layers import BatchMinMax
from ..ledger import PrivacyLedger, Release, format_epsilon
from ..validation import (
    check_batch_size, check_choice, check_delta, check_epsilon, check_positive_int, check_positive_real,
)

__all__ = [
    "PATHS",
    "OPTIMIZERS",
    "INSTALL_HINT",
    "DPSGD",
    "DPSGDBudget",
    "noise_multiplier_for_epsilon",
    "epsilon_for_noise_multiplier",
    "dpsgd_steps",
    "supports_fast_clipping",
    "fast_clipping_layers",
]

PATHS = ("auto", "fast_clipping", "vectorized", "microbatch")
OPTIMIZERS = ("adam", "sgd")
DEFAULT_LEARNING_RATES = {"adam": 1e-3, "sgd": 0.1}
INSTALL_HINT = "pip install tfdpmech[dpsgd] (needs TensorFlow 2.15)"

ACCOUNTANT = "dp_accounting RDP accountant (add-or-remove-one adjacency)"
SAMPLING = "Poisson subsampling with q = batch_size / n"


# --------------------------------------------------------------------------------------------
# Optional dependencies, imported on use
# --------------------------------------------------------------------------------------------
def _require_dp_accounting():
    try:
        import dp_accounting
    except Exception as exc:  # ImportError, or a broken install
        raise ImportError(f"DP-SGD accounting needs dp-accounting: {INSTALL_HINT}") from exc
    return dp_accounting


def _require_tf_privacy():
    """Import tensorflow-privacy's pieces; one-line ImportError when it is missing or broken."""
    try:
        from tensorflow_privacy.privacy.fast_gradient_clipping import gradient_clipping_utils
        from tensorflow_privacy.privacy.fast_gradient_clipping import layer_registry
        from tensorflow_privacy.privacy.keras_models import dp_keras_model
        from tensorflow_privacy.privacy.optimizers import dp_optimizer_keras
    except Exception as exc:  # tensorflow-privacy raises non-ImportErrors on Keras 3
        raise ImportError(f"the DP-SGD baseline needs tensorflow-privacy: {INSTALL_HINT}") from exc
    return gradient_clipping_utils, layer_registry, dp_keras_model, dp_optimizer_keras


# --------------------------------------------------------------------------------------------
# Accounting
# --------------------------------------------------------------------------------------------
def _check_training_shape(delta, n, batch_size, epochs):
    delta = check_delta(delta)
    n = check_positive_int(n, "n")
    batch_size = check_batch_size(batch_size, n=n)
    epochs = check_positive_int(epochs, "epochs")
    return delta, n, batch_size, epochs


def dpsgd_steps(n: int, batch_size: int, epochs: int) -> int:
    """Number of DP-SGD steps the accounting covers: ``ceil(epochs · n / batch_size)``.

    Training with ``drop_remainder=True`` batches runs ``epochs · floor(n / batch_size)`` steps,
    never more.
    """
    n = check_positive_int(n, "n")
    batch_size = check_batch_size(batch_size, n=n)
    epochs = check_positive_int(epochs, "epochs")
    return -(-epochs * n // batch_size)  # exact integer ceil (no float rounding)


def _dpsgd_event(dp_accounting, noise_multiplier, q, steps):
    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(noise_multiplier)), steps
    )


def _rdp_epsilon(dp_accounting, noise_multiplier, q, steps, delta) -> float:
    return _rdp_epsilon_cached(float(noise_multiplier), float(q), int(steps), float(delta))


@functools.lru_cache(maxsize=1024)
def _rdp_epsilon_cached(noise_multiplier: float, q: float, steps: int, delta: float) -> float:
    # Pure function of its arguments; cached because each evaluation costs ~0.1 s (160 RDP orders).
    dp_accounting = _require_dp_accounting()
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(_dpsgd_event(dp_accounting, noise_multiplier, q, steps))
    return float(accountant.get_epsilon(delta))


def epsilon_for_noise_multiplier(noise_multiplier: float, delta: float, n: int, batch_size: int, epochs: int,
                                 *, used_microbatching: bool = False) -> float:
    """ε of DP-SGD with noise multiplier σ after ``epochs`` epochs (RDP, Poisson sampling).

    Args:
        noise_multiplier: σ, the noise standard deviation divided by the clipping norm (>= 0).
        delta: δ ∈ (0, 1).
        n: number of training examples.
        batch_size: examples per step (expected batch size of the Poisson sampling).
        epochs: passes over the data; ``steps = ceil(epochs · n / batch_size)``.
        used_microbatching: microbatches hold more than one example (sensitivity 2C: σ/2 is
            accounted).

    Returns:
        ε (``inf`` for σ = 0). Equals tensorflow-privacy's "ε assuming Poisson sampling" of
        ``compute_dp_sgd_privacy_statement`` for the same inputs.

    Raises:
        ImportError: dp-accounting is not installed.
        ValueError / TypeError: invalid inputs (δ ∉ (0, 1), n <= 0, batch_size > n, ...).
    """
    if isinstance(noise_multiplier, bool) or not isinstance(noise_multiplier, numbers.Real):
        raise TypeError(f"noise_multiplier must be a real number >= 0, got {noise_multiplier!r}")
    sigma = float(noise_multiplier)
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"noise_multiplier must be finite and >= 0, got {sigma}")
    delta, n, batch_size, epochs = _check_training_shape(delta, n, batch_size, epochs)
    dp_accounting = _require_dp_accounting()
    if sigma == 0:
        return math.inf
    effective = sigma / 2 if used_microbatching else sigma
    return _rdp_epsilon(dp_accounting, effective, batch_size / n, dpsgd_steps(n, batch_size, epochs), delta)


def noise_multiplier_for_epsilon(epsilon: float, delta: float, n: int, batch_size: int, epochs: int,
                                 *, used_microbatching: bool = False, tol: float = 1e-6) -> float:
    """Smallest noise multiplier σ whose DP-SGD run meets (ε, δ) (RDP accountant, Poisson sampling).

    Brackets the root of ``ε(σ) − ε_target`` by doubling/halving from σ = 1 and calls
    ``dp_accounting.calibrate_dp_mechanism``, which returns σ within ``tol`` of the optimum
    with ``ε(σ) <= ε_target`` guaranteed.

    Args:
        epsilon: target ε > 0.
        delta, n, batch_size, epochs, used_microbatching: as for :func:`epsilon_for_noise_multiplier`.
        tol: absolute tolerance on σ.

    Returns:
        σ > 0 with ``epsilon_for_noise_multiplier(σ, ...) <= epsilon``.

    Raises:
        ImportError: dp-accounting is not installed.
        ValueError / TypeError: ε <= 0, δ ∉ (0, 1), n <= 0, epochs <= 0, batch_size > n.
    """
    epsilon = check_epsilon(epsilon)
    delta, n, batch_size, epochs = _check_training_shape(delta, n, batch_size, epochs)
    if not (isinstance(tol, numbers.Real) and 0 < tol < 1):
        raise ValueError(f"tol must lie in (0, 1), got {tol!r}")
    _require_dp_accounting()
    return _calibrate(epsilon, delta, n, batch_size, epochs, bool(used_microbatching), float(tol))


@functools.lru_cache(maxsize=256)
def _calibrate(epsilon, delta, n, batch_size, epochs, used_microbatching, tol) -> float:
    dp_accounting = _require_dp_accounting()
    q = batch_size / n
    steps = dpsgd_steps(n, batch_size, epochs)
    factor = 2.0 if used_microbatching else 1.0  # accounted σ_eff = σ / factor

    def eps_of(sigma_eff):
        return _rdp_epsilon(dp_accounting, sigma_eff, q, steps, delta)

    # Bracket [lo, hi] with eps_of(lo) > epsilon >= eps_of(hi); ε(σ) is decreasing.
    lo, hi = 1.0, 1.0
    if eps_of(hi) > epsilon:
        previous = eps_of(hi)
        for _ in range(60):
            lo, hi = hi, hi * 2.0
            try:
                current = eps_of(hi)
            except ValueError:  # dp_accounting's numerics break down at huge σ
                current = previous
            if current <= epsilon:
                break
            if current >= previous * 0.99:  # the RDP bound has levelled off above the target
                raise ValueError(
                    f"epsilon={epsilon:g} cannot be certified with delta={delta:g} by the RDP accountant for "
                    f"{steps} steps (ε levels off at {current:.4g}); raise epsilon or delta, or train fewer epochs"
                )
            previous = current
        else:  # pragma: no cover - needs an absurdly small ε
            raise ValueError(f"no noise multiplier <= {hi:g} reaches epsilon={epsilon:g}; the target is too small")
    else:
        for _ in range(60):
            lo = lo / 2.0
            if eps_of(lo) > epsilon:
                break
            hi = lo
        else:  # ε is so large that almost no noise is needed
            return hi * factor
    sigma_eff = dp_accounting.calibrate_dp_mechanism(
        dp_accounting.rdp.RdpAccountant,
        lambda s: _dpsgd_event(dp_accounting, s, q, steps),
        epsilon,
        delta,
        dp_accounting.ExplicitBracketInterval(lo, hi),
        tol=min(tol, lo / 2) if lo > 0 else tol,
    )
    sigma_eff = float(sigma_eff)
    if eps_of(sigma_eff) > epsilon:  # belt and braces: never hand out a σ above budget
        sigma_eff = hi
    return sigma_eff * factor


# --------------------------------------------------------------------------------------------
# Model checks
# --------------------------------------------------------------------------------------------
def _iter_layers(model):
    for layer in model.layers:
        yield layer
        if isinstance(layer, keras.Model):
            yield from _iter_layers(layer)


def _check_model(model) -> None:
    if not isinstance(model, keras.Model):
        raise TypeError(f"model must be a keras.Model (or a builder returning one), got {type(model).__name__}")
    if not model.built:
        raise ValueError(
            f"model {model.name!r} is not built, so its trainable layers cannot be checked; start it with "
            "keras.Input(shape) or call model.build(input_shape) first"
        )
    if not model.trainable_variables:
        raise ValueError(f"model {model.name!r} has no trainable variables; nothing to train with DP-SGD")
    for layer in _iter_layers(model):
        if isinstance(layer, BatchMinMax) or (isinstance(layer, keras.layers.BatchNormalization) and layer.trainable):
            raise ValueError(
                f"layer {layer.name!r} ({type(layer).__name__}) mixes the examples of a batch in training, so "
                "per-example clipping does not bound its sensitivity and DP-SGD would not be private; remove it "
                "(tfdpmech.models.standard_cnn / standard_mlp use standard per-example layers only) or use "
                "LayerNormalization / GroupNormalization"
            )


def _check_logits(model) -> None:
    last = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)][-1]
    activation = getattr(getattr(last, "activation", None), "__name__", None)
    if isinstance(last, keras.layers.Softmax) or activation in ("softmax", "sigmoid"):
        raise ValueError(
            f"model {model.name!r} ends with a {activation or 'softmax'} output, but the default loss expects logits "
            "(from_logits=True); remove the final activation or pass loss= explicitly"
        )


def _rebuildable(model) -> bool:
    """A Sequential or functional model (layers and graph known), which DPSequential / DPModel can wrap."""
    return isinstance(model, keras.Sequential) or bool(getattr(model, "_is_graph_network", False))


def fast_clipping_layers(model, layer_registry=None) -> list[str]:
    """Names of the layers with trainable weights that the fast-clipping registry does not support.

    Empty when every trainable layer is registered. Nested models are listed as a whole (the
    library does not look inside them).

    Raises:
        ImportError: tensorflow-privacy is missing.
    """
    _, lr, _, _ = _require_tf_privacy()
    registry = layer_registry if layer_registry is not None else lr.make_default_layer_registry()
    return [f"{layer.name} ({type(layer).__name__})" for layer in model.layers
            if layer.trainable_variables and not registry.is_elem(layer)]


def supports_fast_clipping(model, layer_registry=None) -> bool:
    """True when tensorflow-privacy's fast gradient clipping applies to ``model``.

    Mirrors the library's own test in ``DPModel.__init__``: the model has an internal compute
    graph (``Sequential`` or functional, not subclassed) and every layer with trainable weights
    is in the registry (0.9.0 default: ``Dense`` and ``Embedding`` only; Conv2D is not).

    Args:
        model: a built ``keras.Model``.
        layer_registry: a ``tensorflow_privacy`` ``LayerRegistry``; the default registry if None.

    Raises:
        ImportError: tensorflow-privacy is missing.
    """
    gcu, lr, _, _ = _require_tf_privacy()
    registry = layer_registry if layer_registry is not None else lr.make_default_layer_registry()
    return bool(
        isinstance(model, keras.Model)
        and model.built
        and gcu.has_internal_compute_graph(model)
        and gcu.all_trainable_layers_are_registered(model, registry)
    )


# --------------------------------------------------------------------------------------------
# Callback
# --------------------------------------------------------------------------------------------
class DPSGDBudget(PrivacyBudget):
    """:class:`~tfdpmech.callbacks.PrivacyBudget` that also logs the DP-SGD ε spent so far.

    ``epsilon_claimed`` / ``epsilon_provable`` are the ledger totals (the full planned run).
    ``dpsgd_epsilon_spent`` is the Poisson-RDP ε of the optimizer steps taken so far, which
    grows to at most the provable ε of the release.
    """

    def __init__(self, dpsgd: "DPSGD", verbose: int = 1):
        super().__init__(dpsgd.ledger, verbose=verbose)
        self._dpsgd = dpsgd

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if logs is not None and self.model is not None and getattr(self.model, "optimizer", None) is not None:
            logs["dpsgd_epsilon_spent"] = self._dpsgd.epsilon_after_steps(int(self.model.optimizer.iterations.numpy()))


# --------------------------------------------------------------------------------------------
# The baseline
# --------------------------------------------------------------------------------------------
class DPSGD:
    """DP-SGD for a Keras model, with σ calibrated to a target (ε, δ) and recorded in a ledger.

    Construction validates the inputs and computes σ (no tensorflow-privacy call yet beyond
    the import check); :meth:`compile` makes the model trainable with DP-SGD and records the
    release. One ``DPSGD`` object is one training run: a second :meth:`compile` is refused.

    Args:
        epsilon: target ε > 0 of the whole training run.
        delta: δ ∈ (0, 1); below 1/n is advisable.
        batch_size: examples per step; every batch must hold exactly this many.
        epochs: number of epochs the budget covers.
        n: number of training examples (the size of the dataset passed to ``fit``).
        l2_norm_clip: per-example (per-microbatch) gradient clipping norm C.
        learning_rate: optimizer step size; None means 1e-3 for Adam and 0.1 for SGD.
        optimizer: ``"adam"`` or ``"sgd"``.
        path: ``"auto"``, ``"fast_clipping"``, ``"vectorized"`` or ``"microbatch"`` (see the module
            docstring).
        num_microbatches: None (one example per microbatch, the default) or a divisor of
            ``batch_size``; microbatches larger than one example double the accounted sensitivity.
        layer_registry: a tensorflow-privacy ``LayerRegistry`` for fast clipping (default registry
            if None).
        use_xla: compile the ``DPModel`` train step (fast_clipping / vectorized) with XLA; on CPU
            this was slower for the MLP, hence off by default.
        ledger: a :class:`~tfdpmech.ledger.PrivacyLedger` to record into (a new one if None).

    Attributes:
        noise_multiplier: σ, the smallest multiplier meeting the target ε.
        epsilon_achieved: the ε that σ actually gives (<= ``epsilon``).
        steps: optimizer steps covered by the accounting.
        path: the requested path until :meth:`compile`, then the path used.
        ledger: the ledger holding the release after :meth:`compile`.

    Raises:
        ImportError: tensorflow-privacy is missing ("pip install tfdpmech[dpsgd] (needs TensorFlow 2.15)").
        ValueError / TypeError: ε <= 0, δ ∉ (0, 1), n <= 0, epochs <= 0, batch_size > n,
            batch_size not a multiple of num_microbatches, unknown path or optimizer.

    Reference: Abadi et al., "Deep Learning with Differential Privacy", CCS 2016.
    """

    def __init__(self, epsilon: float, delta: float, batch_size: int, epochs: int, n: int, *,
                 l2_norm_clip: float = 1.0, learning_rate: float | None = None, optimizer: str = "adam",
                 path: str = "auto", num_microbatches: int | None = None, layer_registry=None,
                 use_xla: bool = False, ledger: PrivacyLedger | None = None):
        self.epsilon = check_epsilon(epsilon)
        self.delta, self.n, self.batch_size, self.epochs = _check_training_shape(delta, n, batch_size, epochs)
        self.l2_norm_clip = check_positive_real(l2_norm_clip, "l2_norm_clip")
        self.optimizer_name = check_choice(optimizer, "optimizer", OPTIMIZERS)
        self.learning_rate = (DEFAULT_LEARNING_RATES[self.optimizer_name] if learning_rate is None
                              else check_positive_real(learning_rate, "learning_rate"))
        self.requested_path = check_choice(path, "path", PATHS)
        self.path = self.requested_path
        if num_microbatches is None:
            num_microbatches = self.batch_size
        num_microbatches = check_positive_int(num_microbatches, "num_microbatches")
        if self.batch_size % num_microbatches:
            raise ValueError(
                f"batch_size={self.batch_size} does not divide into num_microbatches={num_microbatches} "
                "microbatches of equal size; pass num_microbatches=None (one example per microbatch) or a divisor "
                f"of batch_size, or change batch_size to a multiple of {num_microbatches}"
            )
        self.num_microbatches = num_microbatches
        self.used_microbatching = num_microbatches < self.batch_size
        if ledger is not None and not isinstance(ledger, PrivacyLedger):
            raise TypeError(f"ledger must be a tfdpmech.PrivacyLedger or None, got {type(ledger).__name__}")
        self.ledger = ledger if ledger is not None else PrivacyLedger()
        self.layer_registry = layer_registry
        self.use_xla = bool(use_xla)
        _require_tf_privacy()  # fail here, not half-way through compile

        self.steps = dpsgd_steps(self.n, self.batch_size, self.epochs)
        self.sampling_probability = self.batch_size / self.n
        self.noise_multiplier = noise_multiplier_for_epsilon(
            self.epsilon, self.delta, self.n, self.batch_size, self.epochs, used_microbatching=self.used_microbatching
        )
        self.epsilon_achieved = epsilon_for_noise_multiplier(
            self.noise_multiplier, self.delta, self.n, self.batch_size, self.epochs,
            used_microbatching=self.used_microbatching,
        )
        self.release: Release | None = None
        self.model: keras.Model | None = None
        self._eps_any_order: float | None = None

    # -- accounting helpers ------------------------------------------------------------------
    def epsilon_after_steps(self, steps: int) -> float:
        """Poisson-RDP ε after ``steps`` optimizer steps with this run's σ, q and δ (0 for 0 steps)."""
        steps = int(steps)
        if steps <= 0:
            return 0.0
        dp_accounting = _require_dp_accounting()
        sigma = self.noise_multiplier / 2 if self.used_microbatching else self.noise_multiplier
        return _rdp_epsilon(dp_accounting, sigma, self.sampling_probability, steps, self.delta)

    def _epsilon_any_order(self) -> float:
        if self._eps_any_order is not None:
            return self._eps_any_order
        # Each example is used once per epoch whatever the order: compose `epochs` Gaussian
        # mechanisms without amplification (tensorflow-privacy's "each example occurring once per epoch").
        dp_accounting = _require_dp_accounting()
        sigma = self.noise_multiplier / 2 if self.used_microbatching else self.noise_multiplier
        accountant = dp_accounting.rdp.RdpAccountant()
        accountant.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma), self.epochs))
        self._eps_any_order = float(accountant.get_epsilon(self.delta))
        return self._eps_any_order

    # -- model preparation -------------------------------------------------------------------
    def _resolve_path(self, model) -> str:
        if self.requested_path == "microbatch":
            return "microbatch"
        if self.requested_path == "vectorized":
            if not _rebuildable(model):
                raise ValueError(
                    f"path='vectorized' needs a Sequential or functional model, got {type(model).__name__} "
                    f"{model.name!r}; use path='microbatch'"
                )
            return "vectorized"
        if supports_fast_clipping(model, self.layer_registry):
            return "fast_clipping"
        if self.requested_path == "fast_clipping":
            unsupported = fast_clipping_layers(model, self.layer_registry)
            why = (f"layers {unsupported} are not in the fast-clipping layer registry (tensorflow-privacy 0.9.0 "
                   "registers Dense and Embedding only)" if unsupported else
                   "it is not a Sequential or functional model")
            raise ValueError(
                f"path='fast_clipping' cannot train model {model.name!r}: {why}; use path='vectorized', "
                "path='microbatch' or path='auto'"
            )
        # The DP Keras optimizers cost batch_size**2 (measured: out of memory for the MNIST CNN at
        # batch 250); DPModel's vectorized per-example gradients compute the same clipped sum linearly.
        return "vectorized" if _rebuildable(model) else "microbatch"

    def _loss(self, loss, reduction: str):
        if loss is None:
            return keras.losses.CategoricalCrossentropy(from_logits=True, reduction=reduction)
        if not isinstance(loss, keras.losses.Loss):
            raise TypeError(
                f"loss must be a keras.losses.Loss instance such as keras.losses.SparseCategoricalCrossentropy("
                f"from_logits=True), got {type(loss).__name__}; its reduction is set by DPSGD"
            )
        config = loss.get_config()
        config["reduction"] = reduction
        return loss.__class__.from_config(config)

    def _dp_model(self, model, dp_keras_model, lr):
        """Rebuild ``model`` as a ``DPSequential`` / ``DPModel`` (fast clipping or vectorized_map)."""
        if self.path == "fast_clipping":
            registry = self.layer_registry if self.layer_registry is not None else lr.make_default_layer_registry()
        else:
            registry = None  # no registry: DPModel clips tf.vectorized_map per-example gradients
        kwargs = dict(
            l2_norm_clip=self.l2_norm_clip,
            noise_multiplier=self.noise_multiplier,
            num_microbatches=self.num_microbatches if self.used_microbatching else None,
            use_xla=self.use_xla,
            layer_registry=registry,
            name=f"{model.name}_dpsgd",
        )
        # The DP model reuses the layer objects: the weights are shared with `model`.
        if isinstance(model, keras.Sequential):
            inputs = keras.Input(batch_shape=model.input_shape)
            dp_model = dp_keras_model.DPSequential(layers=[inputs] + list(model.layers), **kwargs)
        else:
            dp_model = dp_keras_model.DPModel(inputs=model.inputs, outputs=model.outputs, **kwargs)
        fast = dp_model._enable_fast_peg_computation  # pylint: disable=protected-access
        if fast != (self.path == "fast_clipping"):  # pragma: no cover - supports_fast_clipping mirrors the library
            raise RuntimeError(
                f"tensorflow-privacy chose {'fast' if fast else 'vectorized'} clipping for the rebuilt model, "
                f"not {self.path!r}; use path='microbatch'"
            )
        return dp_model

    def _optimizer(self, dp_optimizer_keras):
        if self.path in ("fast_clipping", "vectorized"):  # DPModel privatizes the gradients itself
            cls = keras.optimizers.Adam if self.optimizer_name == "adam" else keras.optimizers.SGD
            return cls(learning_rate=self.learning_rate)
        cls = (dp_optimizer_keras.DPKerasAdamOptimizer if self.optimizer_name == "adam"
               else dp_optimizer_keras.DPKerasSGDOptimizer)
        return cls(l2_norm_clip=self.l2_norm_clip, noise_multiplier=self.noise_multiplier,
                   num_microbatches=self.num_microbatches, learning_rate=self.learning_rate)

    def _guard_train_step(self, model) -> None:
        """Refuse partial batches and steps beyond the accounted budget, inside the train step."""
        inner = model.train_step
        batch_size, max_steps = self.batch_size, self.steps

        def train_step(data):
            _, y, _ = keras.utils.unpack_x_y_sample_weight(data)
            first = tf.nest.flatten(y)[0]
            checks = [
                tf.debugging.assert_equal(
                    tf.shape(first)[0], batch_size,
                    message=(f"DP-SGD was calibrated for batch_size={batch_size}; this batch differs (a partial last "
                             f"batch?). Batch with .batch({batch_size}, drop_remainder=True) or use "
                             "DPSGD.dataset(x, y)"),
                ),
                tf.debugging.assert_less(
                    model.optimizer.iterations, tf.cast(max_steps, model.optimizer.iterations.dtype),
                    message=(f"DP-SGD privacy budget spent: the (epsilon, delta) was computed for {max_steps} steps "
                             f"({self.epochs} epochs of n={self.n}); create a new DPSGD with more epochs (and a "
                             "larger epsilon) to train further"),
                ),
            ]
            with tf.control_dependencies(checks):
                return inner(data)

        model.train_step = train_step

    def compile(self, model, *, loss=None, metrics=("accuracy",)) -> keras.Model:
        """Compile ``model`` for DP-SGD, record the release, and return the model to ``fit``.

        Args:
            model: a built, un-compiled ``keras.Model`` with logits output, or a builder
                (callable without arguments) returning one, e.g. ``tfdpmech.models.standard_cnn``.
            loss: a ``keras.losses.Loss`` (its reduction is overridden); None means
                ``CategoricalCrossentropy(from_logits=True)`` for one-hot labels.
            metrics: Keras metrics for ``compile``.

        Returns:
            On the microbatch path, ``model`` itself, compiled with a DP optimizer. On the
            fast_clipping and vectorized paths, a new ``DPSequential`` / ``DPModel`` sharing
            ``model``'s layers (and so its weights): fit the returned model.

        Raises:
            RuntimeError: this DPSGD already compiled a model (its budget is taken).
            ValueError: unbuilt model, softmax output with the default loss, batch-mixing
                layers, ``path="fast_clipping"`` for an unsupported model, or
                ``path="vectorized"`` for a subclassed model.
        """
        if self.release is not None:
            raise RuntimeError(
                "this DPSGD already compiled a model and recorded its privacy release; create a new DPSGD "
                "(its ε composes with the first run in a shared ledger) to train another model"
            )
        if not isinstance(model, keras.Model) and callable(model):
            model = model()
        _check_model(model)
        if loss is None:
            _check_logits(model)
        _, lr, dp_keras_model, dp_optimizer_keras = _require_tf_privacy()
        self.path = self._resolve_path(model)
        if self.path in ("fast_clipping", "vectorized"):
            model = self._dp_model(model, dp_keras_model, lr)
            reduction = "sum_over_batch_size"  # DPModel needs a reduced (mean) loss
        else:
            reduction = "none"  # the DP optimizers need one loss per example
        model.compile(optimizer=self._optimizer(dp_optimizer_keras), loss=self._loss(loss, reduction),
                      metrics=list(metrics) if metrics else None)
        self._guard_train_step(model)
        self.model = model
        self.release = self.ledger.record(self._make_release())
        return model

    def _make_release(self) -> Release:
        doubling = (" Microbatches of more than one example: sensitivity 2C, σ/2 accounted."
                    if self.used_microbatching else "")
        # Claimed: tensorflow-privacy's usual statement, which assumes Poisson sampling. Provable: the
        # training that actually runs uses shuffled fixed-size batches (each example once per epoch),
        # for which amplification by sampling is not proven; composing `epochs` full Gaussian
        # mechanisms holds for any data order.
        basis = (
            f"DP-SGD (Abadi et al. 2016) with per-example clipping C={self.l2_norm_clip:g} and Gaussian noise "
            f"σ={self.noise_multiplier:.6g}. Claimed ε={self.epsilon_achieved:.4g}: {ACCOUNTANT} over {self.steps} "
            f"steps assuming {SAMPLING} (q={self.sampling_probability:.6g}), as tensorflow-privacy's "
            "compute_dp_sgd_privacy_statement. Provable ε: training uses shuffled fixed-size batches, for which "
            "amplification by sampling is not proven; each example is used once per epoch whatever the order, "
            f"so {self.epochs} Gaussian mechanisms compose by RDP to ε={self._epsilon_any_order():.4g}.{doubling}"
        )
        return Release(
            component="dpsgd_training",
            mechanism="dpsgd",
            epsilon_claimed=self.epsilon_achieved,
            epsilon_provable=self._epsilon_any_order(),
            basis=basis,
            delta=self.delta,
            sensitivity=self.l2_norm_clip,
            noise_scale=self.noise_multiplier,
            per_epoch=False,
            details={
                "epsilon_target": self.epsilon,
                "epsilon_achieved": self.epsilon_achieved,
                "epsilon_any_order": self._epsilon_any_order(),
                "accountant": ACCOUNTANT,
                "sampling": SAMPLING,
                "sampling_probability": self.sampling_probability,
                "steps": self.steps,
                "n": self.n,
                "batch_size": self.batch_size,
                "epochs": self.epochs,
                "num_microbatches": self.num_microbatches,
                "l2_norm_clip": self.l2_norm_clip,
                "path": self.path,
                "optimizer": self.optimizer_name,
                "learning_rate": self.learning_rate,
            },
        )

    # -- training helpers --------------------------------------------------------------------
    def dataset(self, x, y, *, seed: int | None = None) -> tf.data.Dataset:
        """A shuffled ``tf.data`` pipeline of full batches for ``model.fit``.

        Args:
            x, y: the n training examples and their labels.
            seed: shuffle seed (None: a different order every run).

        Raises:
            ValueError: ``len(x)`` differs from the ``n`` the noise was calibrated for, or x and y
                differ in length.
        """
        x, y = np.asarray(x), np.asarray(y)
        if len(x) != len(y):
            raise ValueError(f"x and y must have the same number of examples, got {len(x)} and {len(y)}")
        if len(x) != self.n:
            raise ValueError(
                f"the noise was calibrated for n={self.n} training examples, got {len(x)}; pass all n examples or "
                f"create the DPSGD with n={len(x)}"
            )
        ds = tf.data.Dataset.from_tensor_slices((x.astype(np.float32), y))
        ds = ds.shuffle(self.n, seed=seed, reshuffle_each_iteration=True)
        return ds.batch(self.batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    def callback(self, verbose: int = 1) -> DPSGDBudget:
        """A :class:`~tfdpmech.callbacks.PrivacyBudget` over this run's ledger (plus ε spent so far)."""
        return DPSGDBudget(self, verbose=verbose)

    def __repr__(self) -> str:
        return (f"DPSGD(target epsilon={self.epsilon:g}, delta={self.delta:g}, batch_size={self.batch_size}, "
                f"epochs={self.epochs}, n={self.n}, noise_multiplier={self.noise_multiplier:.4g}, "
                f"{format_epsilon(self.epsilon_achieved, self._epsilon_any_order())}, path={self.path!r})")
