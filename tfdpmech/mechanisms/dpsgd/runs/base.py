"""What every DP-SGD run shares: the validated settings, the engines, ``compile`` and the data checks.

:class:`DPSGDRun` is the base of :class:`~tfdpmech.mechanisms.dpsgd.ShuffledDPSGD` (shuffled fixed-size batches) and
:class:`~tfdpmech.mechanisms.dpsgd.DPSGD` (Poisson sampling). Both are one training run: construction
validates every argument and computes σ before any training; :meth:`DPSGDRun.compile` makes the
model trainable with DP-SGD (tfdpmech's own train step, or tensorflow-privacy's DP models) and
records the release. What differs between the two (the sampling, the divisor of the noisy sum,
the accounting, the release and the data pipeline) is implemented by each subclass.
"""

from __future__ import annotations

import abc
import math

import keras
import tensorflow as tf

from ....accounting.ledger import PrivacyLedger, Release, ledger_or_new
from ....contract import Mechanism, PreparedFit, release
from ....validation import check_choice, check_instance, check_labels, check_positive_int, check_positive_real
from .callback import DPSGDBudget
from ..clipping.model_probe import batch_dependence
from .multiworker import install_multiworker_fit
from .optimizer_settings import DEFAULT_LEARNING_RATES, OPTIMIZERS, OptimizerSettings, check_keras_optimizer_options
from .paths import PATHS, check_logits, check_model, require_tf_privacy
from ..clipping.output_losses import check_output_losses, keras_metrics
from ..sampling.records import check_records, is_structure, record_count
from .run_engines import RunEngines
from .run_state import adopt_carried_releases, bind_run, carried_run

__all__ = ["DPSGDRun", "OPTIMIZERS", "MAX_STEPS", "DEFAULT_LEARNING_RATES"]

MAX_STEPS = 10**9  # more optimizer steps than this is a mistake (and overflows the RDP accountant)


def _delta_hint(n: int) -> str:
    """The largest power of ten at or below 1/(10·n): a δ well below 1/n."""
    return f"{10.0 ** math.floor(math.log10(0.1 / n)):g}"


def check_delta_below_one_over_n(delta: float, n: int) -> None:
    """Refuse δ >= 1/n: a mechanism that publishes one random record in full meets that δ."""
    if delta >= 1.0 / n:
        raise ValueError(
            f"delta={delta:g} is not below 1/n = {1.0 / n:.3g} (n={n}): a mechanism that publishes one random "
            "record in full meets that δ, so the (ε, δ) would protect nobody. Pass a delta well below 1/n, e.g. "
            f"delta={_delta_hint(n)}, as tensorflow-privacy and Opacus advise"
        )


class DPSGDRun(RunEngines, Mechanism):
    """The state and the methods :class:`~tfdpmech.mechanisms.dpsgd.ShuffledDPSGD` and :class:`~tfdpmech.mechanisms.dpsgd.DPSGD` share.

    A subclass validates what is its own (the batch shape, the steps, σ) and passes the validated
    ``epsilon``, ``delta``, ``n``, ``epochs`` and ``batch_size`` here; this constructor validates the
    rest, in the order the messages name them.

    Args:
        epsilon: the target ε (validated by the subclass; None while a Poisson run computes it from σ).
        delta, n, epochs: validated by the subclass.
        batch_size: the examples of one step (the expected batch size, rounded, for Poisson sampling).
        l2_norm_clip: per-example clipping norm C.
        optimizer: the validated :class:`~tfdpmech.mechanisms.dpsgd.OptimizerSettings` (the subclass maps a name
            to it); ``optimizer_name`` and ``learning_rate`` (the step size, the optimizer's default
            when not set) are read from it.
        path: the training path (:mod:`tfdpmech.mechanisms.dpsgd.runs.paths`), checked by :meth:`_check_path`.
        num_microbatches: None (every example clipped on its own) or the number of microbatches of
            a batch, a divisor of ``batch_size``.
        layer_registry, use_xla: tensorflow-privacy's fast-clipping registry and XLA switch.
        engine: ``"auto"``, ``"tfdpmech"`` or ``"tensorflow_privacy"``.
        ledger: a :class:`~tfdpmech.accounting.ledger.PrivacyLedger` to record into (a new one if None).
    """

    settings = ("mode", "epsilon", "delta", "n", "epochs", "batch_size", "l2_norm_clip", "noise_multiplier", "steps")
    paper = "Abadi et al. 2016, Deep Learning with Differential Privacy (CCS)"
    sampling = ""  # "poisson" or "shuffled": set by each sampling scheme
    described = {"engine": "engine", "path": "path", "sampling": "sampling", "noise_multiplier": "noise_multiplier",
                 "steps": "steps"}

    def __init__(self, *, epsilon: float | None, delta: float, n: int, epochs: int, batch_size: int,
                 l2_norm_clip: float, optimizer: OptimizerSettings, path: str,
                 num_microbatches: int | None, layer_registry, use_xla: bool, engine: str,
                 ledger: PrivacyLedger | None):
        if n is not None:  # a Poisson run without n checks it when the first fit gives n (.poisson_calibration)
            check_delta_below_one_over_n(delta, n)
        self.epsilon, self.delta, self.n, self.epochs, self.batch_size = epsilon, delta, n, epochs, batch_size
        self.l2_norm_clip = check_positive_real(l2_norm_clip, "l2_norm_clip")
        self.optimizer_settings = optimizer
        self.optimizer_name = optimizer.name
        self.learning_rate = optimizer.step_size
        self.requested_path = self._check_path(path)
        self.path = self.requested_path
        if num_microbatches is not None:  # batch_size is known: only a Poisson run (no microbatches) defers n
            num_microbatches = check_positive_int(num_microbatches, "num_microbatches")
            if self.batch_size % num_microbatches:
                raise ValueError(
                    f"batch_size={self.batch_size} does not divide into num_microbatches={num_microbatches} "
                    "microbatches of equal size; pass num_microbatches=None (one example per microbatch) or a divisor "
                    f"of batch_size, or change batch_size to a multiple of {num_microbatches}"
                )
        self.num_microbatches = num_microbatches
        self.used_microbatching = num_microbatches is not None and num_microbatches < self.batch_size
        self.ledger = ledger_or_new(ledger)
        self.layer_registry = layer_registry
        self.use_xla = bool(use_xla)
        self.requested_engine = engine
        self.engine = self._checked_engine(engine)  # fail here, not half-way through compile
        self.release: Release | None = None
        self.model: keras.Model | None = None
        self.num_classes: int | None = None
        self._one_hot_labels = self._sparse_labels = self._loss_known = False  # set from the loss at compile
        self.first_step = 0  # the optimizer's step count when compile recorded the release

    # -- what each sampling scheme defines ---------------------------------------------------
    @abc.abstractmethod
    def epsilon_after_steps(self, steps: int) -> float:
        """The ε after ``steps`` optimizer steps with this run's σ, q and δ (0 for 0 steps)."""

    @abc.abstractmethod
    def allowed_steps_per_epoch(self) -> set:
        """The numbers of steps one Keras epoch over the ``n`` examples may take (checked by the callback)."""

    @abc.abstractmethod
    def dataset(self, x, y, *, seed=None) -> tf.data.Dataset:
        """The ``tf.data`` pipeline of this run's batches for ``model.fit``."""

    @abc.abstractmethod
    def _global_batch_rows(self) -> int:
        """Rows of one global batch, split across the replicas."""

    @abc.abstractmethod
    def _replica_split_message(self, rows: int, replicas: int) -> str:
        """The error when ``rows`` do not split evenly across ``replicas``."""

    @abc.abstractmethod
    def _divisor(self) -> float:
        """The public L the noisy sum is divided by."""

    @abc.abstractmethod
    def _noise_seed_for_engine(self):
        """The noise seed of tfdpmech's train step (None: OS entropy)."""

    @abc.abstractmethod
    def _dp_model(self, model, dp_keras_model, lr):
        """``model`` rebuilt as tensorflow-privacy's ``DPSequential`` / ``DPModel``."""

    @abc.abstractmethod
    def _optimizer(self, dp_optimizer_keras):
        """The Keras optimizer the run's ``optimizer`` argument (its :class:`~tfdpmech.mechanisms.dpsgd.OptimizerSettings`) names."""

    @abc.abstractmethod
    def _guard_train_step(self, model) -> None:
        """Make the compiled model's train step refuse what the accounting does not cover."""

    @abc.abstractmethod
    def _make_release(self) -> Release:
        """The training run as the ledger entry :meth:`compile` records."""

    _poisson = False  # batches are shuffled fixed-size batches without a mask
    _path_alternatives = "path='vectorized', path='microbatch' or path='auto'"  # the paths to suggest instead

    def _check_path(self, path) -> str:
        """The requested training path, one of :data:`~tfdpmech.mechanisms.dpsgd.runs.paths.PATHS`."""
        return check_choice(path, "path", PATHS)

    def compile(self, model, *, loss=None, metrics=("accuracy",), optimizer=None, loss_weights=None) -> keras.Model:
        """Compile ``model`` for DP-SGD, record the release, and return the model to ``fit``.

        Under ``MultiWorkerMirroredStrategy`` the release is recorded by the returned model's ``fit``
        instead, on the chief only, once every worker has joined and before the first noisy step
        (:mod:`tfdpmech.mechanisms.dpsgd.runs.multiworker`); ``fit`` then trains only on :meth:`dataset`.

        Args:
            model: a built, un-compiled ``keras.Model`` with logits output, or a builder
                (callable without arguments) returning one, e.g. ``tfdpmech.models.standard_cnn``.
            loss: a ``keras.losses.Loss`` (its reduction is overridden); None means
                ``CategoricalCrossentropy(from_logits=True)`` for one-hot labels. A model with several outputs
                takes a list or dict of them (:mod:`tfdpmech.mechanisms.dpsgd.clipping.output_losses`; tfdpmech's
                engine).
            loss_weights: with several losses, their weights (list or dict, as Keras's ``compile``):
                each record's gradient of the weighted total loss is clipped.
            metrics: Keras metrics for ``compile``.
            optimizer: a ``keras.optimizers.Optimizer`` instead of the run's own (the constructor's
                ``optimizer`` settings); not with ``path="microbatch"``.

        Returns:
            With ``engine="tfdpmech"``, ``model`` itself with the DP train step. With tensorflow-privacy:
            on the microbatch path, ``model`` itself, compiled with a DP optimizer; on the
            fast_clipping and vectorized paths, a new ``DPSequential`` / ``DPModel`` sharing
            ``model``'s layers (and so its weights). Fit the returned model.

        Raises:
            RuntimeError: this run already compiled a model (its budget is taken).
            ValueError: unbuilt model, softmax output with the default loss, batch-mixing
                layers, ``path="fast_clipping"`` for an unsupported model, or
                ``path="vectorized"`` for a subclassed model.
        """
        self._refuse_second_compile()
        return self._compile_checked(self._checked_model(model, loss, loss_weights), loss, metrics, optimizer)

    carries_run = False  # the Poisson run's optimizer carries it through save and load (run_state.py)
    release_at_fit = False  # make_private's model records the release at its first fit, once the data passed

    def _compile_checked(self, model, loss, metrics, optimizer, *, resumed: bool = False) -> keras.Model:
        """:meth:`compile` of a model :meth:`_checked_model` passed (``resumed``: the run's release is already in
        its ledger and its first step set, :mod:`.resume`)."""
        if self.n is None:  # a Poisson run without n: make_private's first fit calibrates it, then compiles
            self._require_n(f"{type(self).__name__}.compile")
        carried = None if resumed else carried_run(model)  # read before compile replaces the optimizer
        check_keras_optimizer_options(optimizer)
        if getattr(self, "physical_batch_size", None) is not None and self.engine != "tfdpmech":
            raise ValueError(f"physical_batch_size={self.physical_batch_size} chunks batches in tfdpmech's train step; "
                             f"engine={self.engine!r} has its own. Pass engine='tfdpmech' or drop physical_batch_size")
        if optimizer is not None:
            if not isinstance(optimizer, keras.optimizers.Optimizer) or self.requested_path == "microbatch":
                raise TypeError(
                    f"optimizer must be a keras.optimizers.Optimizer instance (e.g. keras.optimizers.Adam(1e-3)) on the "
                    f"per-example paths, got {type(optimizer).__name__} with path={self.requested_path!r}; the DP "
                    "optimizers of path='microbatch' are built by ShuffledDPSGD itself"
                )
            self.optimizer_name = type(optimizer).__name__
        if self.engine == "tfdpmech":
            model = self._compile_tfdpmech(model, loss, metrics, optimizer)
        else:
            _, lr, dp_keras_model, dp_optimizer_keras = require_tf_privacy()
            self.path = self._resolve_path(model)
            if self.path in ("fast_clipping", "vectorized"):
                model = self._dp_model(model, dp_keras_model, lr)
                reduction = "sum_over_batch_size"  # DPModel needs a reduced (mean) loss
            else:
                reduction = "none"  # the DP optimizers need one loss per example
            model.compile(optimizer=optimizer if optimizer is not None else self._optimizer(dp_optimizer_keras),
                          loss=self._loss(loss, reduction), metrics=keras_metrics(metrics),
                          jit_compile=False)  # XLA would drop the guards' assertions (guards.py)
        if not resumed:
            self.first_step = int(model.optimizer.iterations.numpy())
        self._guard_train_step(model)
        self.model = model
        if self.carries_run and self.engine == "tfdpmech":
            bind_run(model.optimizer, self)
        if resumed:
            self.ledger.record_progress(self.release, self.steps_taken(), reader=self.steps_taken)
            return model
        if carried is not None:  # the steps this model already took under another run count in this ledger
            adopt_carried_releases(self.ledger, carried)
        if self.multiworker is not None:  # recorded by fit, on the chief, once every worker has joined
            install_multiworker_fit(self, model, self.multiworker)
            return model
        if not self.release_at_fit:
            self._record_release()
        return model

    def resume_compiled(self, model, *, loss, metrics, loss_weights=None) -> keras.Model:
        """Compile a loaded ``model`` for this run, restored by :func:`.resume.run_from_state`: the same
        optimizer (its step count), no new release."""
        model = self._checked_model(model, loss, loss_weights, keep_label_form=True)
        return self._compile_checked(model, loss, metrics, model.optimizer, resumed=True)

    def _refuse_second_compile(self) -> None:
        if self.model is not None:
            name = type(self).__name__
            raise RuntimeError(
                f"this {name} already compiled a model and recorded its privacy release; create a new {name} "
                "(its ε composes with the first run in a shared ledger) to train another model"
            )

    def _checked_model(self, model, loss, loss_weights=None, *, keep_label_form: bool = False):
        """``model`` (built from a builder) after every check that needs no data, in order (before any release)."""
        if not isinstance(model, keras.Model) and callable(model) and not isinstance(model, keras.layers.Layer):
            model = model()
        check_model(model)
        if loss is None:
            check_logits(model)
        check_output_losses(model, loss, loss_weights)
        if isinstance(loss, (list, tuple, dict)) and self.engine != "tfdpmech":
            raise ValueError(f"a list or dict of losses (several outputs) trains on engine='tfdpmech'; got "
                             f"engine={self.engine!r}. Pass engine='tfdpmech' or use tfdpmech.make_private")
        self.loss_weights = loss_weights
        why = batch_dependence(model)
        if why is not None:
            raise ValueError(
                f"model {model.name!r} cannot train with DP-SGD: {why}. Per-example clipping bounds one record's "
                "influence only when each record's output and gradient depend on that record alone; remove the layer "
                "(use LayerNormalization or GroupNormalization instead of batch statistics)"
            )
        self._check_distribution(model)
        if not keep_label_form:
            self._one_hot_labels, self._loss_known = loss is None, True
            self._sparse_labels = isinstance(loss, keras.losses.SparseCategoricalCrossentropy)
        try:
            self.num_classes = int(model.output_shape[-1])
        except (AttributeError, TypeError, ValueError):  # a subclassed model that has not been called
            self.num_classes = None
        return model

    def _record_release(self) -> None:
        """Record the release (before the first noisy step) and let the ledger follow the steps taken."""
        self.release = release(self.ledger, self._make_release()).record
        self.ledger.record_progress(self.release, 0, reader=self.steps_taken)

    def global_step(self) -> int:
        """The optimizer's step count (the global step of the next batch), 0 before :meth:`compile`."""
        optimizer = getattr(self.model, "optimizer", None) if self.model is not None else None
        return int(optimizer.iterations.numpy()) if optimizer is not None else self.first_step

    def steps_taken(self) -> int:
        """Optimizer steps this run has taken since :meth:`compile`."""
        return self.global_step() - self.first_step

    def _planned_steps(self) -> int:
        """The optimizer steps this run plans (and the train step allows): the ledger shows fewer as stopped early."""
        return int(getattr(self, "max_train_steps", self.steps))

    def _release(self, basis: str, epsilon_provable: float, details: dict, event=None,
                 mechanism: str = "dpsgd") -> Release:
        """The training run as one ledger entry: claimed = the calibrated ε, the optimiser in ``details``."""
        return Release(
            component="dpsgd_training", mechanism=mechanism, epsilon_claimed=self.epsilon_achieved,
            epsilon_provable=epsilon_provable, event=event, basis=basis, delta=self.delta,
            neighbours="add_remove_user" if getattr(self, "users", None) is not None else "add_remove",
            protects="record", sensitivity=self.l2_norm_clip, noise_scale=self.noise_multiplier, per_epoch=False,
            details={"epsilon_target": self.epsilon, "epsilon_achieved": self.epsilon_achieved, **details,
                     "l2_norm_clip": self.l2_norm_clip, "engine": self.engine, "path": self.path,
                     "optimizer": self.optimizer_name,
                     "learning_rate": self.learning_rate,
                     "steps_planned": self._planned_steps()},
        )

    # -- training helpers --------------------------------------------------------------------
    def _checked_data(self, x, y):
        """``(x, y)`` checked: numeric, real and finite, n records; integer labels one-hot for the default loss.
        ``x`` and ``y`` may be lists, tuples or dicts of arrays (several inputs or outputs,
        :mod:`tfdpmech.mechanisms.dpsgd.sampling.records`)."""
        x, y = check_records(x, "x"), check_records(y, "y")
        if (is_structure(x) or is_structure(y)) and (self.multiworker is not None or not self._poisson):
            raise ValueError(
                f"{type(self).__name__} takes x and y as single arrays here (several inputs or outputs train with "
                "Poisson DPSGD on one machine); got " + ", ".join(
                    f"{n}={type(v).__name__}" for n, v in (("x", x), ("y", y)) if is_structure(v)))
        classes = getattr(self, "num_classes", None)
        if is_structure(y):
            pass  # several outputs: labels as the losses take them
        elif self._sparse_labels and y.ndim == 1 and classes is not None:  # ids for a sparse loss: in range
            check_labels(y, "y", num_classes=classes)
        elif (self._one_hot_labels or not self._loss_known) and (y.ndim == 1 or classes is not None):
            if classes is None:
                raise ValueError(
                    "y holds integer class ids, but the default loss needs one-hot labels and the number of classes is "
                    f"known only after {type(self).__name__}.compile(model) of a Sequential or functional model; call "
                    "compile first, or pass one-hot labels (keras.utils.to_categorical(y))"
                )
            y = check_labels(y, "y", num_classes=classes)
        if record_count(x) != record_count(y):
            raise ValueError(f"x and y must have the same number of examples, got {record_count(x)} and "
                             f"{record_count(y)}")
        users = getattr(self, "users", None)
        if users is not None and record_count(x) != users.n_records:
            raise ValueError(f"user_ids holds one id for each of {users.n_records} records, got {record_count(x)} "
                             "records; pass the records user_ids describes")
        if users is None and record_count(x) != self.n:
            raise ValueError(
                f"the noise was calibrated for n={self.n} training examples, got {record_count(x)}; pass all n examples "
                f"or create the {type(self).__name__} with n={record_count(x)}"
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
            a :class:`~tfdpmech.contract.PreparedFit` whose ``fit()`` runs exactly :attr:`epochs`.

        Raises:
            every error of :meth:`dataset` (checked first, before the release is recorded) and of
            :meth:`compile`.
        """
        if x is None or y is None:
            raise ValueError(f"{type(self).__name__}.prepare needs the private records: prepare(model, x, y)")
        if self.n is None:
            self._require_n(f"{type(self).__name__}.prepare")
        self._refuse_second_compile()
        model = self._checked_model(model, loss)
        self._checked_data(x, y)  # labels against the model's classes, before compile records the release
        compiled = self._compile_checked(model, loss, metrics, optimizer)
        return PreparedFit(compiled, self.dataset(x, y, seed=seed), [self.callback(verbose=verbose)], epochs=self.epochs)

    def callback(self, verbose: int = 1) -> DPSGDBudget:
        """A :class:`~tfdpmech.accounting.callbacks.PrivacyBudget` over this run's ledger (plus ε spent so far)."""
        check_instance(verbose, "verbose", int)
        return DPSGDBudget(self, verbose=verbose)
