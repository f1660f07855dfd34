"""Models of the DP-ERM recipe (Kang et al. 2020: Algorithm 1 and the experiments of §6).

* :func:`linear_model`: ``Dense(1 or M, use_bias=False)`` with zero initial weights (θ_0 = 0),
  ``keras.regularizers.L2(λ/2)`` (Keras adds ``l2·‖w‖²``, so λ/2 gives strong convexity λ) and
  :class:`L2BallConstraint` (projection onto ‖θ‖ <= D after every step).
* :func:`paper_mlp`: the paper's one-hidden-layer MLP (hidden size = input size).
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from ...validation import check_positive_int, check_real

__all__ = ["L2BallConstraint", "linear_model", "paper_mlp"]


@keras.saving.register_keras_serializable(package="tfdpmech")
class L2BallConstraint(keras.constraints.Constraint):
    """Projection of a whole weight tensor onto the L2 (Frobenius) ball of radius D: ``w·min(1, D/‖w‖)``.

    Keras applies constraints after every optimizer update, which turns gradient descent into
    projected gradient descent (Theorem 2 assumes ‖θ‖ <= D).

    Args:
        radius: D > 0.
    """

    def __init__(self, radius):
        radius = float(radius)
        if not (math.isfinite(radius) and radius > 0):
            raise ValueError(f"radius must be finite and > 0, got {radius}")
        self.radius = radius

    def __call__(self, w):
        norm = tf.sqrt(tf.reduce_sum(tf.square(w)))
        scale = tf.minimum(tf.constant(1.0, w.dtype), self.radius / tf.maximum(norm, tf.constant(1e-30, w.dtype)))
        return w * scale

    def get_config(self):
        return {"radius": self.radius}


def linear_model(d: int, num_classes: int = 2, *, l2: float = 0.01, theta_bound=None, use_bias: bool = False,
                 regularize_bias: bool = True, name: str = "dp_erm_linear") -> keras.Model:
    """Logistic regression for DP-ERM: logits ``x θ``, θ_0 = 0, L2(λ/2), projection onto ‖θ‖ <= D.

    Args:
        d: number of features.
        num_classes: 2 gives one logit (use ``BinaryCrossentropy(from_logits=True)`` on {0, 1} labels);
            M > 2 gives M logits (``SparseCategoricalCrossentropy(from_logits=True)``).
        l2: λ of ``(λ/2)‖θ‖²`` (passed to Keras as ``L2(λ/2)``); 0 for no regularisation.
        theta_bound: D; None for no projection.
        use_bias: add an intercept (the paper's model has none; with shared noise an unregularised
            intercept absorbs the noise, see ``docs/mechanisms/input_perturbation.md``).
        regularize_bias: apply ``L2(λ/2)`` to the intercept too (needed with shared noise).
        name: model name.

    Returns:
        An uncompiled ``keras.Sequential``.
    """
    d = check_positive_int(d, "d")
    units = 1 if check_positive_int(num_classes, "num_classes", minimum=2) == 2 else num_classes
    l2 = check_real(l2, "l2", minimum=0.0, hint="λ of (λ/2)‖θ‖², 0 for no regularisation")
    reg = keras.regularizers.L2(l2 / 2.0) if l2 > 0 else None  # Keras adds l2·‖w‖², not (l2/2)‖w‖²
    constraint = None if theta_bound is None else L2BallConstraint(theta_bound)
    layer = keras.layers.Dense(
        units, use_bias=use_bias, kernel_initializer="zeros", bias_initializer="zeros", kernel_regularizer=reg,
        bias_regularizer=reg if (use_bias and regularize_bias) else None, kernel_constraint=constraint,
        bias_constraint=constraint if use_bias else None, name="theta",
    )
    return keras.Sequential([keras.Input(shape=(d,)), layer], name=name)


def paper_mlp(d: int, num_classes: int = 2, *, hidden_units=None, name: str = "dp_erm_mlp") -> keras.Model:
    """The paper's MLP (§6): one hidden layer as wide as the input (ReLU: §6 leaves it unstated), then logits."""
    d = check_positive_int(d, "d")
    units = 1 if check_positive_int(num_classes, "num_classes", minimum=2) == 2 else num_classes
    hidden = d if hidden_units is None else check_positive_int(hidden_units, "hidden_units")
    return keras.Sequential([
        keras.Input(shape=(d,)),
        keras.layers.Dense(hidden, activation="relu", name="hidden"),
        keras.layers.Dense(units, name="logits"),
    ], name=name)
