"""The tanh CNN of Papernot et al. (AAAI 2021) and Tramèr & Boneh (ICLR 2021), DP-SGD's MNIST baseline.

``Conv 16@8×8 stride 2 "same" → MaxPool 2 stride 1 → Conv 32@4×4 stride 2 "valid" → MaxPool 2
stride 1 → Flatten → Dense 32 → Dense M`` (logits), tanh after every hidden layer. Tempered
sigmoids keep the per-example gradient norms small, so clipping removes less signal (Papernot et
al. §4). About 26,000 weights; standard Keras layers only, so every trainable layer has an exact
per-example clipping path (ghost norms for Conv2D and Dense).
"""

from __future__ import annotations

import keras

from ..validation import check_positive_int

__all__ = ["tanh_cnn"]


def tanh_cnn(num_classes: int = 10, *, input_shape=(28, 28, 1), activation: str = "tanh",
             name: str = "tanh_cnn") -> keras.Sequential:
    """The 4-layer tanh CNN (Papernot et al. 2021, Table 1; Tramèr & Boneh 2021, Table 9: MNIST)."""
    check_positive_int(num_classes, "num_classes", minimum=2)
    return keras.Sequential([
        keras.Input(tuple(input_shape)),
        keras.layers.Conv2D(16, 8, strides=2, padding="same", activation=activation),
        keras.layers.MaxPool2D(2, strides=1),
        keras.layers.Conv2D(32, 4, strides=2, padding="valid", activation=activation),
        keras.layers.MaxPool2D(2, strides=1),
        keras.layers.Flatten(),
        keras.layers.Dense(32, activation=activation),
        keras.layers.Dense(num_classes),
    ], name=name)
