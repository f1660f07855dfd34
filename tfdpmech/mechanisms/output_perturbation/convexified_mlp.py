"""Lu et al.'s model: an MLP with bounded hidden activations trained with the convexified loss.

Lu, Asghar, Kaafar, Webb, Dickinson, "A Differentially Private Framework for Deep Learning with
Convexified Loss Functions": :func:`convexified_mlp` builds the ``m → hidden (tanh) → C`` network
with ``L2(c)`` on every kernel (Table 4), and :func:`logits_model_from` strips a softmax output so
that the output-perturbation layer sees the logits.
"""

from __future__ import annotations

import keras

from .convexified_cross_entropy import ConvexifiedCrossEntropy
from ...validation import check_positive_int, check_positive_real

__all__ = ["convexified_mlp", "logits_model_from", "activation_name", "LINEAR_ACTIVATIONS"]

LINEAR_ACTIVATIONS = ("linear", None)


def convexified_mlp(input_dim: int, num_classes: int, *, hidden_units: int = 128, l2: float = 0.001,
                     activation: str = "tanh", alpha: float = 1.0, learning_rate: float = 0.001,
                     compile: bool = True) -> keras.Model:
    """The paper's model (Table 4): ``m → hidden (tanh) → C`` logits, ``L2(c)`` on every kernel.

    The output is linear (logits); with ``compile`` the model is compiled with Adam and
    :class:`ConvexifiedCrossEntropy` (``alpha``) on one-hot labels.
    """
    m = check_positive_int(input_dim, "input_dim")
    c = check_positive_int(num_classes, "num_classes", minimum=2)
    h = check_positive_int(hidden_units, "hidden_units")
    l2 = check_positive_real(l2, "l2", hint="the sensitivity bound needs L2(c) with c > 0 on every kernel")
    reg = keras.regularizers.L2(l2)
    model = keras.Sequential([
        keras.Input(shape=(m,)),
        keras.layers.Dense(h, activation=activation, kernel_regularizer=reg),
        keras.layers.Dense(c, kernel_regularizer=keras.regularizers.L2(l2)),
    ])
    if compile:
        model.compile(optimizer=keras.optimizers.Adam(learning_rate),
                      loss=ConvexifiedCrossEntropy(alpha, from_logits=True, sparse=False),
                      metrics=["categorical_accuracy"])
    return model


def activation_name(layer) -> str | None:
    """The name of a layer's activation function (None for a layer without one)."""
    act = getattr(layer, "activation", None)
    if act is None:
        return None
    name = getattr(act, "__name__", None) or str(act)
    return name


def logits_model_from(model) -> keras.Model:
    """A model that returns the logits of ``model`` (Algorithm 1 perturbs z_T, line 10), sharing its weights.

    ``model`` ends in ``Dense(C, activation="softmax")`` (the last Dense is cloned with a linear
    activation and its weights copied), in ``Activation("softmax")`` (dropped), or is already
    linear (returned as is).

    Raises:
        ValueError: the model's output layer is neither softmax nor linear.
    """
    if not isinstance(model, keras.Model):
        raise TypeError(f"model must be a keras.Model, got {type(model).__name__}")
    last = model.layers[-1]
    act = activation_name(last)
    inputs = model.inputs[0] if len(model.inputs) == 1 else model.inputs
    if isinstance(last, keras.layers.Activation) and act == "softmax":
        return keras.Model(inputs, last.input, name=f"{model.name}_logits")
    if isinstance(last, keras.layers.Dense) and act == "softmax":
        cfg = last.get_config()
        cfg.update(activation="linear", name=f"{last.name}_logits")
        clone = keras.layers.Dense.from_config(cfg)
        out = clone(last.input)
        clone.set_weights(last.get_weights())
        return keras.Model(inputs, out, name=f"{model.name}_logits")
    if act in LINEAR_ACTIVATIONS:
        return model
    raise ValueError(f"the last layer {last.name!r} has activation {act!r}; expected softmax or linear")
