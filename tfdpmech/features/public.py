"""Features from a model trained on public data only, cut at a bounded layer."""

from __future__ import annotations

import math

import keras

from ..layers import UnitClip
from .extractor import FeatureExtractor

__all__ = ["public_features", "layer_bounds"]

_ACTIVATION_BOUNDS = {
    "sigmoid": (0.0, 1.0),
    "hard_sigmoid": (0.0, 1.0),
    "softmax": (0.0, 1.0),
    "tanh": (-1.0, 1.0),
    "relu": (0.0, math.inf),
    "softplus": (0.0, math.inf),
}


def layer_bounds(layer) -> tuple:
    """The bounds a layer's outputs obey by construction: ``(low, high)``, ``(-inf, inf)`` when unknown.

    Known: :class:`~tfdpmech.layers.UnitClip`, ``ReLU`` layers, and layers whose ``activation`` is
    sigmoid, hard sigmoid, softmax, tanh, ReLU or softplus.
    """
    if isinstance(layer, UnitClip):
        return (layer.low, layer.high)
    if isinstance(layer, keras.layers.ReLU):
        high = math.inf if layer.max_value is None else float(layer.max_value)
        return (0.0, high)
    activation = getattr(layer, "activation", None)
    name = getattr(activation, "__name__", None)
    return _ACTIVATION_BOUNDS.get(name, (-math.inf, math.inf))


def public_features(model, layer, *, trained_on=None, description: str = "", bounds=None) -> FeatureExtractor:
    """Cut a model trained on public data at ``layer`` and record that as an ε = 0 release.

    The weights are a function of public data only, so using them on the private records costs
    no privacy (post-processing of public information); the private records then enter a
    private mechanism only through what that mechanism releases. This is the assertion the
    ledger records: the caller is responsible for ``model`` never having seen a private record.

    Args:
        model: a built Keras model trained on public data (e.g. ``tfdpmech.models.mlp`` fitted on a
            public split).
        layer: the layer whose output are the features (name, index or the layer itself), typically a
            bounded one such as the ``UnitClip`` ``"hidden_clip"`` of ``tfdpmech.models.mlp``.
        trained_on: the public records the model was trained on; their hashes are kept so that a
            private set sharing a record with them is refused.
        description: where the public data came from (goes into the ledger).
        bounds: ``(low, high)`` the layer's outputs obey, when not known from its type (checked on
            every use, never clipped).

    Returns:
        a :class:`FeatureExtractor` (its weights fingerprinted: later changes are refused).

    Raises:
        TypeError: ``model`` is not a built Keras model.
        ValueError: ``layer`` is not in ``model``.
    """
    if not isinstance(model, keras.Model):
        raise TypeError(f"model must be a keras.Model trained on public data, got {type(model).__name__}")
    try:
        if isinstance(layer, keras.layers.Layer):
            cut = layer
        elif isinstance(layer, int):
            cut = model.layers[layer]
        else:
            cut = model.get_layer(layer)
    except (ValueError, IndexError) as exc:
        names = [lay.name for lay in model.layers]
        raise ValueError(f"layer {layer!r} is not in model {model.name!r}; its layers are {names}") from exc
    if not model.built or not model.inputs:
        raise TypeError(f"model {model.name!r} is not built; call it on data (or give it an Input) first")
    inputs = model.inputs[0] if len(model.inputs) == 1 else model.inputs  # one input: no list (Keras 3 warns)
    extractor = keras.Model(inputs, cut.output, name=f"{model.name}_to_{cut.name}")
    known = layer_bounds(cut)
    where = f" ({description})" if description else ""
    provenance = (
        f"model {model.name!r} trained on public data only{where}, cut at layer {cut.name!r}: its weights are a "
        "function of public data, so computing features of the private records releases nothing by itself "
        "(ε = 0; the private records enter only through the mechanism that consumes the features)"
    )
    return FeatureExtractor(extractor, name=f"public:{model.name}/{cut.name}", provenance=provenance,
                            bounds=known if bounds is None else bounds, trained_on=trained_on)
