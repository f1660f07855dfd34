"""The loss of a model with several outputs: a list or dict of Keras losses and ``loss_weights``.

DP-SGD clips each record's gradient of its *total* loss, ``ℓ_i = Σ_k w_k ℓ_k(y_ik, ŷ_ik)`` over the
outputs k (Keras's weighted total, as ``model.compile(loss={...}, loss_weights={...})`` defines it), so
the per-record clipping bounds the record's influence through every output at once. :func:`check_output_losses`
validates the structure against the model's outputs before anything is released;
:func:`per_record_loss` is the per-record total the train step clips.
"""

from __future__ import annotations

import math
import numbers

import keras
import tensorflow as tf

from .clipped_sums import per_example_loss

__all__ = ["check_output_losses", "per_record_loss", "with_reduction", "keras_metrics"]


def _output_names(model) -> list[str]:
    return [str(name) for name in getattr(model, "output_names", None) or []]


def _by_output(value, names: list[str], what: str) -> list:
    """``value`` (a list/tuple in output order, or a dict keyed by output name) as a list in output order."""
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(names))
        if unknown:
            raise ValueError(f"{what} names {unknown}, which are not outputs of the model; its outputs are {names}")
        return [value.get(name) for name in names]
    if len(value) != len(names):
        raise ValueError(f"{what} has {len(value)} entries for a model with {len(names)} outputs {names}; give one "
                         "per output (None for an output that is not trained), or a dict keyed by output name")
    return list(value)


def check_output_losses(model, loss, loss_weights=None) -> None:
    """Check a list or dict ``loss`` (and ``loss_weights``) against ``model``'s outputs.

    Raises:
        TypeError: an entry that is not a ``keras.losses.Loss`` (or None), weights that are not numbers.
        ValueError: names that are not outputs, a count that differs from the outputs, no loss at all,
            a weight that is negative, NaN or infinite, or ``loss_weights`` without several losses.
    """
    if not isinstance(loss, (list, tuple, dict)):
        if loss_weights is not None:
            raise ValueError(f"loss_weights={loss_weights!r} weighs the losses of several outputs; pass loss as a list "
                             "or dict of keras.losses.Loss (one per output), or drop loss_weights")
        return
    names = _output_names(model)
    losses = _by_output(loss, names, "loss")
    for name, entry in zip(names, losses):
        if entry is not None and not isinstance(entry, keras.losses.Loss):
            raise TypeError(f"loss[{name!r}] must be a keras.losses.Loss instance (its reduction is set by the DP-SGD "
                            f"run) or None, got {type(entry).__name__}")
    if all(entry is None for entry in losses):
        raise ValueError(f"loss gives no output a loss ({loss!r}); give at least one keras.losses.Loss")
    if loss_weights is None:
        return
    if not isinstance(loss_weights, (list, tuple, dict)):
        raise TypeError(f"loss_weights must be a list or dict of numbers like loss, got {type(loss_weights).__name__}")
    for name, weight in zip(names, _by_output(loss_weights, names, "loss_weights")):
        if weight is None:
            continue
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not math.isfinite(weight) or weight < 0:
            raise ValueError(f"loss_weights[{name!r}]={weight!r}: a weight is a finite number >= 0")


def with_reduction(loss, reduction: str):
    """``loss`` (one Loss, or a list or dict of them) copied with the given reduction."""
    def copy(entry):
        if entry is None:
            return None
        config = entry.get_config()
        config["reduction"] = reduction
        return entry.__class__.from_config(config)
    if isinstance(loss, dict):
        return {name: copy(entry) for name, entry in loss.items()}
    if isinstance(loss, (list, tuple)):
        return [copy(entry) for entry in loss]
    return copy(loss)


def per_record_loss(model, loss, loss_weights=None):
    """``(y_true, y_pred) -> (B,)``: each record's (weighted total) loss, for one loss or one per output."""
    if not isinstance(loss, (list, tuple, dict)):
        return per_example_loss(loss)
    names = _output_names(model)
    losses = _by_output(loss, names, "loss")
    weights = [1.0] * len(names) if loss_weights is None else _by_output(loss_weights, names, "loss_weights")
    terms = [(k, per_example_loss(entry), 1.0 if w is None else float(w))
             for k, (entry, w) in enumerate(zip(losses, weights)) if entry is not None]

    def total(y_true, y_pred):
        y_true, y_pred = _by_output(y_true, names, "y"), _by_output(y_pred, names, "the model's outputs")
        return tf.add_n([tf.cast(fn(y_true[k], y_pred[k]), tf.float32) * w for k, fn, w in terms])

    return total


def keras_metrics(metrics):
    """``metrics`` as Keras's ``compile`` takes them: a list (from a list or tuple), a dict per output as given,
    None for none."""
    if not metrics:
        return None
    return dict(metrics) if isinstance(metrics, dict) else list(metrics)
