"""The parts of a CDBN model that :class:`~tfdpmech.mechanisms.pcdbn.PrivateCDBN` trains, found and checked.

A model :func:`~tfdpmech.mechanisms.pcdbn.networks.cdbn_network` builds, or one of the same shape:
``ConvRBM… → Flatten → [Dense(sigmoid), the frozen random FC] → head``, where the head is ``Dense(C)``,
or, for the Gaussian calibration of the head's release, ``FeatureMap(clip_norm=True) → Dense(C,
use_bias=False)``. Checked when ``make_private`` is called, before anything is released.
"""

from __future__ import annotations

import dataclasses

import keras

from ..functional_head.feature_map import FeatureMap
from .conv_rbm import ConvRBM

__all__ = ["CDBNParts", "cdbn_parts"]


@dataclasses.dataclass(frozen=True)
class CDBNParts:
    """The model and the layers the mechanism sets: ConvRBM layers, the random FC (or None), the head's Dense."""

    model: keras.Model
    layers: tuple
    fc: object
    head: object


def cdbn_parts(model, num_classes: int, head_mechanism: str) -> CDBNParts:
    """The parts of ``model``; TypeError naming the shape expected and :func:`cdbn_network` otherwise."""
    gaussian = head_mechanism == "gaussian"
    head_words = ("FeatureMap(clip_norm=True), Dense(C, use_bias=False) (the Gaussian head)" if gaussian
                  else "Dense(C) with a bias and no activation")
    expected = (f"a keras.Sequential of ConvRBM layers, Flatten, optionally a sigmoid Dense (the frozen random FC), "
                f"then {head_words}, C = num_classes = {num_classes}; cdbn_network(layers, input_shape, num_classes"
                f"{', head_mechanism=' + repr(head_mechanism) if gaussian else ''}) builds one")
    if not isinstance(model, keras.Sequential):
        raise TypeError(f"model must be {expected}; got {type(model).__name__}")
    layers = list(model.layers)
    convs = []
    while layers and isinstance(layers[0], ConvRBM):
        convs.append(layers.pop(0))
    fc = None
    if (not convs or not layers or not isinstance(layers.pop(0), keras.layers.Flatten) or not layers
            or not isinstance(layers[-1], keras.layers.Dense)):
        raise TypeError(f"model must be {expected}; got the layers {[type(l).__name__ for l in model.layers]}")
    if not model.built:
        raise TypeError(f"model: build it before make_private, starting the Sequential with keras.Input(shape); "
                        f"it must be {expected}")
    head = layers.pop()
    if gaussian:
        if not layers or not (isinstance(layers[-1], FeatureMap) and layers[-1].clip_norm) or head.use_bias:
            raise TypeError(f"model must be {expected} (the head's statistics are computed on features clipped to "
                            "unit norm with a bias feature); got the layers "
                            f"{[type(l).__name__ for l in model.layers]}")
        layers.pop()
    elif head.use_bias is False:
        raise TypeError(f"model must be {expected}; its last Dense has no bias")
    if layers:
        fc = layers.pop(0)
        if not isinstance(fc, keras.layers.Dense) or _activation(fc) != "sigmoid" or not fc.use_bias or layers:
            raise TypeError(f"model must be {expected}; got the layers {[type(l).__name__ for l in model.layers]}")
    if head.units != num_classes or _activation(head) != "linear":
        raise TypeError(f"model must be {expected}; its last Dense has {head.units} units and activation "
                        f"{_activation(head)!r} (the head outputs logits)")
    return CDBNParts(model, tuple(convs), fc, head)


def _activation(layer) -> str:
    return layer.get_config()["activation"]
