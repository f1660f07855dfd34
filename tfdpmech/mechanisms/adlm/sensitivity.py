"""AdLM's sensitivities: Δ_h0 of the first affine layer (Lemma 3) and the per-record ε they prove.

Phan, Wu, Hu, Dou, "Adaptive Laplace Mechanism: Differential Privacy Preservation in Deep
Learning", ICDM'17 (arXiv:1709.05750). Also the structural checks the sensitivities rest on: the
first ``Dense``/``Conv2D`` layer is the private affine transformation ``h_0``, and the last hidden
layer is bounded in [0, 1] (Lemma 5's loss sensitivity).
"""

from __future__ import annotations

import keras
import numpy as np

from ...layers.unit_clip import UnitClip
from ...validation import check_choice
from .taylor_cross_entropy import loss_sensitivity

__all__ = [
    "DELTA_H0_POLICIES",
    "first_affine_layer",
    "check_bounded_last_hidden",
    "first_layer_geometry",
    "first_layer_sensitivity",
    "model_sensitivities",
    "provable_epsilon_per_record",
]

DELTA_H0_POLICIES = ("paper_literal", "fan_in", "reference_code", "shared_input")
AFFINE = (keras.layers.Dense, keras.layers.Conv2D)


def first_affine_layer(model: keras.Model):
    """Return the first ``Dense``/``Conv2D`` layer: the private affine transformation ``h_0``.

    Raises:
        ValueError: the model has no such layer.
    """
    for layer in model.layers:
        if isinstance(layer, AFFINE):
            return layer
    raise ValueError("the model has no Dense or Conv2D layer to act as the private first affine layer h_0")


def check_bounded_last_hidden(model: keras.Model) -> int:
    """Check the layer feeding the output is bounded in [-1, 1] and return its width ``|h_(k)|``.

    AdLM's loss sensitivity (Lemma 5) holds only if every unit of the last hidden layer lies in
    [0, 1] (|·| <= 1 suffices); the last layer must be a ``Dense`` producing the logits.

    Raises:
        ValueError: the last layer is not a Dense, or the layer before it is not a
            :class:`~tfdpmech.layers.UnitClip`.
    """
    layers = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    if len(layers) < 2 or not isinstance(layers[-1], keras.layers.Dense):
        raise ValueError(
            f"model {model.name!r} must end with a Dense output layer producing the logits; got "
            f"{type(layers[-1]).__name__ if layers else 'no layers'}"
        )
    before = layers[-2]
    if not isinstance(before, UnitClip):
        raise ValueError(
            f"the last hidden layer of model {model.name!r} is {type(before).__name__} ({before.name!r}), "
            "which is not bounded; the loss sensitivity needs it in [0, 1]. Insert tfdpmech.layers.UnitClip() "
            "right before the output Dense layer"
        )
    return int(layers[-1].kernel.shape[0])


def first_layer_geometry(layer) -> dict:
    """Counts of the first affine layer that the Δ_h0 policies use.

    Returns:
        dict with ``d`` (input features), ``fan_in`` (inputs of one neuron), ``neurons`` (all
        output units) and ``positions`` (neurons of one output map; all units for Dense).
    """
    in_shape = tuple(int(s) for s in layer.input.shape[1:])
    out_shape = tuple(int(s) for s in layer.output.shape[1:])
    d = int(np.prod(in_shape))
    if isinstance(layer, keras.layers.Conv2D):
        kh, kw = layer.kernel_size
        fan_in = kh * kw * in_shape[-1]
        positions = out_shape[0] * out_shape[1]
    else:
        fan_in = in_shape[-1]
        positions = out_shape[-1]
    return {"d": d, "fan_in": int(fan_in), "neurons": int(np.prod(out_shape)), "positions": int(positions)}


def first_layer_sensitivity(policy: str, *, d: int, fan_in: int, neurons: int, positions: int) -> float:
    """Δ_h0 under an explicit counting policy (Lemma 3, Eqs. 17–18, which do not say what |h0| and d
    are for a convolutional first layer).

    * ``paper_literal``: ``2·|h0|·d`` with |h0| all output neurons (Eq. 18 read literally).
    * ``fan_in``: ``2·|h0|·fan_in``.
    * ``reference_code``: ``2·positions·fan_in``, the authors' code (MNIST: 2·14·14·25 = 9800).
    * ``shared_input``: ``d`` (Lemma 4's batch-sum argument: one noisy x̄ shared by all neurons).
    """
    check_choice(policy, "delta_h0_policy", DELTA_H0_POLICIES)
    return float(
        {
            "paper_literal": 2 * neurons * d,
            "fan_in": 2 * neurons * fan_in,
            "reference_code": 2 * positions * fan_in,
            "shared_input": d,
        }[policy]
    )


def model_sensitivities(model: keras.Model, policy: str) -> dict:
    """Δ_h0 (Lemma 3, under ``policy``) of the first affine layer and Δ_F (Lemma 5) of the bounded head.

    Returns:
        ``{"delta_h0", "delta_F", "last_hidden"}`` and the counts of :func:`first_layer_geometry`.

    Raises:
        ValueError: no Dense/Conv2D layer, an unbounded last hidden layer, an unknown policy.
    """
    hidden = check_bounded_last_hidden(model)
    if model.layers[-1].use_bias:
        hidden += 1  # the output bias is a constant-1 hidden unit for Δ_F (Lemma 5 has no output bias)
    geometry = first_layer_geometry(first_affine_layer(model))
    return {"delta_h0": first_layer_sensitivity(policy, **geometry),
            "delta_F": loss_sensitivity(int(model.output_shape[-1]), hidden), **geometry, "last_hidden": hidden}


def provable_epsilon_per_record(*, eps2, eps3, batch_size, d, delta_h0, delta_f, eps1=0.0) -> float:
    """Per-record ε of ``per_example_frozen`` AdLM: ``ε1 + |L|·d·ε2/Δ_h0 + 2|L|·ε3/Δ_F``.

    Each record's features get Laplace noise of scale ``Δ_h0/(|L|β_j ε2)`` with ``Σβ = d`` and
    range 1 per feature; its order-1 label coefficients ``1/2 - y`` change by 1 in two classes.
    Pass ``eps1=0`` when the relevance step has no proven bound (and report none instead).
    """
    return float(eps1 + batch_size * d * eps2 / delta_h0 + 2.0 * batch_size * eps3 / delta_f)
