"""DP-SGD engines and training paths, and the checks a model must pass first.

Engines (``engine=``): ``"tensorflow_privacy"`` (the library's ``DPModel`` / DP optimizers, TensorFlow
2.15 only), ``"tfdpmech"`` (this package's train step, :mod:`.train_step` and
:mod:`tfdpmech.mechanisms.dpsgd.clipping.clipped_sums`, on Keras 2.15 and Keras 3; ghost norms also for Conv2D and
EinsumDense), ``"auto"`` (the first where it imports). The paths below are tensorflow-privacy's; tfdpmech's engine has
``"fast_clipping"`` and ``"vectorized"`` with the same meaning.

Training paths (``path=``):
    ``"fast_clipping"``: tensorflow-privacy's fast gradient clipping (``DPSequential`` /
        ``DPModel`` with a ``LayerRegistry``): per-example gradient norms from one extra backward
        pass (the "ghost norm" trick, Goodfellow 2015, arXiv:1510.01799), then the gradient of
        the clip-weighted loss, with a standard Keras optimizer. Usable only when every layer with trainable weights is in the registry and
        the model is a ``Sequential`` or functional model. tensorflow-privacy 0.9.0's default
        registry (``layer_registry.make_default_layer_registry``) holds exactly two classes:
        ``tf.keras.layers.Dense`` and ``tf.keras.layers.Embedding``. **Conv2D is not supported**
        (nor BatchNormalization, LayerNormalization, EinsumDense, MultiHeadAttention: 0.9.0 ships
        registry functions for the last three in ``registry_functions/`` but does not register
        them by default). Layers without trainable weights (Flatten, pooling, activations,
        Dropout, Reshape) do not matter. Lookup is by exact class, so a subclass of ``Dense``
        is not supported.
    ``"microbatch"``: the DP Keras optimizers (``DPKerasAdamOptimizer`` /
        ``DPKerasSGDOptimizer``, built on the legacy Keras optimizers) with a per-example
        (reduction ``NONE``) loss and ``num_microbatches = batch_size`` by default. Works for any
        model (subclassed too) whose layers do not mix the examples of a batch. Cost warning:
        the optimizer takes ``tape.jacobian`` of the batch's per-example losses, i.e. one
        vectorized backward pass over the *whole batch* per example, so time and memory grow
        with ``batch_size²``. Measured on 2 shared CPU cores: the 784-128-10 MLP at batch 250 is
        40-57× slower than non-private training; the MNIST CNN (``standard_cnn``) runs 20-80 ex/s
        at batch 25-50 (non-private: ~1500 ex/s) and at batch 250 exhausted 23 GB of memory.
    ``"vectorized"``: tensorflow-privacy's ``DPSequential`` / ``DPModel`` without a layer registry:
        per-example (per-microbatch) gradients from ``tf.vectorized_map`` over single examples,
        clipped, summed and noised in the model's ``train_step`` with a standard optimizer. Any
        layer works; linear cost in the batch size (``standard_cnn`` at batch 250: 0.25-0.5 of the
        non-private speed). Needs a ``Sequential`` or functional model.
    ``"auto"`` picks ``"fast_clipping"`` when :func:`supports_fast_clipping` holds, else
        ``"vectorized"`` for Sequential/functional models, else ``"microbatch"``.

Guards (:class:`~tfdpmech.mechanisms.dpsgd.ShuffledDPSGD`): the compiled model refuses
(``tf.errors.InvalidArgumentError`` naming the fix) any batch that does not hold exactly
``batch_size`` examples and any optimizer step beyond the ``steps`` the ε was computed for. Layers that mix
the records of a batch in training (a trainable ``BatchNormalization``, :class:`tfdpmech.layers.BatchMinMax`) are
refused at any depth (a frozen ``BatchNormalization`` is accepted; :mod:`tfdpmech.mechanisms.dpsgd.clipping.batch_norm`
replaces trainable ones), and so is any model whose training forward pass updates state from the batch or mixes records
(:mod:`tfdpmech.mechanisms.dpsgd.clipping.model_probe`): per-example clipping does not bound their sensitivity.

tensorflow-privacy is imported only when this API is used (:func:`require_tf_privacy`).
"""

from __future__ import annotations

import keras

from ....layers import BatchMinMax

__all__ = [
    "PATHS",
    "ENGINES",
    "INSTALL_HINT",
    "resolve_engine",
    "tf_privacy_available",
    "require_tf_privacy",
    "all_layers",
    "check_model",
    "check_logits",
    "rebuildable",
    "fast_clipping_layers",
    "supports_fast_clipping",
]

PATHS = ("auto", "fast_clipping", "vectorized", "microbatch")
ENGINES = ("auto", "tfdpmech", "tensorflow_privacy")
INSTALL_HINT = ("pip install 'tfdpmech[tfprivacy]' on Python 3.11 (TensorFlow 2.15; tensorflow-privacy does not install "
                "on newer stacks; there engine='tfdpmech' runs the same DP-SGD)")


def tf_privacy_available() -> bool:
    """True when tensorflow-privacy imports (the TensorFlow 2.15 / Keras 2 stack)."""
    try:
        require_tf_privacy()
    except ImportError:
        return False
    return True


def resolve_engine(engine: str) -> str:
    """``"tensorflow_privacy"`` or ``"tfdpmech"`` for ``engine`` in :data:`ENGINES`.

    ``"auto"`` is tensorflow-privacy where it imports (the reference implementation) and tfdpmech's
    own Keras DP-SGD (:mod:`.train_step`, :mod:`tfdpmech.mechanisms.dpsgd.clipping.clipped_sums`) elsewhere. Both run
    the same algorithm (``tests/mechanisms/dpsgd/test_engines.py`` pins their clipped sums equal where both import).

    Raises:
        ValueError: an unknown engine.
        ImportError: ``"tensorflow_privacy"`` where it does not import (one line with the fix).
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if engine == "auto":
        return "tensorflow_privacy" if tf_privacy_available() else "tfdpmech"
    if engine == "tensorflow_privacy":
        require_tf_privacy()
    return engine


def require_tf_privacy():
    """Import tensorflow-privacy's pieces; one-line ImportError when it is missing or broken."""
    try:
        from tensorflow_privacy.privacy.fast_gradient_clipping import gradient_clipping_utils
        from tensorflow_privacy.privacy.fast_gradient_clipping import layer_registry
        from tensorflow_privacy.privacy.keras_models import dp_keras_model
        from tensorflow_privacy.privacy.optimizers import dp_optimizer_keras
    except Exception as exc:  # tensorflow-privacy raises non-ImportErrors on Keras 3
        raise ImportError(f"engine='tensorflow_privacy' needs tensorflow-privacy: {INSTALL_HINT}") from None
    return gradient_clipping_utils, layer_registry, dp_keras_model, dp_optimizer_keras


def all_layers(model):
    """Every layer below ``model`` at any depth: nested models, wrappers (``TimeDistributed``,
    ``Bidirectional``) and the layers a custom layer holds (Keras 2.15 and 3 track them alike)."""
    return list(model._flatten_layers(include_self=False, recursive=True))


def check_model(model) -> None:
    """Check ``model`` is a built ``keras.Model`` with trainable weights and no record-mixing terms.

    Walks the whole layer tree (:func:`all_layers`);
    :func:`~tfdpmech.mechanisms.dpsgd.clipping.model_probe.batch_dependence` then finds what no layer list shows (a
    ``Lambda`` or custom layer that updates state from the batch or mixes records).

    Raises:
        TypeError: not a ``keras.Model``.
        ValueError: unbuilt, nothing to train, or a layer at any depth (a trainable ``BatchNormalization``,
            ``BatchMinMax``, an activity regulariser) whose sensitivity per-example clipping does not bound. A
            ``BatchNormalization`` is accepted frozen (``trainable = False``: inference mode, moving statistics);
            :func:`~tfdpmech.mechanisms.dpsgd.clipping.batch_norm.replace_batch_norm` swaps trainable ones for
            ``GroupNormalization``.
    """
    if not isinstance(model, keras.Model):
        raise TypeError(f"model must be a keras.Model (or a builder returning one), got {type(model).__name__}: "
                        "wrap a layer in a model first, e.g. keras.Sequential([keras.Input(shape), layer])")
    if not model.built:
        raise ValueError(
            f"model {model.name!r} is not built, so its trainable layers cannot be checked; start it with "
            "keras.Input(shape) or call model.build(input_shape) first"
        )
    if not model.trainable_variables:
        raise ValueError(f"model {model.name!r} has no trainable variables; nothing to train with DP-SGD")
    for tensor in getattr(model, "inputs", None) or []:
        dtype = str(getattr(tensor.dtype, "name", tensor.dtype))
        if not any(kind in dtype for kind in ("float", "int", "bool")):
            raise ValueError(
                f"model {model.name!r} takes {dtype} inputs, but DP-SGD's records are numeric arrays; apply the "
                "text or lookup preprocessing (StringLookup, TextVectorization) to the records before they reach the "
                "run, and give the model the numeric ids"
            )
    for layer in [model, *all_layers(model)]:
        if isinstance(layer, keras.layers.BatchNormalization) and layer.trainable:
            example = (f", e.g. model.get_layer({layer.name!r}).trainable = False" if any(
                layer is top for top in getattr(model, "layers", ())) else "")
            raise ValueError(
                f"layer {layer.name!r} ({type(layer).__name__}) mixes the examples of a batch in training, so "
                "per-example clipping does not bound its sensitivity and DP-SGD would not be private; fix it in one "
                f"of two ways: freeze it with layer.trainable = False{example} (a frozen BatchNormalization runs in "
                "inference mode with its moving statistics and is accepted), or call "
                "tfdpmech.replace_batch_norm(model), which returns a copy of a Sequential or functional model with a "
                "GroupNormalization in place of each trainable BatchNormalization"
            )
        if isinstance(layer, BatchMinMax):
            raise ValueError(
                f"layer {layer.name!r} ({type(layer).__name__}) mixes the examples of a batch in training, so "
                "per-example clipping does not bound its sensitivity and DP-SGD would not be private; remove it "
                "(tfdpmech.models.standard_cnn / standard_mlp use standard per-example layers only) or use "
                "LayerNormalization / GroupNormalization"
            )
        if getattr(layer, "activity_regularizer", None) is not None:
            raise ValueError(
                f"layer {layer.name!r} ({type(layer).__name__}) has an activity_regularizer: a loss term computed "
                "from the batch's activations that per-example clipping does not cover; remove it (weight "
                "regularisers are fine: they do not depend on the data)"
            )


def check_logits(model) -> None:
    """Check ``model`` ends in logits (no softmax / sigmoid), as the default DP-SGD loss expects."""
    last = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)][-1]
    activation = getattr(getattr(last, "activation", None), "__name__", None)
    if isinstance(last, keras.layers.Softmax) or activation in ("softmax", "sigmoid"):
        raise ValueError(
            f"model {model.name!r} ends with a {activation or 'softmax'} output, but the default loss expects logits "
            "(from_logits=True); remove the final activation or pass loss= explicitly"
        )


def rebuildable(model) -> bool:
    """A Sequential or functional model (layers and graph known), which DPSequential / DPModel can wrap."""
    return isinstance(model, keras.Sequential) or bool(getattr(model, "_is_graph_network", False))


def fast_clipping_layers(model, layer_registry=None) -> list[str]:
    """Names of the layers with trainable weights that the fast-clipping registry does not support.

    Empty when every trainable layer is registered. Nested models are listed as a whole (the
    library does not look inside them).

    Raises:
        ImportError: tensorflow-privacy is missing.
    """
    _, lr, _, _ = require_tf_privacy()
    registry = layer_registry if layer_registry is not None else lr.make_default_layer_registry()
    return [f"{layer.name} ({type(layer).__name__})" for layer in model.layers
            if layer.trainable_variables and not registry.is_elem(layer)]


def supports_fast_clipping(model, layer_registry=None) -> bool:
    """True when tensorflow-privacy's fast gradient clipping applies to ``model``.

    Mirrors the library's own test in ``DPModel.__init__``: the model has an internal compute
    graph (``Sequential`` or functional, not subclassed) and every layer with trainable weights
    is in the registry (0.9.0 default: ``Dense`` and ``Embedding`` only; Conv2D is not).

    Args:
        model: a built ``keras.Model``.
        layer_registry: a ``tensorflow_privacy`` ``LayerRegistry``; the default registry if None.

    Raises:
        ImportError: tensorflow-privacy is missing.
    """
    gcu, lr, _, _ = require_tf_privacy()
    registry = layer_registry if layer_registry is not None else lr.make_default_layer_registry()
    return bool(
        isinstance(model, keras.Model)
        and model.built
        and gcu.has_internal_compute_graph(model)
        and gcu.all_trainable_layers_are_registered(model, registry)
    )
