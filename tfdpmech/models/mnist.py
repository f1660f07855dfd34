"""MNIST models: AdLM's private networks (``mnist_cnn``, ``mlp``) and their standard-layer twins."""

from __future__ import annotations

import keras

from ..layers.batch_min_max import BatchMinMax
from ..layers.bounded_lrn import BoundedLRN
from ..layers.unit_clip import UnitClip
from ..mechanisms.adlm.input_noise import InputNoise
from ..mechanisms.adlm.perturbed_bias import PerturbedBias
from ..validation import check_positive_int

__all__ = ["mnist_cnn", "mlp", "standard_cnn", "standard_mlp"]


def _private_head(hidden_units: int, num_classes: int):
    # FC → ReLU → batch min-max (AdLM §III-B) → UnitClip (the verifiable bound for Δ_F) → logits
    return [
        keras.layers.Dense(hidden_units, activation="relu", name="hidden"),
        BatchMinMax(name="hidden_minmax"),
        UnitClip(name="hidden_clip"),
        keras.layers.Dense(num_classes, use_bias=False, name="logits"),
    ]


def mnist_cnn(num_classes: int = 10, *, input_shape=(28, 28, 1), hidden_units: int = 25,
              input_noise: bool = False, name: str = "adlm_mnist_cnn") -> keras.Sequential:
    """The AdLM paper's MNIST network (§IV, App. G): conv 32 5×5 → conv 64 5×5 → dense 25 → M.

    Layout: ``[InputNoise] → Conv2D(32, 5×5, no bias) → PerturbedBias → ReLU → BoundedLRN →
    MaxPool 2×2 → Conv2D(64, 5×5) → ReLU → BoundedLRN → MaxPool 2×2 → Flatten → Dense(25, ReLU)
    → BatchMinMax → UnitClip → Dense(M, no bias)``. The output is logits; train with
    :class:`tfdpmech.losses.TaylorCrossEntropy` and predict with ``argmax``.

    Args:
        num_classes: M.
        input_shape: image shape, channels last.
        hidden_units: width of the last hidden layer ``|h_(k)|`` (paper: 25).
        input_noise: add an :class:`InputNoise` layer for the ``shared_per_step`` reproduction mode.
    """
    check_positive_int(num_classes, "num_classes", minimum=2)
    check_positive_int(hidden_units, "hidden_units")
    layers = [keras.Input(tuple(input_shape))]
    if input_noise:
        layers.append(InputNoise(feature_shape=tuple(input_shape), name="input_noise"))
    layers += [
        keras.layers.Conv2D(32, 5, padding="same", use_bias=False, name="private_affine"),
        PerturbedBias(name="private_bias"),
        keras.layers.ReLU(),
        BoundedLRN(),
        keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(64, 5, padding="same", activation="relu"),
        BoundedLRN(),
        keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(),
    ]
    return keras.Sequential(layers + _private_head(hidden_units, num_classes), name=name)


def mlp(num_classes: int = 10, *, input_shape=(28, 28, 1), first_units: int = 128, hidden_units: int = 25,
        input_noise: bool = False, name: str = "adlm_mlp") -> keras.Sequential:
    """A small MLP with the same private first layer and bounded head as :func:`mnist_cnn`."""
    check_positive_int(num_classes, "num_classes", minimum=2)
    check_positive_int(hidden_units, "hidden_units")
    check_positive_int(first_units, "first_units")
    layers = [keras.Input(tuple(input_shape)), keras.layers.Flatten()]
    if input_noise:
        layers.append(InputNoise(feature_shape=(int(_prod(input_shape)),), name="input_noise"))
    layers += [
        keras.layers.Dense(first_units, use_bias=False, name="private_affine"),
        PerturbedBias(name="private_bias"),
        keras.layers.ReLU(),
    ]
    return keras.Sequential(layers + _private_head(hidden_units, num_classes), name=name)


def standard_cnn(num_classes: int = 10, *, input_shape=(28, 28, 1), hidden_units: int = 25,
                 name: str = "mnist_cnn") -> keras.Sequential:
    """The same conv 32 5×5 → conv 64 5×5 → dense 25 → M network with standard Keras layers only.

    For the non-private softmax baseline and DP-SGD, whose per-example gradients need layers that
    do not mix records of a batch (no batch min-max) and that tensorflow-privacy knows.
    Outputs logits (use ``from_logits=True``).
    """
    check_positive_int(num_classes, "num_classes", minimum=2)
    return keras.Sequential([
        keras.Input(tuple(input_shape)),
        keras.layers.Conv2D(32, 5, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(64, 5, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dense(hidden_units, activation="relu"),
        keras.layers.Dense(num_classes),
    ], name=name)


def standard_mlp(num_classes: int = 10, *, input_shape=(28, 28, 1), first_units: int = 128,
                 name: str = "mlp") -> keras.Sequential:
    """Flatten → Dense(first_units, ReLU) → Dense(M) logits, standard layers only (see :func:`standard_cnn`)."""
    check_positive_int(num_classes, "num_classes", minimum=2)
    return keras.Sequential([
        keras.Input(tuple(input_shape)),
        keras.layers.Flatten(),
        keras.layers.Dense(first_units, activation="relu"),
        keras.layers.Dense(num_classes),
    ], name=name)


def _prod(shape) -> int:
    out = 1
    for s in shape:
        out *= int(s)
    return out
