"""The AFRRS paper's models (Wang et al., Tables 1 and 2)."""

from __future__ import annotations

import keras

from ...layers.batch_min_max import BatchMinMax
from ...layers.unit_clip import UnitClip
from ..adlm.perturbed_bias import PerturbedBias

__all__ = ["afrrs_mnist_model", "afrrs_cifar_model"]


def afrrs_mnist_model(num_classes: int = 10, *, private: bool = False, input_shape=(28, 28, 1)) -> keras.Sequential:
    """Table 1: conv 16 8×8 stride 2 → max-pool 2×2 → conv 32 4×4 stride 2 → max-pool → FC-32 → 10.

    The paper gives neither padding, pool strides nor activations; this is the TF-Privacy MNIST
    tutorial model it matches ('same' then 'valid', pools with stride 1, ReLU). ``private=True``
    makes the first convolution bias-free followed by :class:`~tfdpmech.layers.PerturbedBias` and
    bounds FC-32 into [0, 1] (§4.4 needs ``h_l`` in [0, 1]), with an output layer without bias,
    so :meth:`AFRRS.perturb` accepts it.
    """
    layers = [keras.Input(tuple(input_shape))]
    if private:
        layers += [keras.layers.Conv2D(16, 8, strides=2, padding="same", use_bias=False, name="private_affine"),
                   PerturbedBias(name="private_bias"), keras.layers.ReLU()]
    else:
        layers += [keras.layers.Conv2D(16, 8, strides=2, padding="same", activation="relu", name="conv1")]
    layers += [keras.layers.MaxPooling2D(2, 1),
               keras.layers.Conv2D(32, 4, strides=2, padding="valid", activation="relu"),
               keras.layers.MaxPooling2D(2, 1),
               keras.layers.Flatten(),
               keras.layers.Dense(32, activation="relu", name="hidden")]
    if private:
        layers += [BatchMinMax(name="hidden_minmax"), UnitClip(name="hidden_clip"),
                   keras.layers.Dense(num_classes, use_bias=False, name="logits")]
    else:
        layers += [keras.layers.Dense(num_classes, name="logits")]
    return keras.Sequential(layers, name="afrrs_table1_mnist")


def afrrs_cifar_model(num_classes: int = 10, *, padding: str = "valid", input_shape=(32, 32, 3)) -> keras.Sequential:
    """Table 2 (its caption says MNIST; it is the CIFAR-10 model): conv 32 3×3 → avg-pool 2×2/1 →
    conv 64 3×3 → avg-pool → conv 128 4×4 → avg-pool → conv 256 4×4 → FC-32 → 10, stride 1.

    Padding is not given; 'valid' gives a 19×19×256 map before FC-32.
    """
    if padding not in ("valid", "same"):
        raise ValueError(f"padding must be 'valid' or 'same', got {padding!r}")
    return keras.Sequential([
        keras.Input(tuple(input_shape)),
        keras.layers.Conv2D(32, 3, padding=padding, activation="relu", name="conv1"),
        keras.layers.AveragePooling2D(2, 1, padding=padding),
        keras.layers.Conv2D(64, 3, padding=padding, activation="relu"),
        keras.layers.AveragePooling2D(2, 1, padding=padding),
        keras.layers.Conv2D(128, 4, padding=padding, activation="relu"),
        keras.layers.AveragePooling2D(2, 1, padding=padding),
        keras.layers.Conv2D(256, 4, padding=padding, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(32, activation="relu", name="hidden"),
        keras.layers.Dense(num_classes, name="logits"),
    ], name=f"afrrs_table2_cifar_{padding}")
