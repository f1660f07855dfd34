"""An ordinary Keras model that trains with Poisson DP-SGD through its own ``compile`` / ``fit``.

:func:`private_dpsgd_model` is what :func:`tfdpmech.make_private` does with a :class:`~.poisson.DPSGD`
run: it runs tfdpmech's own engine (:mod:`.train_step`) on every stack, Keras 2.15 and Keras 3 alike.
``compile`` checks the model and installs the train step; the first ``fit`` checks the data and then
records the run's release (the budget is committed then, before the first noisy step); ``fit`` takes the n
private records as arrays (or lists and dicts of them; a NumPy memmap is sampled without loading it), with
Keras's ``sample_weight``, ``class_weight`` and ``validation_split``
(:mod:`tfdpmech.mechanisms.dpsgd.sampling.record_weights`), or a ``tf.data.Dataset`` of single records
(:mod:`tfdpmech.mechanisms.dpsgd.sampling.record_datasets`), and draws the Poisson batches itself (``batch_size`` and
``shuffle`` do not apply), or a dataset from ``model.dp_sgd.dataset(x, y)``; it refuses a dataset of batches; every
``fit`` continues the run's Poisson stream (the batch of step t is drawn from the secret key and t); its default
is the epochs the run has left, and it refuses more. Everything else (``predict``, ``evaluate``) is
the model's own; ``save`` keeps the optimizer, its step count and the run with it
(:mod:`.run_state`; :func:`~.resume.resume` continues a loaded model).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from ....contract import FIT_ARGUMENTS_FIXED_BY_THE_RELEASE
from ..clipping.clipped_sums import keras_reduction
from ..clipping.output_losses import keras_metrics
from ..sampling.poisson_sampling import is_run_dataset
from ..sampling.record_datasets import is_dataset, records_from_dataset, refuse_batches
from ..sampling.record_sources import LazyRows, is_array_like, is_record_source, lazy_array, records_from_source
from ..sampling.position_weights import check_position_weights, with_position_weights
from ..sampling.preprocessed_records import is_pipeline_model, keras_fit_of, needs_preprocessing, preprocess_records
from ..sampling.record_weights import check_sample_weight, class_weight_to_sample_weight, split_for_validation
from ..sampling.text_inputs import check_text_inputs
from ..sampling.records import record_count
from .weight_average import with_averaged_evaluation

# the fit arguments of the records a DP-SGD model takes (:mod:`tfdpmech.mechanisms.dpsgd.sampling.record_weights`); the
# others are fixed by the release
_RECORD_ARGUMENTS = ("sample_weight", "class_weight", "validation_split")

__all__ = ["private_dpsgd_model"]

def private_dpsgd_model(model, dp):
    """Make ``model``'s ``compile`` / ``fit`` train it as the Poisson DP-SGD run ``dp``.

    Args:
        model: a built ``keras.Model`` whose layers do not mix the records of a batch.
        dp: a :class:`~tfdpmech.mechanisms.dpsgd.DPSGD` run that has not compiled a model yet, with
            ``engine="auto"`` (the default: here it means tfdpmech's engine, the one that trains the
            user's own model object) or ``"tfdpmech"``.

    Returns:
        ``model`` itself, with ``model.dp_sgd`` (the run) and ``model.privacy_ledger``.

    Raises:
        ValueError: a run of another engine, or one that already compiled a model; at ``compile``, a
            model DP-SGD cannot clip exactly (see :func:`~tfdpmech.mechanisms.dpsgd.runs.paths.check_model`).
    """
    if dp.model is not None:
        raise ValueError("mechanism: this DPSGD run already compiled a model (its budget is spent on it); construct "
                         "a new DPSGD for another model")
    if dp.requested_engine == "tensorflow_privacy":
        raise ValueError(
            "mechanism: DPSGD(engine='tensorflow_privacy') compiles tensorflow-privacy's own DPModel, not your model; "
            "make_private trains your model with tfdpmech's engine (pinned equal to tensorflow-privacy's): construct "
            "DPSGD(...) without engine=, or call dp.compile(model) to get tensorflow-privacy's model"
        )
    dp.engine = "tfdpmech"  # "auto" would pick tensorflow-privacy's DPModel where it imports: not this model
    dp.release_at_fit = True  # the first fit records the release, after its data passed every check
    keras_fit = keras_fit_of(model)  # a keras-hub task's own fit would preprocess the sampled batches again

    deferred = {}  # compile's arguments while a run without n waits for its first fit (.poisson_calibration)
    scoring = {"compiled": False}  # whether evaluate compiled the deferred loss and metrics (before that fit)

    def compile(optimizer=None, loss=None, metrics=None, loss_weights=None, **kwargs):  # optimizer None: the run's own
        if kwargs:
            raise TypeError(f"a private model's compile takes optimizer, loss, metrics and loss_weights; got "
                            f"{sorted(kwargs)}")
        if isinstance(optimizer, str):
            optimizer = _optimizer_from_name(optimizer)
        if loss is None and is_pipeline_model(model):  # keras-hub's "auto" loss of its classifiers and causal LMs
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        arguments = dict(loss=loss, metrics=metrics or (), optimizer=optimizer, loss_weights=loss_weights)
        if dp.n is None:  # σ needs n: the model is compiled at the first fit; every check that needs no data now
            dp._refuse_second_compile()
            checked = dp._checked_model(model, loss, loss_weights)
            if dp.multiworker is not None:
                dp._require_n("a run under MultiWorkerMirroredStrategy")
            deferred.clear()
            deferred.update(model=checked, loss=loss, metrics=arguments["metrics"], optimizer=optimizer)
            scoring["compiled"] = False  # evaluate compiles these loss and metrics on its next call
            return
        dp.compile(model, **arguments)
        model.fit = fit  # under MultiWorkerMirroredStrategy compile installed its fit: it runs from here

    def compile_for(n: int) -> None:
        """A run without n: calibrate σ to the n records the first fit trains on, then compile (nothing charged)."""
        if not deferred or dp.release is not None:  # n given, or set by the first fit: the data's checks compare it
            return
        if dp.model is not None and dp.n != n:  # an earlier fit's checks failed after compile: compile again
            dp.model = None
        dp.calibrate(n, from_fit=True)
        if dp.model is None:  # the model passed its checks at compile: compiled as it stands, not probed again
            dp._compile_checked(**deferred)

    def fit(x=None, y=None, epochs=None, callbacks=None, sample_weight=None, class_weight=None, validation_split=0.0,
            **kwargs):
        unsupported = sorted(k for k in kwargs if k in FIT_ARGUMENTS_FIXED_BY_THE_RELEASE)
        if unsupported:
            raise TypeError(
                f"{unsupported} do not apply to a DP-SGD model: fit draws Poisson batches from all the records it "
                "trains on itself; pass the records (x, y, and sample_weight, class_weight or validation_split if "
                "you use them)"
            )
        if dp.model is None and not deferred:
            raise RuntimeError("compile the private model before fit (model.compile(optimizer, loss, metrics))")
        # a resumed or second fit: the rest
        left = dp.epochs if dp.steps is None else (dp.steps - dp.steps_taken()) // dp.steps_per_epoch
        epochs = left if epochs is None else epochs
        if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or not 1 <= epochs <= left:
            raise ValueError(f"epochs={epochs!r}: the privacy budget covers 1 to {left} epochs (of the run's "
                             f"{dp.epochs}); pass at most {left} or make the model private again with more epochs "
                             "(and a larger ε): a new run composes with this one in its ledger")
        weights = None
        if needs_preprocessing(model) and not is_run_dataset(x):  # a keras-hub task on raw text: its preprocessor
            x, y, sample_weight = preprocess_records(model, x, y, sample_weight)
            if kwargs.get("validation_data") is not None:
                kwargs["validation_data"] = preprocess_records(model, *_unpacked(kwargs["validation_data"]))
        check_text_inputs(model, x)  # a keras-hub model's ids, masks and lengths: before the release
        if y is None and is_dataset(x) and not is_run_dataset(x):  # single records: read into arrays (or refused)
            x, y, weights = records_from_dataset(x, model)
        elif y is None and is_record_source(x):  # read by index at each step (.record_sources)
            x, y, weights = records_from_source(x)
            refuse_batches([x.shape[1:]], model, "record source")
        elif is_array_like(x):  # an h5py / zarr array: read by index at each step
            x = lazy_array(x)
        if isinstance(x, LazyRows) and validation_split:
            raise ValueError("validation_split holds out records of an in-memory array; for records read by index "
                             "pass validation_data=(x_val, y_val) instead")
        if weights is not None:
            if sample_weight is not None or class_weight is not None:
                raise ValueError("these records carry their weights (x, y, w); pass no sample_weight or "
                                 "class_weight besides")
            sample_weight = weights
        given = [name for name, value in (("sample_weight", sample_weight), ("class_weight", class_weight),
                                          ("validation_split", validation_split or None)) if value is not None]
        if y is None and not isinstance(x, (np.ndarray, LazyRows)):
            if given:
                raise ValueError(f"{given} apply to the records fit(x, y, ...) samples from; a dataset of the run's "
                                 "batches already carries them: pass model.dp_sgd.dataset(x, y, sample_weight=w)")
            if not is_run_dataset(x):
                raise ValueError(
                    f"fit takes the private records as arrays, fit(x, y), and draws the Poisson batches itself; got "
                    f"x={type(x).__name__} without y. A dataset of one's own (shuffled batches, whatever its third "
                    "element) does not have the Poisson ε the ledger records; pass fit(x_private, y_private) or "
                    "fit(model.dp_sgd.dataset(x_private, y_private))"
                )
            if dp.n is None:
                dp._require_n("a dataset of the run's batches")
            data = x
        else:
            data, kwargs = _record_dataset(dp, x, y, sample_weight, class_weight, validation_split, kwargs,
                                           compile_for)
        callbacks = with_averaged_evaluation(model, [*(callbacks or ()), dp.callback(verbose=0)])
        if dp.release is None and dp.multiworker is None:  # every check passed: the budget is committed now
            dp._record_release()
        if dp.multiworker is not None:  # joins the workers, records the release on the chief, then trains
            return dp.multiworker_fit(data, epochs=int(epochs), callbacks=callbacks, **kwargs)
        taken = dp.steps_taken()
        try:
            return keras_fit(model, data, epochs=int(epochs), callbacks=callbacks, **kwargs)
        except tf.errors.InvalidArgumentError as exc:  # a failing step applies nothing (train_step.py)
            raise ValueError(
                f"fit failed on the data ({_reason(exc)}); a DP-SGD step that fails applied nothing, so the run "
                f"stays at its step {dp.steps_taken()} of {dp.steps} ({dp.steps_taken() - taken} taken in this fit), "
                "its release unchanged: correct the records and call fit again to continue it") from exc

    keras_evaluate, keras_test_on_batch, keras_train_on_batch = (
        type(model).evaluate, type(model).test_on_batch, type(model).train_on_batch)

    def scoring_compiled() -> None:
        """Before a run without n compiles (its first fit): the model compiled with the loss and metrics alone, to
        score it (no privacy cost: nothing is trained or released). Once: a later call reuses its trace."""
        if deferred and dp.model is None and not scoring["compiled"]:
            type(model).compile(model, optimizer="sgd", loss=dp._loss(deferred["loss"], keras_reduction(deferred["loss"])),
                                loss_weights=getattr(dp, "loss_weights", None),
                                metrics=keras_metrics(deferred["metrics"]))  # the optimizer is never used
            scoring["compiled"] = True

    def evaluate(*args, **kwargs):
        scoring_compiled()
        return keras_evaluate(model, *args, **kwargs)

    def test_on_batch(*args, **kwargs):
        scoring_compiled()
        return keras_test_on_batch(model, *args, **kwargs)

    def train_on_batch(*args, **kwargs):
        if deferred and dp.model is None:
            raise ValueError(
                "train_on_batch trains on a batch of one's own, which the run did not draw; this DPSGD run (without "
                "n) calibrates its noise to the records its first fit trains on and records its release there: "
                "train it with model.fit(x, y) (the private model's fit); nothing has been trained")
        return keras_train_on_batch(model, *args, **kwargs)

    model.compile = compile
    model.fit = fit
    model.evaluate = evaluate
    model.test_on_batch = test_on_batch
    model.train_on_batch = train_on_batch
    model.dp_sgd = dp
    model.privacy_ledger = dp.ledger
    return model


def _record_dataset(dp, x, y, sample_weight, class_weight, validation_split, kwargs, compile_for):
    """The run's batches of the records ``fit`` trains on, with their weights; the validation part in ``kwargs``.

    Every check runs here, before the release: a split that leaves other than n records, weights, classes. A run
    without n is calibrated to the records trained on and compiled (``compile_for``) once their weights passed."""
    total = record_count(x)
    if validation_split:
        if kwargs.get("validation_data") is not None:
            raise ValueError("pass validation_data or validation_split, not both (Keras would ignore the split)")
        x, y, sample_weight, held = split_for_validation(x, y, sample_weight, validation_split)
        if dp.n is not None and record_count(x) != dp.n and not dp.n_from_fit:
            raise ValueError(
                f"validation_split={validation_split} holds out the last {total - record_count(x)} of {total} records "
                f"and leaves {record_count(x)} to train on, but the run's noise was calibrated for n={dp.n}; make the "
                f"model private with DPSGD(..., n={record_count(x)}) (the records it trains on), or without n (σ "
                "is then calibrated to the records the first fit trains on)")
        kwargs = {**kwargs, "validation_data": held if held[2] is not None else held[:2]}
    if class_weight is not None:
        if sample_weight is not None:
            raise ValueError("pass sample_weight or class_weight, not both; for both, multiply them into one "
                             "sample_weight")
        sample_weight = class_weight_to_sample_weight(class_weight, y)
    if sample_weight is not None:
        sample_weight = check_sample_weight(sample_weight, record_count(x))
        if sample_weight.ndim > 1:  # one weight per position: carried with the labels (.position_weights)
            check_position_weights(sample_weight, y)
            y, sample_weight = with_position_weights(y, sample_weight), None
    if dp.users is None:
        compile_for(record_count(x))
    return dp.dataset(x, y, sample_weight=sample_weight), kwargs


def _reason(exc) -> str:
    """The line of a TensorFlow runtime error that says what was wrong (``indices[3,0] = 50 is not in [0, 10)``)."""
    lines = [line.strip() for line in str(getattr(exc, "message", exc)).splitlines() if line.strip()]
    said = [line for line in lines if not line.startswith(("Graph execution error", "Detected at node", "File ", "["))]
    return (said[-1] if said else lines[-1] if lines else type(exc).__name__)[:300]


def _unpacked(data) -> tuple:
    """``(x, y, sample_weight)`` of ``validation_data``: a dataset, or a tuple as Keras takes it."""
    if is_dataset(data) or not isinstance(data, (tuple, list)):
        return data, None, None
    x, y, w = keras.utils.unpack_x_y_sample_weight(tuple(data))
    return x, y, w


def _optimizer_from_name(name: str):
    try:
        optimizer = keras.optimizers.get(name)
    except ValueError as exc:
        raise ValueError(f"optimizer={name!r} is not a Keras optimizer name; pass e.g. 'adam' or an instance") from exc
    return optimizer
