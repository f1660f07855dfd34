"""Per-position weights: a ``sample_weight`` of shape ``(n, T)`` for a loss with one value per position.

A language model's next-token loss has one value per position, and keras-hub's ``CausalLM`` preprocessor
yields ``(x, y, sample_weight)`` with ``sample_weight = padding_mask[..., 1:]``: a weight per position, 0 on
padding. Under DP-SGD these weights are part of the record: they travel with it through the Poisson
sampler inside the labels, ``{"targets": y, POSITION_WEIGHTS: w}`` (:func:`with_position_weights`), and the
DP step weighs the record's per-position losses with them before reducing them to the record's loss
(:func:`tfdpmech.mechanisms.dpsgd.clipping.clipped_sums.per_example_loss`). The record is sampled and clipped
as one unit; a position of weight 0 contributes nothing.
"""

from __future__ import annotations

import numpy as np

__all__ = ["POSITION_WEIGHTS", "is_position_weighted", "check_position_weights", "with_position_weights",
           "position_weighted_loss", "split_position_weights"]

POSITION_WEIGHTS = "tfdpmech_position_weights"


def is_position_weighted(y) -> bool:
    """Whether ``y`` carries per-position weights (:func:`with_position_weights`)."""
    return isinstance(y, dict) and POSITION_WEIGHTS in y


def check_position_weights(weights: np.ndarray, y) -> None:
    """Per-position weights must have one weight per position of the labels: ``y``'s leading shape.

    Raises:
        ValueError: labels of several outputs, or a shape that is not a leading part of ``y``'s.
    """
    if isinstance(y, (list, tuple, dict)):
        raise ValueError(f"sample_weight of shape {weights.shape} weighs positions of one output's labels; this model "
                         "has several outputs: pass one weight per record, shape (n,)")
    label_shape = tuple(np.shape(y))
    if label_shape[:weights.ndim] != tuple(weights.shape):
        raise ValueError(f"sample_weight of shape {tuple(weights.shape)} must weigh the labels' positions: y has shape "
                         f"{label_shape}, so pass shape {label_shape[:weights.ndim]} (keras-hub's padding mask of the "
                         "targets), or one weight per record, shape (n,)")


def with_position_weights(y, weights: np.ndarray) -> dict:
    """The labels with their per-position weights, as one structure the sampler carries record by record."""
    return {"targets": y, POSITION_WEIGHTS: weights}


def split_position_weights(y):
    """``(labels, per-position weights or None)``."""
    if is_position_weighted(y):
        return y["targets"], y[POSITION_WEIGHTS]
    return y, None


def position_weighted_loss(loss_fn):
    """``(y, y_pred) -> (B,)`` for labels that carry their per-position weights: ``loss_fn(targets, y_pred, w)``."""
    def fn(y, y_pred):
        targets, weights = split_position_weights(y)
        return loss_fn(targets, y_pred, weights) if weights is not None else loss_fn(targets, y_pred)
    return fn
