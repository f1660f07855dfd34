"""How a DP-SGD run compiles a model with each engine: the strategy, the engine, the training path, the loss.

:class:`RunEngines` is the part of :class:`~tfdpmech.mechanisms.dpsgd.runs.base.DPSGDRun` that chooses and sets up the
engine (tfdpmech's own train step on the user's model, or tensorflow-privacy's DP models); it reads the
run's validated settings (``requested_path``, ``num_microbatches``, ``layer_registry``, ``engine``, ...).
"""

from __future__ import annotations

import keras

from ....distribute import check_strategy, strategy_of
from ....validation import check_choice
from ..clipping.clipped_sums import ghost_norms_mismatch, keras_reduction, resolve_clipping
from .multiworker import is_multiworker
from .paths import fast_clipping_layers, rebuildable, resolve_engine, supports_fast_clipping
from ..clipping.output_losses import keras_metrics, per_record_loss, with_reduction
from .train_step import install_dp_train_step, step_divisor

__all__ = ["RunEngines"]


class RunEngines:
    """The engine side of a DP-SGD run (mixed into :class:`~tfdpmech.mechanisms.dpsgd.runs.base.DPSGDRun`)."""

    replicas = 1  # replicas of the tf.distribute strategy the model trains under (set by compile)
    multiworker = None  # the MultiWorkerMirroredStrategy the model trains under (set by compile), else None
    shared_batches = None  # under it, the shared global batches of the last dataset() (multiworker.SharedBatches)

    def _check_distribution(self, model) -> None:
        """Refuse a strategy, engine or per-replica batch the accounting does not cover (before any release).

        Under ``MirroredStrategy`` and ``MultiWorkerMirroredStrategy`` tfdpmech's engine clips on every replica,
        sums across them (the optimizer's SUM all-reduce) and adds one noise draw per global step on replica 0
        (:mod:`tfdpmech.mechanisms.dpsgd.runs.train_step`); several workers also share the global batches
        (:mod:`tfdpmech.mechanisms.dpsgd.runs.multiworker`).
        """
        strategy = check_strategy(strategy_of(model), f"{type(self).__name__}.compile")
        if strategy is None:
            self.replicas, self.multiworker = 1, None
            return
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
        self.multiworker = strategy if is_multiworker(strategy) else None

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

    def _compile_tfdpmech(self, model, loss, metrics, optimizer=None):
        """tfdpmech's engine: the user's model itself, compiled, with the DP train step installed."""
        self.path = resolve_clipping(model, self.requested_path, group_size=getattr(self, "group_size", 1))
        reduction = keras_reduction(loss)  # the compiled loss's own (per_example_loss: a record's share of it)
        loss = self._loss(loss, reduction)
        # the class's compile: tfdpmech.make_private replaces the instance's compile with one that comes here
        loss_weights = getattr(self, "loss_weights", None)
        type(model).compile(model, optimizer=optimizer if optimizer is not None else self._optimizer(None), loss=loss,
                            loss_weights=loss_weights, metrics=keras_metrics(metrics),
                            jit_compile=False)  # see guards.py
        install_dp_train_step(model, loss=per_record_loss(model, loss, loss_weights), l2_norm_clip=self.l2_norm_clip, noise_multiplier=self.noise_multiplier,
                              divisor=step_divisor(reduction, self._divisor()), clipping=self.path, noise_seed=self._noise_seed_for_engine(),
                              require_mask=self._poisson,
                              physical_batch_size=getattr(self, "physical_batch_size", None),
                              group_size=getattr(self, "group_size", 1),
                              correlated=self._correlated_noise() if hasattr(self, "_correlated_noise") else None)
        return model

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
        # the library's registry sees layers, not uses of weights: a weight read outside its layer (tied
        # weights, a layer called twice) is found by tfdpmech's ghost-norm probe, and then not trained this way
        unseen = ghost_norms_mismatch(model) if supports_fast_clipping(model, self.layer_registry) else None
        if supports_fast_clipping(model, self.layer_registry) and unseen is None:
            return "fast_clipping"
        if self.requested_path == "fast_clipping":
            unsupported = fast_clipping_layers(model, self.layer_registry)
            why = (unseen if unseen is not None else
                   f"layers {unsupported} are not in the fast-clipping layer registry (tensorflow-privacy 0.9.0 "
                   "registers Dense and Embedding only)" if unsupported else
                   "it is not a Sequential or functional model")
            raise ValueError(
                f"path='fast_clipping' cannot train model {model.name!r}: {why}; use {self._path_alternatives}"
            )
        # The DP Keras optimizers cost batch_size**2 (measured: out of memory for the MNIST CNN at
        # batch 250); DPModel's vectorized per-example gradients compute the same clipped sum linearly.
        return "vectorized" if rebuildable(model) else "microbatch"

    def _loss(self, loss, reduction: str):
        if loss is None:
            return keras.losses.CategoricalCrossentropy(from_logits=True, reduction=reduction)
        if isinstance(loss, (list, tuple, dict)):  # several outputs: checked by output_losses.check_output_losses
            return with_reduction(loss, reduction)
        if not isinstance(loss, keras.losses.Loss):
            raise TypeError(
                f"loss must be a keras.losses.Loss instance such as keras.losses.SparseCategoricalCrossentropy("
                f"from_logits=True), got {type(loss).__name__}; its reduction is set by the DP-SGD run"
            )
        config = loss.get_config()
        config["reduction"] = reduction
        return loss.__class__.from_config(config)

