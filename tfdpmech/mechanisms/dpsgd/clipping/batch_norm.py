"""Batch normalisation under DP-SGD: a copy of the model with ``GroupNormalization`` in its place.

A trainable ``BatchNormalization`` normalises each record with the statistics of its batch, so one
record's output, and its gradient, depend on the other records: per-example clipping does not bound
its sensitivity, and :func:`~tfdpmech.mechanisms.dpsgd.runs.paths.check_model` refuses it. Two fixes:

* freeze it (``layer.trainable = False``): a frozen ``BatchNormalization`` runs in inference mode with
  its moving statistics (fixed during the run), so each record is normalised on its own; it is
  accepted as it is;
* :func:`replace_batch_norm`: a new model in which every trainable ``BatchNormalization`` is a
  ``GroupNormalization`` over the same axis, which normalises each record with its own statistics
  (Opacus's ``ModuleValidator.fix`` does the same for PyTorch).
"""

from __future__ import annotations

import inspect
import numbers

import keras
import numpy as np

from ..runs.paths import all_layers

__all__ = ["MAX_GROUPS", "replace_batch_norm", "group_count"]

MAX_GROUPS = 32  # the default of GroupNormalization (Wu & He 2018) and of Opacus's replacement
FEW_VALUES = 16  # below this many values per group of one record, verbose replace_batch_norm suggests groups=1

# the BatchNormalization arguments GroupNormalization takes as they are
_SHARED = ("epsilon", "center", "scale", "beta_initializer", "gamma_initializer", "beta_regularizer",
           "gamma_regularizer", "beta_constraint", "gamma_constraint")


def group_count(channels: int, values_per_channel: int | None, groups=None, *, layer: str = "") -> int:
    """The number of groups of the ``GroupNormalization`` that replaces a ``BatchNormalization``.

    Args:
        channels: the channels along the normalised axis.
        values_per_channel: how many values one record has per channel (the product of the other
            non-batch dimensions; 1 after a ``Dense``), or None when unknown.
        groups: None for the largest divisor of ``channels`` that is at most :data:`MAX_GROUPS`
            and leaves every group more than one value; else the number to check.
        layer: the layer's name, for the messages.

    Raises:
        ValueError: ``groups`` does not divide ``channels``, or would normalise single values
            (a group of one value is always 0: the layer would output its offset ``beta`` only).
    """
    def single(g):
        return values_per_channel == 1 and channels // g == 1

    where = f"layer {layer!r} has {channels} channels" if layer else f"{channels} channels"
    if groups is None:
        fits = [g for g in range(min(channels, MAX_GROUPS), 0, -1) if channels % g == 0 and not single(g)]
        if not fits:
            raise ValueError(
                f"{where} and one value per channel, so any GroupNormalization would normalise single values (always "
                "0); freeze that BatchNormalization (trainable = False) or replace it by hand (LayerNormalization "
                "over more features)")
        return fits[0]
    divisors = [g for g in range(1, channels + 1) if channels % g == 0 and not single(g)]
    if channels % groups:
        raise ValueError(f"groups={groups} must divide the channels: {where}; pass one of {divisors}, or groups=None "
                         f"for the largest divisor up to {MAX_GROUPS}")
    if single(groups):
        raise ValueError(f"groups={groups}: {where} and one value per channel, so every group would hold a single "
                         f"value (normalised to 0); pass one of {divisors}, or groups=None")
    return groups


def replace_batch_norm(model, *, groups=None, verbose: bool = True):
    """A copy of ``model`` with a ``GroupNormalization`` in place of each trainable ``BatchNormalization``.

    Each replacement normalises the same axis; ``gamma`` and ``beta`` are copied from the
    ``BatchNormalization`` (when it has them: ``scale`` / ``center``), with its ``epsilon``,
    initialisers, regularisers and constraints. Every other layer keeps its weights; a frozen
    ``BatchNormalization`` (``trainable = False``) is kept with its moving statistics. Nested
    Sequential and functional models are rebuilt the same way. ``model`` itself is left unchanged.

    Args:
        model: a built Sequential or functional ``keras.Model``.
        groups: the groups of every replacement: None (default) for the largest divisor of its
            channels up to :data:`MAX_GROUPS` (see :func:`group_count`), or an int dividing the
            channels of each one.
        verbose: print one line per replaced layer, and a suggestion to compare ``groups=1`` where a group of
            one record holds fewer than :data:`FEW_VALUES` values (a small input leaves a deep network's last
            maps 1×1: MobileNetV2 at 32×32 trained far better with one group, ``tools/finetune_backbone_groups.py``).

    Returns:
        The new model; ``new_model.replaced_batch_norm`` lists ``(old_name, new_name, groups)``
        per replaced layer (empty when there was none).

    Raises:
        TypeError: ``model`` is not a ``keras.Model``; ``groups`` not an int or None; ``verbose`` not a bool.
        ValueError: a subclassed model (its layers are code, not a graph that can be rebuilt); an unbuilt
            one; a trainable ``BatchNormalization`` inside a layer that cannot be rebuilt (a wrapper, a
            custom layer, a subclassed nested model); a ``groups`` that does not fit (:func:`group_count`).
    """
    if not isinstance(model, keras.Model):
        raise TypeError(f"model must be a keras.Model, got {type(model).__name__}: pass the Sequential or functional "
                        "model that holds the BatchNormalization layers")
    if groups is not None and (isinstance(groups, (bool, np.bool_)) or not isinstance(groups, numbers.Integral)):
        raise TypeError(f"groups must be an int or None, got {groups!r} ({type(groups).__name__}); pass e.g. "
                        "groups=8, or groups=None for the largest divisor of each layer's channels up to 32")
    if groups is not None and groups < 1:
        raise ValueError(f"groups must be >= 1, got {groups}; pass e.g. groups=8, or groups=None")
    if not isinstance(verbose, (bool, np.bool_)):
        raise TypeError(f"verbose must be True or False, got {verbose!r} ({type(verbose).__name__})")
    plan = _plan(model, None if groups is None else int(groups), used={layer.name for layer in all_layers(model)})
    records = []
    new_model = _rebuild(model, plan, records)
    new_model.replaced_batch_norm = records
    if verbose:
        for old, new, count in records:
            print(f"replace_batch_norm: {old} (BatchNormalization) -> {new} (GroupNormalization, groups={count}), "
                  "its gamma and beta copied (where it had them)")
        if not records:
            print(f"replace_batch_norm: model {model.name!r} has no trainable BatchNormalization; the copy keeps "
                  "every layer")
        few = [name for name, _, values in plan.values() if values is not None and values < FEW_VALUES]
        if few:
            print(f"replace_batch_norm: {len(few)} replacement(s) normalise fewer than {FEW_VALUES} values per group "
                  f"(e.g. {few[0]!r}: small feature maps); groups=1 (each record's whole feature map) may train "
                  "better there: pass replace_batch_norm(model, groups=1) and compare on validation data")
    return new_model


def _graph_model(model) -> bool:
    """A Sequential or functional model (Keras 2.15 or 3): its layers form a graph ``clone_model`` copies."""
    return isinstance(model, keras.Sequential) or bool(getattr(model, "_is_graph_network", False)) or hasattr(
        model, "_nodes_by_depth")


def _is_trainable_batch_norm(layer) -> bool:
    return isinstance(layer, keras.layers.BatchNormalization) and layer.trainable


def _plan(model, groups, used: set) -> dict:
    """``{id(batch norm): (GroupNormalization name, groups)}`` for ``model`` and its nested models; every
    refusal is raised here, before anything is built."""
    if not _graph_model(model):
        raise ValueError(
            f"model {model.name!r} is a subclassed {type(model).__name__}: replace_batch_norm rebuilds Sequential and "
            "functional models only (their layers form a graph it can copy); in the subclass, create "
            "keras.layers.GroupNormalization(groups, axis=...) instead of BatchNormalization in __init__, or freeze "
            "each BatchNormalization (layer.trainable = False)")
    if not model.built:
        raise ValueError(f"model {model.name!r} is not built, so its layers' channels are unknown; start it with "
                         "keras.Input(shape) or call model.build(input_shape) first")
    plan = {}
    for layer in model.layers:
        if _is_trainable_batch_norm(layer):
            if id(layer) not in plan:
                plan[id(layer)] = (_fresh_name(f"{layer.name}_group_norm", used), *_groups_of(layer, groups))
        elif isinstance(layer, keras.Model) and _graph_model(layer):
            plan.update(_plan(layer, groups, used))
        else:
            inner = [sub for sub in all_layers(layer) if _is_trainable_batch_norm(sub)]
            if inner:
                raise ValueError(
                    f"layer {inner[0].name!r} (BatchNormalization) sits inside layer {layer.name!r} "
                    f"({type(layer).__name__}), which replace_batch_norm cannot rebuild (it rebuilds the layers of "
                    "Sequential and functional models); freeze it (layer.trainable = False: inference mode with its "
                    f"moving statistics) or build {layer.name!r} with keras.layers.GroupNormalization instead")
    return plan


def _groups_of(layer, groups) -> tuple:
    """The groups of ``layer``'s replacement (:func:`group_count`), from its axis and built shape, and the values
    one record has in each group (None when its shape is unknown)."""
    axis = layer.axis
    if isinstance(axis, (list, tuple)):
        if len(axis) != 1:
            raise ValueError(f"layer {layer.name!r} (BatchNormalization) normalises over the axes {list(axis)}; "
                             "GroupNormalization takes one axis: freeze it (trainable = False) or replace it by hand")
        axis = axis[0]
    channels = int(layer.moving_mean.shape[0])
    shape = (layer.get_build_config() or {}).get("input_shape") if hasattr(layer, "get_build_config") else None
    values = None
    if shape is not None and len(shape) >= 2:
        others = [d for i, d in enumerate(shape) if i not in (0, axis % len(shape))]
        values = None if any(d is None for d in others) else int(np.prod(others, dtype=np.int64))
    count = group_count(channels, values, groups, layer=layer.name)
    return count, None if values is None else values * (channels // count)


def _fresh_name(name: str, used: set) -> str:
    candidate, k = name, 1
    while candidate in used:
        candidate, k = f"{name}_{k}", k + 1
    used.add(candidate)
    return candidate


def _group_norm(layer, name: str, groups: int):
    """The ``GroupNormalization`` that replaces the ``BatchNormalization`` ``layer`` (not built yet)."""
    config = layer.get_config()
    axis = layer.axis[0] if isinstance(layer.axis, (list, tuple)) else layer.axis
    return keras.layers.GroupNormalization(groups=groups, axis=axis, name=name, dtype=layer.dtype_policy,
                                           **{key: config[key] for key in _SHARED if key in config})


def _rebuild(model, plan: dict, records: list):
    """Clone ``model`` (layers from their configs), then give each new layer the weights of its original."""
    pairs = []

    def clone(layer):
        if id(layer) in plan:
            name, count, _ = plan[id(layer)]
            new = _group_norm(layer, name, count)
            records.append((layer.name, name, count))
        elif isinstance(layer, keras.Model) and _graph_model(layer) and any(
                id(sub) in plan for sub in all_layers(layer)):
            return _rebuild(layer, plan, records)  # its weights are set inside
        else:
            try:
                new = layer.__class__.from_config(layer.get_config())
            except Exception as exc:  # pylint: disable=broad-except  (any layer's own error, named with the layer)
                raise ValueError(
                    f"replace_batch_norm could not rebuild layer {layer.name!r} ({type(layer).__name__}) from its "
                    f"config ({type(exc).__name__}: {exc}); give the class a get_config that from_config accepts "
                    "(and register it with keras.saving.register_keras_serializable), or freeze the model's "
                    "BatchNormalization layers (trainable = False) instead") from exc
        pairs.append((layer, new))
        return new

    def call(layer, *args, **kwargs):  # a BatchNormalization's node passes mask=, which GroupNormalization lacks
        if isinstance(layer, keras.layers.GroupNormalization):
            kwargs = {key: value for key, value in kwargs.items() if key not in ("mask", "training")}
        return layer(*args, **kwargs)

    # Keras 2.15 drops the arguments a layer's call does not take by itself; Sequential models list their layers
    options = ({"call_function": call} if "call_function" in inspect.signature(keras.models.clone_model).parameters
               and not isinstance(model, keras.Sequential) else {})
    new_model = keras.models.clone_model(model, clone_function=clone, **options)
    for old, new in pairs:
        if id(old) in plan:
            for weight in ("gamma", "beta"):
                if getattr(old, weight, None) is not None:
                    getattr(new, weight).assign(getattr(old, weight))
        elif isinstance(old, keras.layers.Layer):  # Keras 3 also clones operations (x + 1), which hold no weights
            _copy_weights(old, new)
    return new_model


def _copy_weights(old, new) -> None:
    """Every weight of ``old`` (trainable or not: a Normalization's statistics too) into its copy ``new``."""
    values = old.get_weights()
    try:
        new.set_weights(values)
    except ValueError as exc:
        raise ValueError(f"replace_batch_norm could not copy the weights of layer {old.name!r} "
                         f"({type(old).__name__}) into its rebuilt copy ({exc}); its config does not rebuild the "
                         "same weights: freeze the model's BatchNormalization layers (trainable = False) "
                         "instead") from exc
    if isinstance(new, keras.layers.Normalization) and getattr(new, "input_mean", 0) is None \
            and hasattr(new, "finalize_state"):
        new.finalize_state()  # an adapted Normalization reads its statistics from the copied weights
    if any(not np.array_equal(a, b) for a, b in zip(values, new.get_weights())):
        raise ValueError(f"replace_batch_norm: the rebuilt layer {old.name!r} ({type(old).__name__}) does not hold "
                         "the original's weights after copying them; freeze the model's BatchNormalization layers "
                         "(trainable = False) instead")
