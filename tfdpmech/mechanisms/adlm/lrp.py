"""Layer-wise relevance propagation (LRP) with the ε-stabilised rule, on Keras models.

AdLM (Phan et al., ICDM'17, §II-C, Eqs. 4–8) measures the relevance of every input feature with
LRP: seeded at the output, relevance flows down through each layer by the ε-rule
``R_p = a_p · Σ_m w_pm · R_m / (z_m + μ·sign(z_m))``. The private, dataset-averaged relevance built
on it is in :mod:`tfdpmech.mechanisms.adlm.private_relevance`.

Only chain models (Sequential, or functional with one path) built from the layers
listed in :data:`SUPPORTED_LAYERS` are handled; anything else is refused with a
``TypeError`` rather than given a silently wrong relevance. LRP is written here because
no maintained LRP library runs on eager TF 2.15 (see DESIGN.md §2).

Numerics use ``tf.*`` ops only, so the module runs with Keras 2.15 and Keras 3.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from ...validation import check_array, check_choice, check_labels, check_positive_int

__all__ = ["SUPPORTED_LAYERS", "STARTS", "lrp_relevance", "prepare_lrp", "lrp_batches"]

STARTS = ("true_class_logit", "predicted_logit", "all_logits")

SUPPORTED_LAYERS = (
    "InputLayer",
    "Dense",
    "Conv2D (channels_last, groups=1)",
    "MaxPooling2D",
    "AveragePooling2D",
    "GlobalAveragePooling2D",
    "Flatten",
    "Reshape",
    "Dropout",
    "ReLU",
    "Activation('relu' | 'linear')",
    "Activation('softmax' | 'sigmoid') / Softmax after the output layer",
    "any layer with the class attribute lrp_passthrough = True",
)

_L = keras.layers
_AFFINE = (_L.Dense, _L.Conv2D)
_HIDDEN_ACTIVATIONS = ("relu", "linear")
_OUTPUT_ACTIVATIONS = ("softmax", "sigmoid", "linear")


# ----------------------------------------------------------------------------------------------
# The LRP plan: one step per layer, each with the rule that moves relevance through it.
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Step:
    """How one layer passes activations up and relevance down.

    ``rule`` is ``"identity"`` (relevance unchanged), ``"route"`` (relevance follows the
    Jacobian of ``linear``: max-pool winner, reshapes) or ``"epsilon"`` (Eqs. 4–7 on the
    linear map ``linear``: the pre-activation of Dense/Conv2D, or an average pool).
    """

    layer: object
    rule: str
    forward: Callable
    linear: Callable | None = None


@dataclasses.dataclass(frozen=True)
class _Plan:
    steps: tuple          # up to and including the output (logit) layer
    head: tuple           # output activations applied to the logits, only to check the chain
    input_shape: tuple
    output_shape: tuple


def _activation_name(layer) -> str:
    fn = getattr(layer, "activation", None)
    return "linear" if fn is None else getattr(fn, "__name__", type(fn).__name__)


def _unsupported(layer, why: str = "") -> TypeError:
    listed = ", ".join(SUPPORTED_LAYERS)
    extra = f" ({why})" if why else ""
    return TypeError(
        f"LRP does not support layer {layer.name!r} of class {type(layer).__name__}{extra}; "
        f"supported layers: {listed}"
    )


def _call(layer) -> Callable:
    # training=False: dropout off, tfdpmech noise layers silent, inference statistics.
    return lambda a: tf.cast(layer(a, training=False), tf.float32)


def _preactivation(layer, a):
    """z = W·a + b of a Dense or Conv2D layer, i.e. the layer without its activation."""
    kernel = tf.cast(layer.kernel, a.dtype)
    if isinstance(layer, _L.Dense):
        z = tf.tensordot(a, kernel, axes=[[a.shape.rank - 1], [0]])
    else:
        z = tf.nn.convolution(
            a,
            kernel,
            strides=list(layer.strides),
            padding=layer.padding.upper(),
            dilations=list(layer.dilation_rate),
        )
    if layer.use_bias:
        z = z + tf.cast(layer.bias, a.dtype)
    return z


def _check_channels_last(layer) -> None:
    if getattr(layer, "data_format", "channels_last") != "channels_last":
        raise _unsupported(layer, f"data_format={layer.data_format!r}; only channels_last is supported")


def _affine_step(layer, is_output: bool) -> _Step:
    _check_channels_last(layer)
    if isinstance(layer, _L.Conv2D) and getattr(layer, "groups", 1) != 1:
        raise _unsupported(layer, f"groups={layer.groups}")
    pre = lambda a: _preactivation(layer, a)  # noqa: E731
    if is_output:
        # The output activation (softmax/sigmoid) is ignored: LRP starts from the logits.
        return _Step(layer, "epsilon", pre, pre)
    if _activation_name(layer) not in _HIDDEN_ACTIVATIONS:
        raise _unsupported(layer, f"hidden activation {_activation_name(layer)!r}; use relu or linear")
    return _Step(layer, "epsilon", _call(layer), pre)


def _layer_step(layer) -> _Step:
    """Classify one layer below (or at) the output layer."""
    if getattr(layer, "lrp_passthrough", False) is True:
        return _Step(layer, "identity", _call(layer))
    if isinstance(layer, (_L.AveragePooling2D, _L.GlobalAveragePooling2D)):
        _check_channels_last(layer)
        # Proportional redistribution = the ε rule on a linear map without bias (the paper names no pooling rule).
        return _Step(layer, "epsilon", _call(layer), _call(layer))
    if isinstance(layer, _L.MaxPooling2D):
        _check_channels_last(layer)
        # Winner-take-all: the gradient of the max routes relevance to the argmax (the paper names no pooling rule).
        return _Step(layer, "route", _call(layer), _call(layer))
    if isinstance(layer, (_L.Flatten, _L.Reshape)):
        # The gradient of a reshape is the inverse permutation (also covers channels_first Flatten).
        return _Step(layer, "route", _call(layer), _call(layer))
    if isinstance(layer, _L.Dropout):
        return _Step(layer, "identity", lambda a: a)
    if isinstance(layer, _L.ReLU) or (
        isinstance(layer, _L.Activation) and _activation_name(layer) in _HIDDEN_ACTIVATIONS
    ):
        return _Step(layer, "identity", _call(layer))
    raise _unsupported(layer)


def _is_output_side(layer) -> bool:
    """Layers allowed after the output layer: they do not change which logit is relevant."""
    if getattr(layer, "lrp_passthrough", False) is True or isinstance(layer, (_L.Dropout, _L.Softmax)):
        return True
    return isinstance(layer, _L.Activation) and _activation_name(layer) in _OUTPUT_ACTIVATIONS


def _chain_layers(model) -> list:
    """The model's layers in order, nested models flattened, input layers dropped."""
    out = []
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            out.extend(_chain_layers(layer))
        elif not isinstance(layer, _L.InputLayer):
            out.append(layer)
    return out


def _model_shapes(model) -> tuple[tuple, tuple]:
    inputs, outputs = getattr(model, "inputs", None), getattr(model, "outputs", None)
    if not inputs or not outputs:
        raise ValueError(
            "model has no defined inputs/outputs; build it with keras.Input(shape=...) "
            "(subclassed models are not supported)"
        )
    if len(inputs) != 1 or len(outputs) != 1:
        raise TypeError(f"LRP needs a model with one input and one output, got {len(inputs)} and {len(outputs)}")
    return tuple(inputs[0].shape[1:]), tuple(outputs[0].shape[1:])


def _build_plan(model) -> _Plan:
    if not isinstance(model, keras.Model):
        raise TypeError(f"model must be a keras.Model, got {type(model).__name__}")
    in_shape, out_shape = _model_shapes(model)
    layers = _chain_layers(model)
    affine = [i for i, layer in enumerate(layers) if isinstance(layer, _AFFINE)]
    if not affine:
        raise TypeError("LRP needs a Dense or Conv2D output layer whose pre-activation gives the logits")
    last = affine[-1]
    steps = tuple(
        _affine_step(layer, i == last) if i in affine else _layer_step(layer)
        for i, layer in enumerate(layers[: last + 1])
    )
    for layer in layers[last + 1 :]:
        if not _is_output_side(layer):
            raise _unsupported(layer, "after the output Dense/Conv2D only output activations may follow")
    out_layer = layers[last]
    head = (lambda z: tf.cast(out_layer.activation(z), tf.float32),) + tuple(_call(lay) for lay in layers[last + 1 :])
    return _Plan(steps, head, in_shape, out_shape)


# ----------------------------------------------------------------------------------------------
# Input checks
# ----------------------------------------------------------------------------------------------


def _check_mu(mu) -> float:
    if isinstance(mu, bool) or not isinstance(mu, numbers.Real) or not math.isfinite(mu) or mu < 0:
        raise ValueError(f"mu (the LRP stabiliser) must be a finite real >= 0, got {mu!r}; the default is 1.0")
    return float(mu)


def _check_x(x, input_shape: tuple) -> np.ndarray:
    x = check_array(x, "x", ndim_min=2)
    shape = x.shape[1:]
    if len(shape) != len(input_shape) or any(e is not None and e != s for e, s in zip(input_shape, shape)):
        raise ValueError(
            f"x has per-example shape {shape}, but the model expects {input_shape}; "
            "pass an array of shape (n, *model input shape)"
        )
    return x


def _check_y(y, start: str, n: int, output_shape: tuple):
    if start != "all_logits" and len(output_shape) != 1:
        raise ValueError(
            f"start={start!r} needs logits of shape (n, num_classes), the model outputs {output_shape}; "
            "use start='all_logits'"
        )
    if start != "true_class_logit":
        return None
    if y is None:
        raise ValueError("start='true_class_logit' needs labels y (one-hot or integer class ids)")
    y1h = check_labels(y, "y", num_classes=int(output_shape[0]))
    if len(y1h) != n:
        raise ValueError(f"y has {len(y1h)} labels but x has {n} examples")
    return y1h


def prepare_lrp(model, x, y, mu, start, batch_size):
    """Check the model (build its LRP plan) and the arguments; returns ``(plan, x, y1h, mu, start, batch_size)``."""
    start = check_choice(start, "start", STARTS)
    mu = _check_mu(mu)
    batch_size = check_positive_int(batch_size, "batch_size")
    plan = _build_plan(model)
    x = _check_x(x, plan.input_shape)
    y1h = _check_y(y, start, len(x), plan.output_shape)
    return plan, x, y1h, mu, start, batch_size


# ----------------------------------------------------------------------------------------------
# LRP on one batch
# ----------------------------------------------------------------------------------------------


def _sign(z):
    # sign(0) := +1 (Eq. 6), so the stabiliser never cancels a zero pre-activation.
    return tf.where(z >= 0, tf.ones_like(z), -tf.ones_like(z))


def _relevance_down(step: _Step, a, r, mu: float):
    """Relevance at a layer's input from the relevance at its output."""
    if step.rule == "identity":
        if r.shape != a.shape:
            raise _unsupported(step.layer, f"an identity layer for LRP changed the shape {a.shape} -> {r.shape}")
        return r
    with tf.GradientTape() as tape:
        tape.watch(a)
        z = step.linear(a)
    if step.rule == "route":
        return tape.gradient(z, a, output_gradients=r)
    # Eqs. 4–7: R_p = a_p · Σ_m w_pm · R_m / (z_m + μ·sign(z_m)); Jᵀs gives the sum over m.
    # divide_no_nan keeps μ = 0 with z = 0 finite (that unit then passes no relevance).
    s = tf.math.divide_no_nan(r, z + mu * _sign(z))
    return a * tape.gradient(z, a, output_gradients=s)


def _seed(logits, y1h, start: str):
    """Relevance at the output units (Eq. 8's F_x(θ)), zero at units that are not seeded."""
    if start == "all_logits":
        return logits
    if start == "predicted_logit":
        mask = tf.one_hot(tf.argmax(logits, axis=-1), logits.shape[-1], dtype=logits.dtype)
    else:
        mask = tf.constant(y1h, logits.dtype)
    return logits * mask


def _check_chain(model, plan: _Plan, xb, logits) -> None:
    """Refuse models whose layer list does not describe their computation (branches, shared layers)."""
    mine = logits
    for fn in plan.head:
        mine = fn(mine)
    ref = tf.cast(model(xb, training=False), tf.float32).numpy()
    mine = mine.numpy()
    scale = 1.0 + float(np.max(np.abs(ref)))
    if mine.shape != ref.shape or not np.allclose(mine, ref, rtol=1e-3, atol=1e-5 * scale):
        raise TypeError(
            "running the model's layers one after another does not reproduce model(x); LRP supports only "
            "single-path models (no branches, skips or shared layers) that are deterministic at inference"
        )


def _lrp_batch(model, plan: _Plan, xb, y1h, mu: float, start: str, verify: bool) -> np.ndarray:
    a = tf.constant(xb, tf.float32)
    inputs = []
    for step in plan.steps:
        inputs.append(a)
        a = step.forward(a)
    if verify:
        _check_chain(model, plan, inputs[0], a)
    r = _seed(a, y1h, start)
    for step, a_in in zip(reversed(plan.steps), reversed(inputs)):
        r = _relevance_down(step, a_in, r, mu)
    return r.numpy()


def lrp_batches(model, plan, x, y1h, mu, start, batch_size):
    """Yield (lo, hi, relevance of x[lo:hi]); memory stays O(batch_size)."""
    for lo in range(0, len(x), batch_size):
        hi = min(lo + batch_size, len(x))
        yb = None if y1h is None else y1h[lo:hi]
        yield lo, hi, _lrp_batch(model, plan, x[lo:hi], yb, mu, start, verify=lo == 0)


# ----------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------


def lrp_relevance(model, x, y=None, *, mu=1.0, start="true_class_logit", batch_size=256) -> np.ndarray:
    """Per-example input relevance by LRP with the ε-stabilised rule (AdLM Eqs. 4–8).

    Dense and Conv2D layers use their pre-activation ``z = W·a + b`` and
    ``R_in = a ⊙ Jᵀ(R_out / (z + μ·sign(z)))`` with ``sign(0) = +1``; average pools use
    the same rule without bias; max-pool sends relevance to the window's winner; ReLU,
    Dropout and layers with ``lrp_passthrough = True`` pass it unchanged. The output
    layer's activation is ignored: relevance is seeded on its logits.

    Args:
        model: a built single-input, single-output chain ``keras.Model`` of supported layers.
        x: inputs of shape ``(n, *model input shape)``, finite.
        y: labels (one-hot or integer ids), required for ``start="true_class_logit"``.
        mu: the stabiliser μ >= 0 (the paper gives none; 1.0 follows the authors' code).
        start: ``"true_class_logit"`` (seed = the true class's logit, zeros elsewhere),
            ``"predicted_logit"`` (the largest logit) or ``"all_logits"``.
        batch_size: examples per batch.

    Returns:
        float32 array of shape ``(n, *input_shape)``: relevance of every input feature.

    Raises:
        TypeError: unsupported model or layer (the message names it and lists the supported ones).
        ValueError: bad x (NaN/inf, wrong shape), missing or bad y, bad mu/start/batch_size.

    Reference: Phan et al., "Adaptive Laplace Mechanism", ICDM'17, §II-C (Eqs. 4–8; μ and the seed
    are not fixed by the paper), Algorithm 1 line 1.
    """
    plan, x, y1h, mu, start, batch_size = prepare_lrp(model, x, y, mu, start, batch_size)
    out = np.empty(x.shape, np.float32)
    for lo, hi, r in lrp_batches(model, plan, x, y1h, mu, start, batch_size):
        out[lo:hi] = r
    return out
