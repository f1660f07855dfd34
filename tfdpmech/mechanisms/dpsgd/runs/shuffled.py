"""DP-SGD with shuffled fixed-size batches, calibrated to a target (ε, δ).

DP-SGD (Abadi et al., "Deep Learning with Differential Privacy", CCS 2016) clips each
example's gradient to L2 norm ``l2_norm_clip`` = C, sums the clipped gradients of a batch,
adds Gaussian noise N(0, σ²C²) and takes an optimizer step. This module trains any Keras
architecture that way, with tensorflow-privacy 0.9.0 where it imports or tfdpmech's own engine
(``engine=``, :mod:`tfdpmech.mechanisms.dpsgd.runs.paths`), and calibrates the noise multiplier σ to a
target ε with the library's own accounting.

Accounting: :mod:`tfdpmech.accounting.dpsgd` (``dp_accounting`` RDP, Poisson sampling). The
ledger records the Poisson ε as *claimed* and the ε that holds for *any* data order as *provable*:
the training pipeline (``tf.data`` shuffle + fixed-size batches, as in tensorflow-privacy's
tutorials) does not sample by Poisson, and tensorflow-privacy states only that for shuffled data
the actual ε "is believed" to be close to the Poisson value.

Training paths and model checks: :mod:`tfdpmech.mechanisms.dpsgd.runs.paths` (``"auto"``, ``"fast_clipping"``,
``"vectorized"``, ``"microbatch"``). The compiled model refuses any batch that does not hold
exactly ``batch_size`` examples and any optimizer step beyond the ``steps`` the ε was computed for.

A comparison run, not an entry point: ``tfdpmech.make_private`` trains with :class:`~.poisson.DPSGD`
(Poisson sampling, ε proven) and refuses this class. It runs as tensorflow-privacy's tutorials do:

Example:
    >>> dp = ShuffledDPSGD(epsilon=1.0, delta=1e-5, batch_size=250, epochs=5, n=8000)
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

from ....accounting.dpsgd import (
    ACCOUNTANT,
    SAMPLING,
    check_training_shape,
    dpsgd_epsilon,
    dpsgd_epsilon_after_steps,
    dpsgd_noise_multiplier,
    dpsgd_steps,
    epsilon_any_order,
)
from ....accounting.ledger import PrivacyLedger, Release, format_epsilon
from ....input_pipeline import without_autotune
from ....validation import check_epsilon
from .base import DEFAULT_LEARNING_RATES, MAX_STEPS, OPTIMIZERS, DPSGDRun  # noqa: F401  (importable from here)
from .callback import DPSGDBudget
from .guards import guard_shuffled_train_step
from .multiworker import shared_dataset
from .optimizer_settings import OptimizerSettings, resolve_optimizer

__all__ = ["OPTIMIZERS", "ShuffledDPSGD", "DPSGDBudget"]


# --------------------------------------------------------------------------------------------
# The baseline
# --------------------------------------------------------------------------------------------
class ShuffledDPSGD(DPSGDRun):
    """DP-SGD for a Keras model, with σ calibrated to a target (ε, δ) and recorded in a ledger.

    Construction validates the inputs and computes σ (no tensorflow-privacy call yet beyond
    the import check); :meth:`compile` makes the model trainable with DP-SGD and records the
    release. One ``ShuffledDPSGD`` object is one training run: a second :meth:`compile` is refused.

    Args:
        epsilon: target ε > 0 of the whole training run.
        delta: δ ∈ (0, 1); below 1/n is advisable.
        batch_size: examples per step; every batch must hold exactly this many.
        epochs: number of epochs the budget covers.
        n: number of training examples (the size of the dataset passed to ``fit``).
        l2_norm_clip: per-example (per-microbatch) gradient clipping norm C.
        optimizer: ``"adam"`` or ``"sgd"`` with its default step size (1e-3, 0.1), or an
            :class:`~tfdpmech.mechanisms.dpsgd.OptimizerSettings` with its ``name`` and ``learning_rate`` (momentum,
            schedules and weight averaging are :class:`~tfdpmech.mechanisms.dpsgd.DPSGD`'s).
        path: ``"auto"``, ``"fast_clipping"``, ``"vectorized"`` or ``"microbatch"`` (see
            :mod:`tfdpmech.mechanisms.dpsgd.runs.paths`).
        num_microbatches: None (one example per microbatch, the default) or a divisor of
            ``batch_size``; microbatches larger than one example double the accounted sensitivity.
        layer_registry: a tensorflow-privacy ``LayerRegistry`` for fast clipping (default registry
            if None).
        use_xla: compile the ``DPModel`` train step (fast_clipping / vectorized) with XLA; on CPU
            this was slower for the MLP, hence off by default.
        engine: ``"auto"`` (tensorflow-privacy where it imports, else tfdpmech's own), ``"tfdpmech"``
            (this package's train step on Keras 2.15 and 3; no microbatches) or
            ``"tensorflow_privacy"`` (TensorFlow 2.15 only); see :mod:`tfdpmech.mechanisms.dpsgd.runs.paths`.
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
            num_microbatches, unknown path or optimizer, optimizer settings with momentum, a schedule or
            a weight average, a ``ledger`` that is not a PrivacyLedger.

    Reference: Abadi et al., "Deep Learning with Differential Privacy", CCS 2016.
    """

    settings = (*DPSGDRun.settings, "sampling_probability")
    sampling = "shuffled"

    def __init__(self, epsilon: float, delta: float, batch_size: int, epochs: int, n: int, *,
                 l2_norm_clip: float = 1.0, optimizer: str | OptimizerSettings = "adam", path: str = "auto",
                 num_microbatches: int | None = None, layer_registry=None, use_xla: bool = False,
                 drop_remainder: bool = False, engine: str = "auto", ledger: PrivacyLedger | None = None,
                 bands: int = 1):
        if bands != 1:  # BandMF's accounting rests on cyclic Poisson sampling (DPSGD(..., bands=b))
            raise ValueError(f"bands={bands!r}: correlated noise (BandMF) needs cyclic Poisson sampling, which "
                             "shuffled batches are not (no amplification argument); use DPSGD(..., bands=b), or "
                             "bands=1 here")
        optimizer = resolve_optimizer(optimizer)
        if not optimizer.plain:
            field, value = next(iter(optimizer.extras().items()))
            raise ValueError(
                f"ShuffledDPSGD (shuffled batches) builds a plain Adam or SGD with a constant step size; "
                f"OptimizerSettings.{field}={value!r} is DPSGD's; use tfdpmech.mechanisms.dpsgd.DPSGD, or "
                f"drop {field} (OptimizerSettings(name, learning_rate=...))"
            )
        epsilon = check_epsilon(epsilon)
        delta, n, batch_size, epochs = check_training_shape(delta, n, batch_size, epochs)
        if epochs * n > MAX_STEPS * batch_size:
            raise ValueError(
                f"epochs={epochs} with n={n} and batch_size={batch_size} is more than {MAX_STEPS:.0e} "
                "DP-SGD steps, beyond what the accountant computes; pass a realistic number of epochs"
            )
        if not isinstance(drop_remainder, (bool, np.bool_)):
            raise TypeError(f"drop_remainder must be True or False, got {drop_remainder!r}")
        self.records_dropped_per_epoch = n % batch_size
        if self.records_dropped_per_epoch and not drop_remainder:
            near = sorted(sorted((b for b in range(1, n + 1) if n % b == 0),
                                 key=lambda b: abs(b - batch_size))[:3])
            raise ValueError(
                f"n={n} examples do not fill batches of batch_size={batch_size}: "
                f"{self.records_dropped_per_epoch} examples would be left out of every epoch (DP-SGD here trains on "
                f"batches of exactly batch_size examples, so a partial batch is refused). Pass a batch_size that "
                f"divides n (e.g. {', '.join(map(str, near))}), or drop_remainder=True to accept it (the ledger "
                "records the number dropped)"
            )
        self.drop_remainder = bool(drop_remainder)
        super().__init__(epsilon=epsilon, delta=delta, n=n, epochs=epochs, batch_size=batch_size,
                         l2_norm_clip=l2_norm_clip, optimizer=optimizer, path=path,
                         num_microbatches=batch_size if num_microbatches is None else num_microbatches,
                         layer_registry=layer_registry, use_xla=use_xla, engine=engine, ledger=ledger)

        self.steps = dpsgd_steps(self.n, self.batch_size, self.epochs)
        # the steps training may take: `epochs` passes of full batches (the any-order ε counts passes)
        self.max_train_steps = self.epochs * (self.n // self.batch_size)
        self.sampling_probability = self.batch_size / self.n
        shape = dict(n=self.n, batch_size=self.batch_size, epochs=self.epochs, used_microbatching=self.used_microbatching)
        self.noise_multiplier = dpsgd_noise_multiplier(self.epsilon, self.delta, **shape)
        self.epsilon_achieved = dpsgd_epsilon(self.noise_multiplier, self.delta, **shape)
        self._eps_any_order: float | None = None

    # -- accounting helpers ------------------------------------------------------------------
    def epsilon_after_steps(self, steps: int) -> float:
        """Poisson-RDP ε after ``steps`` optimizer steps with this run's σ, q and δ (0 for 0 steps)."""
        return dpsgd_epsilon_after_steps(self.noise_multiplier, self.delta, sampling_probability=self.sampling_probability,
                                         steps=steps, used_microbatching=self.used_microbatching)

    def _epsilon_any_order(self) -> float:
        if self._eps_any_order is None:
            self._eps_any_order = epsilon_any_order(self.noise_multiplier, self.delta, self.epochs,
                                                    used_microbatching=self.used_microbatching)
        return self._eps_any_order

    def allowed_steps_per_epoch(self) -> set:
        """One pass of full batches, or with the last partial batch: ``n // batch_size`` or ``ceil(n / batch_size)``."""
        return {self.n // self.batch_size, -(-self.n // self.batch_size)}

    # -- model preparation -------------------------------------------------------------------
    def _global_batch_rows(self) -> int:
        """Rows of one global batch, split across the replicas (shuffled: the batch size)."""
        return self.batch_size

    def _replica_split_message(self, rows: int, replicas: int) -> str:
        return (f"batch_size={rows} does not split evenly across the strategy's {replicas} replicas (each replica "
                f"checks that its slice is batch_size / replicas records); pass a batch_size that is a multiple of "
                f"{replicas}, e.g. {replicas * max(1, rows // replicas)}, or a strategy with a number of replicas "
                f"dividing {rows}")

    def private_model(self, model, **options):
        """Refused: :func:`tfdpmech.make_private` trains with Poisson sampling, whose ε is proven."""
        raise TypeError(
            "mechanism: make_private trains with Poisson-sampled DP-SGD (tfdpmech.DPSGD), whose ε is proven; "
            "ShuffledDPSGD's Poisson ε is only claimed. Pass tfdpmech.DPSGD(...), or run the shuffled comparison "
            "with ShuffledDPSGD.compile(model) and model.fit(run.dataset(x, y))"
        )

    def _noise_seed_for_engine(self):
        return None  # shuffled DP-SGD draws its noise from OS entropy

    def _divisor(self) -> float:
        """The public L the noisy sum is divided by: the fixed batch size."""
        return float(self.batch_size)

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
        guard_shuffled_train_step(self, model)

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

    # -- training helpers --------------------------------------------------------------------
    def dataset(self, x, y, *, seed: int | None = None) -> tf.data.Dataset:
        """A shuffled ``tf.data`` pipeline of full batches for ``model.fit``.

        Every batch holds exactly ``batch_size`` examples. When ``batch_size`` does not divide
        ``n`` (allowed only with ``ShuffledDPSGD(..., drop_remainder=True)``), the ``n mod batch_size``
        examples left over by each epoch's shuffle sit out of that epoch.

        Args:
            x, y: the n training examples and their labels. With the default loss, integer class ids
                of shape (n,) are one-hot encoded (after :meth:`compile`, which knows the classes).
            seed: shuffle seed (None: a different order every run). Under ``MultiWorkerMirroredStrategy``
                required: the secret every worker shares, so that all draw the same permutations
                (:mod:`tfdpmech.mechanisms.dpsgd.runs.multiworker`); the returned dataset is then a distributed one.

        Raises:
            TypeError: non-numeric or complex data.
            ValueError: NaN/inf, ``len(x)`` differs from the ``n`` the noise was calibrated for, x
                and y differ in length, integer labels out of range or before :meth:`compile`.
        """
        x, y = self._checked_data(x, y)
        if self.multiworker is not None:  # the same permutations on every worker, each its slice of every batch
            return shared_dataset(self, x, y, seed, poisson=False)
        ds = tf.data.Dataset.from_tensor_slices((x.astype(np.float32), y))
        ds = ds.shuffle(self.n, seed=seed, reshuffle_each_iteration=True)
        return without_autotune(ds.batch(self.batch_size, drop_remainder=True).prefetch(2))

    def __repr__(self) -> str:
        return (f"ShuffledDPSGD(target epsilon={self.epsilon:g}, delta={self.delta:g}, batch_size={self.batch_size}, "
                f"epochs={self.epochs}, n={self.n}, noise_multiplier={self.noise_multiplier:.4g}, "
                f"{format_epsilon(self.epsilon_achieved, self._epsilon_any_order())}, engine={self.engine!r}, path={self.path!r})")
