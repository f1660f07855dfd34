"""The layer registry: how each layer type's per-record gradient norm is computed on the ghost-norm path.

DP-SGD needs, for every record i, ``‖∇θ ℓ_i‖`` over all trainable weights θ. The ghost-norm path runs the
model once, takes one backward pass of ``Σ_i ℓ_i`` to a few tensors each layer exposes (its *taps*: for a
Dense layer the pre-activation ``z``), and from each tap's per-record gradient ``g_i = ∂ℓ_i/∂tap_i``
computes the squared norm of the gradient of that layer's own weights (Goodfellow 2015; Li et al. 2022;
Bu et al. 2023). A :class:`LayerRule` says how, for one layer type:

``forward(layer, inputs, keep, args, kwargs) -> Tapped``
    runs the layer as Keras would (padding rows, ``keep`` False, selected out), returning its output, its
    taps (each with the trainable weights that reach the output through it alone), and whatever
    ``sq_norms`` reads (the layer's input, unfolded patches, the normalised input, ...).
``sq_norms(layer, saved, tap_grads) -> (B,)``
    each record's squared norm of the gradient of the layer's trainable weights.
``clipped_sum(layer, saved, tap_grads, factors)`` (optional)
    ``Σ_i c_i ∇W ℓ_i`` for each trainable weight, or None: then the engine takes the layer's local weight
    gradient with the output gradients ``c_i g_i`` (Bu et al.'s book-keeping: the weight gradient is linear
    in ``g``), one local backward pass per tap.
``parts(layer, saved, tap_grads)`` (optional)
    one call's per-record weight gradients in a form whose inner products across calls are cheap, for a
    layer called more than once per forward pass (:mod:`.shared_uses`).

A rule whose ``sq_norms`` reduces with :mod:`.groups` (``groups = True``) also gives the norm of a group of
rows (a record's augmented views, a user's records) clipped as one unit; a rule without it is handled alone
in such a run.

Rules are registered by exact class (:func:`register_layer_rule`, open to a user's own layers, as
tensorflow-privacy's ``LayerRegistry`` and Opacus's grad samplers). A trainable layer with no rule is
handled **alone** (:mod:`.alone`: its own weights' per-record gradients, recomputed record by record for
that one layer) while the rest of the model stays on the ghost-norm path; the compile-time probe
(:func:`tfdpmech.mechanisms.dpsgd.clipping.ghost_probe.ghost_norms_mismatch`) compares every layer's norms with a
record-by-record loop of gradient tapes and demotes a layer whose rule does not match to the alone rule.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import threading

import keras
import tensorflow as tf

__all__ = ["Tapped", "LayerRule", "register_layer_rule", "register_layer_rule_by_name", "registered_rule", "registered_classes", "select_rows",
           "KERAS_3", "exact_dtype", "compute_dtype", "is_per_record", "full_precision_weights",
           "weights_read_as", "watched", "watching"]

KERAS_3 = int(keras.__version__.split(".")[0]) >= 3
_LOW_PRECISION = (tf.float16, tf.bfloat16)


@dataclasses.dataclass
class Tapped:
    """What a rule's forward pass exposes.

    Attributes:
        output: the layer's output, as Keras's own ``call`` returns it.
        taps: ``(tensor, variables)`` pairs: the engine watches each tensor and differentiates the loss
            with respect to it; ``variables`` (a subset of the layer's trainable weights) reach the output
            through that tensor only (the book-keeping pass differentiates the tensor with respect to them).
        saved: whatever the rule's ``sq_norms`` / ``clipped_sum`` read.
    """

    output: object
    taps: list
    saved: dict = dataclasses.field(default_factory=dict)


class LayerRule(abc.ABC):
    """How the per-record gradient norm of one layer type's own weights is computed (see the module docstring)."""

    family = ""  # the name reports use for the rule ("dense", "convolution", "alone", ...)
    # the forward reads the layer's weights as stored (float32) under a mixed-precision policy
    # (:func:`full_precision_weights`), so that its taps and weight gradients are float32
    full_precision_weights = True
    # sq_norms reduces per clipping unit with the reductions of :mod:`.groups` (a group of k rows: a record's
    # views, a user's records); a rule without them is handled alone in a grouped run
    groups = False
    # the forward takes an input without one row per record (shared by every record: an Embedding's position ids);
    # a call of a layer whose rule does not is handled alone (:mod:`.alone`)
    shared_inputs = False

    def applies(self, layer) -> bool:
        """Whether this rule handles this layer's configuration (else the layer is handled alone)."""
        return True

    @abc.abstractmethod
    def forward(self, layer, inputs, keep, args, kwargs) -> Tapped:
        """Run the layer, exposing its taps (see :class:`Tapped`)."""

    @abc.abstractmethod
    def sq_norms(self, layer, saved: dict, tap_grads: list) -> tf.Tensor:
        """``(B,)`` float32: each record's squared gradient norm over the layer's trainable weights (``(B/k,)``,
        one per group of k rows, inside :func:`.groups.row_groups` for a rule with ``groups = True``)."""

    def clipped_sum(self, layer, saved: dict, tap_grads: list, factors) -> list | None:
        """``Σ_i c_i ∇W ℓ_i`` per trainable weight of the layer, or None for the engine's book-keeping pass."""
        return None

    def parts(self, layer, saved: dict, tap_grads: list) -> dict | None:
        """``{id(weight): part}``: one call's per-record gradient of each trainable weight it reaches, as an
        :class:`.shared_uses.Outer` or :class:`.shared_uses.Rows`, for a layer called more than once in a forward
        pass (:mod:`.shared_uses`: the cross terms between its calls); None: this rule cannot give them (such a
        layer is then handled alone)."""
        return None


_REGISTRY: dict[type, LayerRule] = {}
_BY_NAME: dict[str, LayerRule] = {}
_BY_FLAG: dict[str, LayerRule] = {}


def register_layer_rule(layer_class: type, rule: LayerRule) -> None:
    """Register ``rule`` for layers of exactly ``layer_class`` (a subclass needs its own registration: it may
    compute something else). Replaces an earlier registration of the same class.

    Raises:
        TypeError: ``layer_class`` is not a Keras layer class, or ``rule`` is not a :class:`LayerRule`.
    """
    if not (isinstance(layer_class, type) and issubclass(layer_class, keras.layers.Layer)):
        raise TypeError(f"layer_class must be a keras.layers.Layer subclass, got {layer_class!r}")
    if not isinstance(rule, LayerRule):
        raise TypeError(f"rule must be a tfdpmech LayerRule instance, got {type(rule).__name__}")
    _REGISTRY[layer_class] = rule


def register_layer_rule_by_name(qualified_name: str, rule: LayerRule) -> None:
    """Register ``rule`` for the layer class named ``"module.QualName"`` (as ``type(layer).__module__`` and
    ``__qualname__`` give it), for a class of a package tfdpmech does not import itself (keras-hub's)."""
    if not isinstance(qualified_name, str) or "." not in qualified_name:
        raise TypeError(f"qualified_name must be a string 'module.ClassName', got {qualified_name!r}")
    if not isinstance(rule, LayerRule):
        raise TypeError(f"rule must be a tfdpmech LayerRule instance, got {type(rule).__name__}")
    _BY_NAME[qualified_name] = rule


def register_flag_rule(flag: str, rule: LayerRule) -> None:
    """Register ``rule`` for every layer whose attribute ``flag`` is true, in place of its class's rule (a Dense or
    EinsumDense with ``lora_enabled``: its factors' rule, :mod:`.lora`)."""
    if not isinstance(flag, str) or not flag.isidentifier():
        raise TypeError(f"flag must be an attribute name such as 'lora_enabled', got {flag!r}")
    if not isinstance(rule, LayerRule):
        raise TypeError(f"rule must be a tfdpmech LayerRule instance, got {type(rule).__name__}")
    _BY_FLAG[flag] = rule


def registered_rule(layer) -> LayerRule | None:
    """The rule registered for ``layer``'s exact class when it applies to this layer, else None."""
    cls = type(layer)
    for flag, flagged in _BY_FLAG.items():
        if getattr(layer, flag, False):
            return flagged if flagged.applies(layer) else None
    rule = _REGISTRY.get(cls) or _BY_NAME.get(f"{cls.__module__}.{cls.__qualname__}")
    if rule is None or getattr(layer, "quantization_mode", None):
        return None
    return rule if rule.applies(layer) else None


def registered_classes() -> tuple[str, ...]:
    """The names of the layer classes with a registered rule."""
    return tuple(sorted({cls.__name__ for cls in _REGISTRY} | {name.rsplit(".", 1)[-1] for name in _BY_NAME}))


_WATCHING = threading.local()


@contextlib.contextmanager
def watching(tapes):
    """Inside this context :func:`watched` has ``tapes`` watch a tensor (the engine runs each rule's forward so)."""
    before = getattr(_WATCHING, "tapes", ())
    _WATCHING.tapes = tuple(tapes)
    try:
        yield
    finally:
        _WATCHING.tapes = before


def watched(t):
    """``t``, watched by the engine's tapes from now on. A tap a rule creates itself (a zero tensor added to a
    product, not computed from the layer's input or weights) must be watched *before* the forward uses it: a
    tape records an operation only if one of its inputs is watched when it runs, and in a traced function
    with static shapes ``tf.zeros_like`` is a constant that depends on nothing watched."""
    for tape in getattr(_WATCHING, "tapes", ()):
        tape.watch(t)
    return t


def select_rows(keep, t):
    """``t`` with the rows where ``keep`` (B,) is False replaced by 0 (a select: NaN or inf there is dropped)."""
    keep = tf.reshape(keep, [-1] + [1] * (t.shape.rank - 1))
    return tf.where(keep, t, tf.zeros_like(t))


def compute_dtype(layer) -> tf.DType:
    """The dtype the layer computes in (its policy's compute dtype)."""
    return tf.as_dtype(layer.compute_dtype if hasattr(layer, "compute_dtype") else layer.dtype)


def exact_dtype(layer) -> tf.DType:
    """The dtype a rule computes the layer's products in: float32 under a float16 / bfloat16 policy."""
    dtype = compute_dtype(layer)
    return tf.float32 if dtype in _LOW_PRECISION else dtype


@contextlib.contextmanager
def weights_read_as(dtype):
    """Inside this context a layer's float weights read as ``dtype`` (None: as the float32 they are stored in), as
    Keras reads them inside a layer's call under a mixed-precision policy (its compute dtype)."""
    if KERAS_3:
        from keras.src.backend.common.variables import AutocastScope  # noqa: PLC0415
        scope = AutocastScope(dtype)
    else:
        from keras.src.mixed_precision.autocast_variable import enable_auto_cast_variables  # noqa: PLC0415
        scope = enable_auto_cast_variables(dtype)
    with scope:
        yield


def full_precision_weights():
    """Inside a layer's call under a mixed-precision policy, read its weights as the float32 they are stored in
    (Keras casts them to the compute dtype there). A rule's taps and local weight gradients are then float32:
    a weight gradient that went back through that cast would be rounded to float16 / bfloat16 *after* the
    records are summed, and a rounded sum can move by more than C when one record changes."""
    return weights_read_as(None)


def is_per_record(t, keep) -> bool:
    """Whether tensor ``t`` has one row per record: its first dimension is the batch's (unknown in the traced
    train step, as the batch's), not a fixed size such as the positions of an ``arange``."""
    if not isinstance(t, (tf.Tensor, tf.Variable)) or t.shape.rank in (None, 0):
        return False
    rows = t.shape[0]
    return rows is None or rows == keep.shape[0]
