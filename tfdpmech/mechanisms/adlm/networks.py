"""AdLM's networks in the authors' public code (``haiphanNJIT/PrivateDeepLearning`` at ``77fb357``).

Used by the reference mode (:mod:`tfdpmech.mechanisms.adlm.reference`), which re-runs that code path.
"""

from __future__ import annotations

import keras

from ...layers.batch_statistics import BatchStatisticsNormalization

__all__ = ["authors_mnist_network", "lenet5_relevance_model"]


def lenet5_relevance_model(num_classes: int = 10, seed: int | None = None) -> keras.Sequential:
    """The LRP toolbox's LeNet-5 that ``dpLRP_MNIST.py:16`` loads (``models/MNIST/LeNet-5.txt``).

    conv 5×5×10 → ReLU → 2×2 pool → conv 5×5×25 → ReLU → pool → conv 4×4×100 → ReLU → pool →
    10 logits, on 32×32 inputs. The toolbox's sum-pools are average pools here (a constant factor
    the next layer absorbs), and its final 1×1 convolution on a 1×1 map is the equivalent Dense
    layer, so :func:`tfdpmech.mechanisms.adlm.lrp_relevance` accepts the model.
    """
    init = keras.initializers.GlorotUniform(seed=seed)
    return keras.Sequential([
        keras.Input((32, 32, 1)),
        keras.layers.Conv2D(10, 5, activation="relu", kernel_initializer=init),
        keras.layers.AveragePooling2D(2),
        keras.layers.Conv2D(25, 5, activation="relu", kernel_initializer=init),
        keras.layers.AveragePooling2D(2),
        keras.layers.Conv2D(100, 4, activation="relu", kernel_initializer=init),
        keras.layers.AveragePooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dense(num_classes, kernel_initializer=init),
    ], name="lenet5_relevance")


def authors_mnist_network(num_classes: int = 10, hidden_units: int = 25, *, seed: int | None = None,
                          input_shape=(28, 28, 1)) -> keras.Sequential:
    """conv 5×5×32 → max-pool → conv 5×5×64 → max-pool → FC-25 → BN (batch statistics) → ReLU → clip → FC-M.

    ``AdLM.py:155-199``: SAME convolutions with stride 1 and ReLU, 2×2 max-pools, weights
    ``truncated_normal(stddev=0.1)`` and biases 0.1 (``AdLM.py:32-34, 51-53``), batch norm with
    the batch's own statistics and ε = 1e-3, ``relu`` then ``clip_by_value(·, −1, 1)`` (which is a
    ReLU capped at 1), and an output layer with bias. No LRN, no dropout.
    """
    def w(i):
        return keras.initializers.TruncatedNormal(stddev=0.1, seed=None if seed is None else seed + i)

    b = keras.initializers.Constant(0.1)
    return keras.Sequential([
        keras.Input(tuple(input_shape)),
        keras.layers.Conv2D(32, 5, padding="same", activation="relu", kernel_initializer=w(0), bias_initializer=b,
                            name="conv1"),  # AdLM.py:158-165
        keras.layers.MaxPooling2D(2, padding="same"),  # AdLM.py:166
        keras.layers.Conv2D(64, 5, padding="same", activation="relu", kernel_initializer=w(1), bias_initializer=b,
                            name="conv2"),  # AdLM.py:168-170
        keras.layers.MaxPooling2D(2, padding="same"),  # AdLM.py:171
        keras.layers.Flatten(),  # AdLM.py:175
        keras.layers.Dense(hidden_units, kernel_initializer=w(2), bias_initializer=b, name="fc"),  # AdLM.py:173-176
        BatchStatisticsNormalization(1e-3, name="batch_stat_norm"),  # AdLM.py:178-181
        keras.layers.ReLU(max_value=1.0, name="relu_clip"),  # AdLM.py:183-185: relu, then clip to [-1, 1]
        keras.layers.Dense(num_classes, kernel_initializer=w(3), bias_initializer=b, name="w_out"),  # AdLM.py:197-199
    ], name="adlm_authors_mnist")
