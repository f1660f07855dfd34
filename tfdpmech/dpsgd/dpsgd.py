"""DP-SGD with shuffled fixed-size batches, calibrated to a target (ε, δ).

DP-SGD (Abadi et al., "Deep Learning with Differential Privacy", CCS 2016) clips each
example's gradient to L2 norm ``l2_norm_clip`` = C, sums the clipped gradients of a batch,
adds Gaussian noise N(0, σ²C²) and takes an optimizer step. This module trains any Keras
architecture that way, with tensorflow-privacy 0.9.0 where it imports or tfdpmech's own engine
(``engine=``, :mod:`tfdpmech.dpsgd.paths`), and calibrates the noise multiplier σ to a
target ε with the library's own accounting.

Accounting: :mod:`tfdpmech.accounting.dpsgd` (``dp_accounting`` RDP, Poisson sampling). The
ledger records the Poisson ε as *claimed* and the ε that holds for *any* data order as *provable*:
the training pipeline (``tf.data`` shuffle + fixed-size batches, as in tensorflow-privacy's
tutorials) does not sample by Poisson, and tensorflow-privacy states only that for shuffled data
the actual ε "is believed" to be close to the Poisson value.

Training paths and model checks: :mod:`tfdpmech.dpsgd.paths` (``"auto"``, ``"fast_clipping"``,
``"vectorized"``, ``"microbatch"``). The compiled model refuses any batch that does not hold
exactly ``batch_size`` examples and any optimizer step beyond the ``steps`` the ε was computed for.

Example:
    >>> dp = DPSGD(epsilon=1.0, delta=1e-5, batch_size=250, epochs=5, n=8000)
    >>> model = dp.compile(tfdpmech.models.standard_mlp())
    >>> model.fit(dp.dataset(x_train, y_train), epochs=dp.epochs, callbacks=[dp.callback()])
    >>> print(dp.ledger.summary())

tensorflow-privacy is imported only when this API is used: ``import tfdpmech`` works without it
(for instance on the TensorFlow ≥ 2.16 / Keras 3 stack, where tensorflow-privacy does not import
and ``engine="auto"`` runs tfdpmech's own engine).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from ..accounting.callbacks import PrivacyBudget
from ..accounting.dpsgd import (
    ACCOUNTANT,
    SAMPLING,
    check_training_shape,
    dpsgd_steps,
    epsilon_after_steps,
    epsilon_any_order,
    epsilon_for_noise_multiplier,
    noise_multiplier_for_epsilon,
)
from ..distribute import check_strategy, strategy_of
from ..mechanism import Mechanism, PreparedFit, release
from ..accounting.ledger import PrivacyLedger, Release, ledger_or_new, format_epsilon
from ..validation import (
    check_array,
    check_choice,
    check_epsilon,
    check_instance,
    check_labels,
    check_positive_int,
    check_positive_real,
)
from .clipping import resolve_clipping
from .paths import (
    PATHS,
    check_logits,
    check_model,
    fast_clipping_layers,
    rebuildable,
    require_tf_privacy,
    resolve_engine,
    supports_fast_clipping,
)
from .train_step import install_dp_train_step

__all__ = ["OPTIMIZERS", "DPSGD", "DPSGDBudget"]

OPTIMIZERS = ("adam", "sgd")
MAX_STEPS = 10**9  # more optimizer steps than this is a mistake (and overflows the RDP accountant)
DEFAULT_LEARNING_RATES = {"adam": 1e-3, "sgd": 0.1}


# --------------------------------------------------------------------------------------------
# Callback
# --------------------------------------------------------------------------------------------
class DPSGDBudget(PrivacyBudget):
    """:class:`~tfdpmech.accounting.callbacks.PrivacyBudget` that also logs the DP-SGD ε spent so far.

    ``epsilon_claimed`` / ``epsilon_provable`` are the ledger totals (the full planned run).
    ``dpsgd_epsilon_spent`` is the Poisson-RDP ε of the optimizer steps taken so far, which
    grows to at most the provable ε of the release.
    """

    def __init__(self, dpsgd: "DPSGD", verbose: int = 1):
        super().__init__(dpsgd.ledger, verbose=verbose)
        self._dpsgd = dpsgd

    def on_train_begin(self, logs=None):
        """Refuse a fit whose epoch is not one pass over the ``n`` examples the noise was calibrated for.

        The provable (any-order) ε composes one Gaussian mechanism per epoch over ``n`` examples; on
        a smaller dataset the step budget would allow more passes than were accounted.
        """
        super().on_train_begin(logs)
        dp = self._dpsgd
        steps = (self.params or {}).get("steps")
        allowed = ({dp.steps_per_epoch} if hasattr(dp, "steps_per_epoch")  # Poisson: ceil(1/q) draws per epoch
                   else {dp.n // dp.batch_size, -(-dp.n // dp.batch_size)})
        if steps is not None and int(steps) not in allowed:
            raise ValueError(
                f"this fit runs {steps} steps per epoch, but the DPSGD noise was calibrated for n={dp.n} examples in "
                f"batches of {dp.batch_size} ({min(allowed)} steps per epoch): the data passed to fit is not "
                f"the n={dp.n} training examples, and the logged ε would not hold. Fit on DPSGD.dataset(x, y) with all "
                f"n examples, or create the DPSGD with the n you train on"
            )

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if logs is not None and self.model is not None and getattr(self.model, "optimizer", None) is not None:
            logs["dpsgd_epsilon_spent"] = self._dpsgd.epsilon_after_steps(int(self.model.optimizer.iterations.numpy()))


# --------------------------------------------------------------------------------------------
# The baseline
# --------------------------------------------------------------------------------------------
class DPSGD(Mechanism):
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
        path: ``"auto"``, ``"fast_clipping"``, ``"vectorized"`` or ``"microbatch"`` (see
            :mod:`tfdpmech.dpsgd.paths`).
        num_microbatches: None (one example per microbatch, the default) or a divisor of
            ``batch_size``; microbatches larger than one example double the accounted sensitivity.
        layer_registry: a tensorflow-privacy ``LayerRegistry`` for fast clipping (default registry
            if None).
        use_xla: compile the ``DPModel`` train step (fast_clipping / vectorized) with XLA; on CPU
            this was slower for the MLP, hence off by default.
        engine: ``"auto"`` (tensorflow-privacy where it imports, else tfdpmech's own), ``"tfdpmech"``
            (this package's train step on Keras 2.15 and 3; no microbatches) or
            ``"tensorflow_privacy"`` (TensorFlow 2.15 only); see :mod:`tfdpmech.dpsgd.paths`.
        drop_remainder: accept that ``n mod batch_size`` examples (a different random subset each
            epoch) sit out of every epoch when ``batch_size`` does not divide ``n``; the number is
            recorded in the ledger. By default that is refused: every batch must hold exactly
            ``batch_size`` examples, so the remainder could never be trained on.
        ledger: a :class:`~tfdpmech.accounting.ledger.PrivacyLedger` to record into (a new one if None).

    Attributes:
        noise_multiplier: σ, the smallest multiplier meeting the target ε.
        epsilon_achieved: the ε that σ actually gives (<= ``epsilon``).
        steps: optimizer steps covered by the accounting.
        path: the requested path until :meth:`compile`, then the path used.
        ledger: the ledger holding the release after :meth:`compile`.

    Raises:
        ImportError: ``engine="tensorflow_privacy"`` where tensorflow-privacy does not import (one line
            with the fix; ``engine="auto"`` then runs tfdpmech's own engine).
        ValueError / TypeError: ε <= 0, δ ∉ (0, 1), n <= 0, epochs <= 0, batch_size > n,
            batch_size not dividing n (without ``drop_remainder=True``), batch_size not a multiple of
            num_microbatches, unknown path or optimizer, a ``ledger`` that is not a PrivacyLedger.

    Reference: Abadi et al., "Deep Learning with Differential Privacy", CCS 2016.
    """

    paper = "Abadi et al. 2016, Deep Learning with Differential Privacy (CCS)"

    def __init__(self, epsilon: float, delta: float, batch_size: int, epochs: int, n: int, *,
                 l2_norm_clip: float = 1.0, learning_rate: float | None = None, optimizer: str = "adam",
                 path: str = "auto", num_microbatches: int | None = None, layer_registry=None,
                 use_xla: bool = False, drop_remainder: bool = False, engine: str = "auto",
                 ledger: PrivacyLedger | None = None):
        self.epsilon = check_epsilon(epsilon)
        self.delta, self.n, self.batch_size, self.epochs = check_training_shape(delta, n, batch_size, epochs)
        if self.epochs * self.n > MAX_STEPS * self.batch_size:
            raise ValueError(
                f"epochs={self.epochs} with n={self.n} and batch_size={self.batch_size} is more than {MAX_STEPS:.0e} "
                "DP-SGD steps, beyond what the accountant computes; pass a realistic number of epochs"
            )
        if not isinstance(drop_remainder, (bool, np.bool_)):
            raise TypeError(f"drop_remainder must be True or False, got {drop_remainder!r}")
        self.records_dropped_per_epoch = self.n % self.batch_size
        if self.records_dropped_per_epoch and not drop_remainder:
            near = sorted(sorted((b for b in range(1, self.n + 1) if self.n % b == 0),
                                 key=lambda b: abs(b - self.batch_size))[:3])
            raise ValueError(
                f"n={self.n} examples do not fill batches of batch_size={self.batch_size}: "
                f"{self.records_dropped_per_epoch} examples would be left out of every epoch (DP-SGD here trains on "
                f"batches of exactly batch_size examples, so a partial batch is refused). Pass a batch_size that "
                f"divides n (e.g. {', '.join(map(str, near))}), or drop_remainder=True to accept it (the ledger "
                "records the number dropped)"
            )
        self.drop_remainder = bool(drop_remainder)
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
        self.ledger = ledger_or_new(ledger)
        self.layer_registry = layer_registry
        self.use_xla = bool(use_xla)
        self.engine = self._checked_engine(engine)  # fail here, not half-way through compile

        self.steps = dpsgd_steps(self.n, self.batch_size, self.epochs)
        # the steps training may take: `epochs` passes of full batches (the any-order ε counts passes)
        self.max_train_steps = self.epochs * (self.n // self.batch_size)
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
        self.num_classes: int | None = None
        self._one_hot_labels = False
        self._eps_any_order: float | None = None

    # -- accounting helpers ------------------------------------------------------------------
    def epsilon_after_steps(self, steps: int) -> float:
        """Poisson-RDP ε after ``steps`` optimizer steps with this run's σ, q and δ (0 for 0 steps)."""
        return epsilon_after_steps(self.noise_multiplier, self.delta, self.sampling_probability, steps,
                                   used_microbatching=self.used_microbatching)

    def _epsilon_any_order(self) -> float:
        if self._eps_any_order is None:
            self._eps_any_order = epsilon_any_order(self.noise_multiplier, self.delta, self.epochs,
                                                    used_microbatching=self.used_microbatching)
        return self._eps_any_order

    # -- model preparation -------------------------------------------------------------------
    replicas = 1  # replicas of the tf.distribute strategy the model trains under (set by compile)

    def _global_batch_rows(self) -> int:
        """Rows of one global batch, split across the replicas (shuffled: the batch size)."""
        return self.batch_size

    def _check_distribution(self, model) -> None:
        """Refuse a strategy, engine or per-replica batch the accounting does not cover (before any release).

        Under ``MirroredStrategy`` tfdpmech's engine clips on every replica, sums across them (the optimizer's SUM
        all-reduce) and adds one noise draw per global step on replica 0 (:mod:`tfdpmech.dpsgd.train_step`).
        """
        strategy = check_strategy(strategy_of(model), f"{type(self).__name__}.compile")
        if strategy is None:
            self.replicas = 1
            return
        if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            raise ValueError(
                f"{type(self).__name__} does not support strategy=MultiWorkerMirroredStrategy: every worker would "
                "need the same secret sampling/shuffling stream for each record to be used as the accounting assumes. "
                "Train on the devices of one machine with tf.distribute.MirroredStrategy(), or without a strategy "
                "(the functional head, tfdpmech.heads.FunctionalHead, does support several workers)"
            )
        if self.engine != "tfdpmech":
            if getattr(self, "_engine_argument", None) != "auto":
                raise ValueError(
                    f"engine={self.engine!r} cannot train under tf.distribute ({type(strategy).__name__}): "
                    "tensorflow-privacy's DP models add their noise on every replica. Pass engine='tfdpmech' (its "
                    "train step adds the noise once per global step, on replica 0)"
                )
            self.engine = "tfdpmech"  # engine='auto' under a strategy: the engine that supports it
            self._checked_engine("tfdpmech")
        replicas = int(strategy.num_replicas_in_sync)
        rows = self._global_batch_rows()
        if rows % replicas:
            raise ValueError(self._replica_split_message(rows, replicas))
        self.replicas = replicas

    def _replica_split_message(self, rows: int, replicas: int) -> str:
        return (f"batch_size={rows} does not split evenly across the strategy's {replicas} replicas (each replica "
                f"checks that its slice is batch_size / replicas records); pass a batch_size that is a multiple of "
                f"{replicas}, e.g. {replicas * max(1, rows // replicas)}, or a strategy with a number of replicas "
                f"dividing {rows}")

    def _checked_engine(self, engine) -> str:
        self._engine_argument = engine
        engine = resolve_engine(check_choice(engine, "engine", ("auto", "tfdpmech", "tensorflow_privacy")))
        if engine == "tfdpmech" and (self.requested_path == "microbatch" or self.num_microbatches not in (None, self.batch_size)):
            raise ValueError(
                f"engine='tfdpmech' clips every example (path 'auto', 'fast_clipping' or 'vectorized'); path="
                f"{self.requested_path!r} with num_microbatches={self.num_microbatches} is tensorflow-privacy's DP "
                "optimizer path: pass engine='tensorflow_privacy' (TensorFlow 2.15) or drop these arguments"
            )
        return engine

    def _noise_seed_for_engine(self):
        return None  # shuffled DP-SGD draws its noise from OS entropy

    def _compile_tfdpmech(self, model, loss, metrics, optimizer=None):
        """tfdpmech's engine: the user's model itself, compiled, with the DP train step installed."""
        self.path = resolve_clipping(model, self.requested_path)
        loss = self._loss(loss, "sum_over_batch_size")
        # the class's compile: tfdpmech.dpsgd.make_private replaces the instance's compile with one that comes here
        type(model).compile(model, optimizer=optimizer if optimizer is not None else self._optimizer(None), loss=loss,
                            metrics=list(metrics) if metrics else None)
        install_dp_train_step(model, loss=loss, l2_norm_clip=self.l2_norm_clip, noise_multiplier=self.noise_multiplier,
                              divisor=self._divisor(), clipping=self.path, noise_seed=self._noise_seed_for_engine(),
                              require_mask=self._poisson)
        return model

    _poisson = False  # batches are shuffled fixed-size batches without a mask

    def _divisor(self) -> float:
        """The public L the noisy sum is divided by: the fixed batch size."""
        return float(self.batch_size)

    def _resolve_path(self, model) -> str:
        if self.requested_path == "microbatch":
            return "microbatch"
        if self.requested_path == "vectorized":
            if not rebuildable(model):
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
        return "vectorized" if rebuildable(model) else "microbatch"

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
        batch_size, max_steps = self.batch_size // self.replicas, self.max_train_steps  # per replica
        one_hot = self._one_hot_labels

        def train_step(data):
            x, y, _ = keras.utils.unpack_x_y_sample_weight(data)
            first = tf.nest.flatten(y)[0]
            if one_hot and first.shape.rank == 1:
                model.train_function = None  # the failed trace must not poison the next fit
                raise ValueError(
                    "y holds integer class ids, but the default loss (CategoricalCrossentropy) needs one-hot labels; "
                    "fit on DPSGD.dataset(x, y) (it one-hot encodes integer labels) or pass "
                    "keras.utils.to_categorical(y), or compile with loss=keras.losses.SparseCategoricalCrossentropy("
                    "from_logits=True)"
                )
            checks = [
                tf.debugging.assert_all_finite(
                    tf.cast(tf.nest.flatten(x)[0], tf.float32),
                    message="DP-SGD training data x holds NaN or inf; remove or impute them before training"),
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

    def compile(self, model, *, loss=None, metrics=("accuracy",), optimizer=None) -> keras.Model:
        """Compile ``model`` for DP-SGD, record the release, and return the model to ``fit``.

        Args:
            model: a built, un-compiled ``keras.Model`` with logits output, or a builder
                (callable without arguments) returning one, e.g. ``tfdpmech.models.standard_cnn``.
            loss: a ``keras.losses.Loss`` (its reduction is overridden); None means
                ``CategoricalCrossentropy(from_logits=True)`` for one-hot labels.
            metrics: Keras metrics for ``compile``.
            optimizer: a ``keras.optimizers.Optimizer`` instead of the run's own (``optimizer`` /
                ``learning_rate`` arguments); not with ``path="microbatch"``.

        Returns:
            With ``engine="tfdpmech"``, ``model`` itself with the DP train step. With tensorflow-privacy:
            on the microbatch path, ``model`` itself, compiled with a DP optimizer; on the
            fast_clipping and vectorized paths, a new ``DPSequential`` / ``DPModel`` sharing
            ``model``'s layers (and so its weights). Fit the returned model.

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
        check_model(model)
        if loss is None:
            check_logits(model)
        self._check_distribution(model)  # before any release
        self._one_hot_labels = loss is None
        try:
            self.num_classes = int(model.output_shape[-1])
        except (AttributeError, TypeError, ValueError):  # a subclassed model that has not been called
            self.num_classes = None
        if optimizer is not None:
            if not isinstance(optimizer, keras.optimizers.Optimizer) or self.requested_path == "microbatch":
                raise TypeError(
                    f"optimizer must be a keras.optimizers.Optimizer instance (e.g. keras.optimizers.Adam(1e-3)) on the "
                    f"per-example paths, got {type(optimizer).__name__} with path={self.requested_path!r}; the DP "
                    "optimizers of path='microbatch' are built by DPSGD itself"
                )
            self.optimizer_name = type(optimizer).__name__
        if self.engine == "tfdpmech":
            model = self._compile_tfdpmech(model, loss, metrics, optimizer)
            self._guard_train_step(model)
            self.model = model
            self.release = release(self.ledger, self._make_release())[1]
            return model
        _, lr, dp_keras_model, dp_optimizer_keras = require_tf_privacy()
        self.path = self._resolve_path(model)
        if self.path in ("fast_clipping", "vectorized"):
            model = self._dp_model(model, dp_keras_model, lr)
            reduction = "sum_over_batch_size"  # DPModel needs a reduced (mean) loss
        else:
            reduction = "none"  # the DP optimizers need one loss per example
        model.compile(optimizer=optimizer if optimizer is not None else self._optimizer(dp_optimizer_keras),
                      loss=self._loss(loss, reduction),
                      metrics=list(metrics) if metrics else None)
        self._guard_train_step(model)
        self.model = model
        self.release = release(self.ledger, self._make_release())[1]
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
            f"so {self.epochs} Gaussian mechanisms compose by RDP to ε={self._epsilon_any_order():.4g} for add/remove "
            "neighbours in the zero-out sense (the record's clipped gradient is in its one batch per epoch or not; "
            f"for replace-one neighbours the sensitivity doubles).{doubling}"
        )
        return self._release(basis, self._epsilon_any_order(), {
            "epsilon_any_order": self._epsilon_any_order(),
            "accountant": ACCOUNTANT,
            "sampling": SAMPLING,
            "sampling_probability": self.sampling_probability,
            "steps": self.steps,
            "n": self.n,
            "batch_size": self.batch_size,
            "epochs": self.epochs,
            "num_microbatches": self.num_microbatches,
            "records_dropped_per_epoch": self.records_dropped_per_epoch,
        })

    def _release(self, basis: str, epsilon_provable: float, details: dict, event=None) -> Release:
        """The training run as one ledger entry: claimed = the calibrated ε, the optimiser in ``details``."""
        return Release(
            component="dpsgd_training", mechanism="dpsgd", epsilon_claimed=self.epsilon_achieved,
            epsilon_provable=epsilon_provable, event=event, basis=basis, delta=self.delta,
            neighbours="add_remove", protects="record",
            sensitivity=self.l2_norm_clip, noise_scale=self.noise_multiplier, per_epoch=False,
            details={"epsilon_target": self.epsilon, "epsilon_achieved": self.epsilon_achieved, **details,
                     "l2_norm_clip": self.l2_norm_clip, "engine": self.engine, "path": self.path,
                     "optimizer": self.optimizer_name,
                     "learning_rate": self.learning_rate},
        )

    # -- training helpers --------------------------------------------------------------------
    def dataset(self, x, y, *, seed: int | None = None) -> tf.data.Dataset:
        """A shuffled ``tf.data`` pipeline of full batches for ``model.fit``.

        Every batch holds exactly ``batch_size`` examples. When ``batch_size`` does not divide
        ``n`` (allowed only with ``DPSGD(..., drop_remainder=True)``), the ``n mod batch_size``
        examples left over by each epoch's shuffle sit out of that epoch.

        Args:
            x, y: the n training examples and their labels. With the default loss, integer class ids
                of shape (n,) are one-hot encoded (after :meth:`compile`, which knows the classes).
            seed: shuffle seed (None: a different order every run).

        Raises:
            TypeError: non-numeric or complex data.
            ValueError: NaN/inf, ``len(x)`` differs from the ``n`` the noise was calibrated for, x
                and y differ in length, integer labels out of range or before :meth:`compile`.
        """
        x, y = self._checked_data(x, y)
        ds = tf.data.Dataset.from_tensor_slices((x.astype(np.float32), y))
        ds = ds.shuffle(self.n, seed=seed, reshuffle_each_iteration=True)
        return ds.batch(self.batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    def _checked_data(self, x, y):
        """``(x, y)`` checked: numeric, real and finite, n records; integer labels one-hot for the default loss."""
        x = check_array(x, "x")
        y = check_array(y, "y")
        classes = getattr(self, "num_classes", None)
        if (getattr(self, "_one_hot_labels", False) or self.model is None) and (y.ndim == 1 or classes is not None):
            if classes is None:
                raise ValueError(
                    "y holds integer class ids, but the default loss needs one-hot labels and the number of classes is "
                    f"known only after {type(self).__name__}.compile(model) of a Sequential or functional model; call "
                    "compile first, or pass one-hot labels (keras.utils.to_categorical(y))"
                )
            y = check_labels(y, "y", num_classes=classes)
        if len(x) != len(y):
            raise ValueError(f"x and y must have the same number of examples, got {len(x)} and {len(y)}")
        if len(x) != self.n:
            raise ValueError(
                f"the noise was calibrated for n={self.n} training examples, got {len(x)}; pass all n examples or "
                f"create the {type(self).__name__} with n={len(x)}"
            )
        return x, y

    def prepare(self, model, x=None, y=None, *, loss=None, metrics=("accuracy",), optimizer=None, seed=None,
                verbose: int = 1) -> PreparedFit:
        """:meth:`compile`, :meth:`dataset` and :meth:`callback` as one call (the mechanism contract).

        Args:
            model, loss, metrics, optimizer: as for :meth:`compile`.
            x, y: all n private records and their labels, as for :meth:`dataset`.
            seed: the batches' seed (None: the run's own stream).
            verbose: the budget callback's logging (0: silent).

        Returns:
            a :class:`~tfdpmech.mechanism.PreparedFit` whose ``fit()`` runs exactly :attr:`epochs`.

        Raises:
            every error of :meth:`dataset` (checked first, before the release is recorded) and of
            :meth:`compile`.
        """
        if x is None or y is None:
            raise ValueError(f"{type(self).__name__}.prepare needs the private records: prepare(model, x, y)")
        n_x, n_y = len(check_array(x, "x")), len(check_array(y, "y"))
        if n_x != self.n or n_y != n_x:  # before compile records the release
            raise ValueError(f"{type(self).__name__}.prepare needs all n={self.n} private records and one label each, "
                             f"got {n_x} records and {n_y} labels; pass them all, or create it with n={n_x}")
        compiled = self.compile(model, loss=loss, metrics=metrics, optimizer=optimizer)
        return PreparedFit(compiled, self.dataset(x, y, seed=seed), [self.callback(verbose=verbose)], epochs=self.epochs)

    def callback(self, verbose: int = 1) -> DPSGDBudget:
        """A :class:`~tfdpmech.accounting.callbacks.PrivacyBudget` over this run's ledger (plus ε spent so far)."""
        check_instance(verbose, "verbose", int)
        return DPSGDBudget(self, verbose=verbose)

    def __repr__(self) -> str:
        return (f"DPSGD(target epsilon={self.epsilon:g}, delta={self.delta:g}, batch_size={self.batch_size}, "
                f"epochs={self.epochs}, n={self.n}, noise_multiplier={self.noise_multiplier:.4g}, "
                f"{format_epsilon(self.epsilon_achieved, self._epsilon_any_order())}, engine={self.engine!r}, path={self.path!r})")
