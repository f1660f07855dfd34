"""pCDBN's network in the authors' public code (``haiphanNJIT/PrivateDeepLearning`` at ``77fb357``).

Used by the reference mode (:mod:`tfdpmech.mechanisms.pcdbn.reference`), which re-runs that code path.
"""

from __future__ import annotations

import keras

from ...layers.batch_statistics import BatchStatisticsNormalization

__all__ = ["pcdbn_authors_network"]


def pcdbn_authors_network(num_classes: int = 10, *, maps=(32, 64), filter_size: int = 5, hidden_units: int = 25,
                          seed: int | None = None, input_shape=(28, 28, 1)) -> keras.Sequential:
    """pCDBN's MNIST network: sigmoid stride-2 SAME convolutions → FC → BN → ReLU → clip → output.

    ``pCDBN/mlp.py:21-30`` (encoders, ``truncated_normal(stddev=0.1)`` weights, zero biases),
    ``mlp.py:137-162`` (FC-25 with batch statistics; γ and β are not trained) and
    ``logisticRegression.py:60-74`` (``clip(h, 0, 1)``, output with bias). The encoder layers are
    named ``enc1``, ``enc2``; the others ``fc``, ``batch_stat_norm``, ``relu_clip``, ``out``.
    """
    def w(i):
        return keras.initializers.TruncatedNormal(stddev=0.1, seed=None if seed is None else seed + i)

    layers = [keras.Input(tuple(input_shape))]
    for i, m in enumerate(maps):
        layers.append(keras.layers.Conv2D(m, filter_size, strides=2, padding="same", activation="sigmoid",
                                          kernel_initializer=w(i), bias_initializer="zeros", name=f"enc{i + 1}"))
    layers += [
        keras.layers.Flatten(),
        keras.layers.Dense(hidden_units, kernel_initializer=w(10), bias_initializer="zeros", name="fc"),
        BatchStatisticsNormalization(1e-3, trainable_affine=False, name="batch_stat_norm"),  # mlp.py:157-160
        keras.layers.ReLU(max_value=1.0, name="relu_clip"),  # mlp.py:162, logisticRegression.py:72
        keras.layers.Dense(num_classes, kernel_initializer=w(11), bias_initializer="zeros", name="out"),
    ]
    return keras.Sequential(layers, name="pcdbn_authors_mnist")
