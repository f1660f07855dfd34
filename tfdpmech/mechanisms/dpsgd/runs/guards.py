"""The checks a DP-SGD run wraps around its compiled model's train step: only what the ledger accounts for trains.

Both runs (:class:`~tfdpmech.mechanisms.dpsgd.DPSGD`, :class:`~tfdpmech.mechanisms.dpsgd.ShuffledDPSGD`) refuse any optimizer
step beyond the ``steps`` the ε was computed for, counted from the optimizer's step count at ``compile``
(so a second ``fit`` continues the count and a pre-trained optimizer does not reset it).

Poisson runs train only on the batches the run drew itself: every row of a batch from
:meth:`~tfdpmech.mechanisms.dpsgd.DPSGD.dataset` carries its ticket ``(run id, global step)``
(:func:`~tfdpmech.mechanisms.dpsgd.sampling.poisson_sampling.run_dataset`). A batch without tickets (any
user-made dataset, whatever its third element), a batch of another run, or a batch drawn for another step than
the one the optimizer is about to take is refused: only then is every step an independent Poisson draw, as the proof
of the recorded ε assumes.

Shuffled runs train on batches of exactly ``batch_size`` finite records.

The checks are TensorFlow assertions in the train step, which XLA compiles away (Keras 3 turns
``jit_compile`` on by itself on a machine with a GPU): the runs compile the model with
``jit_compile=False``, and a train step traced with XLA switched back on is refused.
"""

from __future__ import annotations

import keras
import tensorflow as tf

__all__ = ["guard_poisson_train_step", "guard_shuffled_train_step", "steps_left_check"]


def steps_left_check(model, first_step: int, max_steps: int, message: str):
    """An assertion that the optimizer has taken fewer than ``max_steps`` steps since ``first_step``."""
    iterations = model.optimizer.iterations
    taken = iterations - tf.cast(first_step, iterations.dtype)
    return tf.debugging.assert_less(taken, tf.cast(max_steps, iterations.dtype), message=message)


def refuse_xla(model, name: str) -> None:
    """Refuse to trace the train step under XLA, which drops every assertion (the guards among them)."""
    if getattr(model, "jit_compile", False) is True:
        model.train_function = None
        raise ValueError(
            f"{name}: model.jit_compile=True, but XLA drops the train step's checks (the privacy budget, the batches "
            "drawn by the run); set model.jit_compile = False (the run compiles the model that way)"
        )


def _is_run_batch(data) -> bool:
    return (isinstance(data, (tuple, list)) and len(data) == 3 and isinstance(data[2], (tuple, list))
            and len(data[2]) == 2)


def guard_poisson_train_step(run, model) -> None:
    """Refuse batches the run did not draw (or drew for another step) and steps beyond the accounted ones."""
    inner = model.train_step
    name = type(run).__name__
    run_id, max_steps, first_step = run.run_id, run.steps, run.first_step

    def train_step(data):
        refuse_xla(model, name)
        if run.release is None and run.multiworker is None:  # Keras's own fit called around the private model's
            model.train_function = None
            raise ValueError(
                f"this {name} model records its privacy release in its own fit, after the data's checks, and none is "
                "recorded yet: train it with model.fit(x, y) (the private model's fit), not Keras's fit or "
                "train_on_batch; nothing has been trained")
        if not _is_run_batch(data):
            model.train_function = None  # the failed trace must not stay cached
            shape = (f"a {len(data)}-tuple" if isinstance(data, (tuple, list)) else type(data).__name__)
            raise ValueError(
                f"this {name} model trains only on the Poisson batches its run draws itself, got a batch of {shape} "
                "from another dataset: shuffled or user-made batches (whatever their third element) do not have the "
                "Poisson ε the ledger records. Pass the private arrays, fit(x, y) on a make_private model, or "
                f"model.fit({name}.dataset(x, y)) for a compiled run; nothing has been trained"
            )
        x, y, (mask, ticket) = data
        step = tf.cast(model.optimizer.iterations, tf.int64)
        ticket = tf.cast(ticket, tf.int64)
        checks = [
            tf.debugging.assert_equal(
                ticket[:, 0], tf.constant(run_id, tf.int64),
                message=(f"this batch was drawn by another DP-SGD run; fit this model on {name}.dataset(x, y) of the "
                         "run that compiled it (model.dp_sgd.dataset(x, y) for make_private)")),
            tf.debugging.assert_equal(
                ticket[:, 1], step,
                message=("this Poisson batch was drawn for another global step than the optimizer's next one (a "
                         "dataset iterator reused across fits, or the optimizer's step count changed); create the "
                         "dataset again with dataset(x, y) and fit on it")),
            steps_left_check(model, first_step, max_steps, (
                f"DP-SGD privacy budget spent: the (epsilon, delta) was computed for {max_steps} Poisson steps "
                f"({run.epochs} epochs of {run.steps_per_epoch} steps); create a new {name} with more epochs (and a "
                "larger epsilon) to train further")),
        ]
        with tf.control_dependencies(checks):
            return inner((x, y, mask))

    model.train_step = train_step
    if hasattr(model, "_symbolic_build"):  # Keras 3 builds the loss and metrics from one batch under a strategy
        build = model._symbolic_build

        def symbolic_build(iterator=None, data_batch=None):
            if data_batch is not None and _is_run_batch(data_batch):  # the mask is the sample weight, not the ticket
                x, y, (mask, _) = data_batch
                data_batch = (x, y, mask)
            return build(iterator=iterator, data_batch=data_batch)

        model._symbolic_build = symbolic_build


def guard_shuffled_train_step(run, model) -> None:
    """Refuse integer labels for the one-hot loss, non-finite x, partial batches and steps beyond the budget."""
    inner = model.train_step
    batch_size, max_steps, first_step = run.batch_size // run.replicas, run.max_train_steps, run.first_step  # per replica
    one_hot = run._one_hot_labels

    def train_step(data):
        refuse_xla(model, type(run).__name__)
        x, y, _ = keras.utils.unpack_x_y_sample_weight(data)
        first = tf.nest.flatten(y)[0]
        if one_hot and first.shape.rank == 1:
            model.train_function = None  # the failed trace must not poison the next fit
            raise ValueError(
                "y holds integer class ids, but the default loss (CategoricalCrossentropy) needs one-hot labels; "
                "fit on ShuffledDPSGD.dataset(x, y) (it one-hot encodes integer labels) or pass "
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
                         "ShuffledDPSGD.dataset(x, y)"),
            ),
            steps_left_check(model, first_step, max_steps, (
                f"DP-SGD privacy budget spent: the (epsilon, delta) was computed for {max_steps} steps "
                f"({run.epochs} epochs of n={run.n}); create a new ShuffledDPSGD with more epochs (and a larger epsilon) to "
                "train further")),
        ]
        with tf.control_dependencies(checks):
            return inner(data)

    model.train_step = train_step
