"""pCDBN's networks: the one :class:`~tfdpmech.mechanisms.pcdbn.PrivateCDBN` trains, and the authors' one.

:func:`cdbn_network` builds the Keras model ``make_private(model, PrivateCDBN(...))`` trains;
:func:`pcdbn_authors_network` is the network of the authors' public code
(``haiphanNJIT/PrivateDeepLearning`` at ``77fb357``), used by the reference mode
(:mod:`tfdpmech.mechanisms.pcdbn.reference`), which re-runs that code path.
"""

from __future__ import annotations

import keras
import numpy as np

from ...layers.batch_statistics import BatchStatisticsNormalization
from ...validation import check_choice, check_positive_int
from ..functional_head.feature_map import FeatureMap
from .conv_rbm import ConvRBM

__all__ = ["cdbn_network", "pcdbn_authors_network"]


def cdbn_network(layers, input_shape, num_classes: int = 10, *, fc_units: int | None = None,
                 head_mechanism: str = "laplace") -> keras.Sequential:
    """The CDBN a :class:`~tfdpmech.mechanisms.pcdbn.PrivateCDBN` trains: ConvRBM… → Flatten → [FC] → head.

    Every weight is set by the mechanism (the layers by their perturbed energies, the FC at random
    independently of the data, the head by its one release), so the FC and the head start at zero.

    Args:
        layers: unbuilt :class:`~tfdpmech.layers.ConvRBM` layers, bottom first.
        input_shape: one image's shape, e.g. ``(28, 28, 1)``.
        num_classes: C.
        fc_units: width of the frozen random sigmoid layer before the head; None for none.
        head_mechanism: ``"laplace"`` (the paper's; also the non-private modes): the head is
            ``Dense(C)``; ``"gaussian"``: ``FeatureMap(clip_norm=True)`` then ``Dense(C, use_bias=False)``,
            the map the Gaussian calibration's statistics are computed with.
    """
    layers = list(layers) if isinstance(layers, (list, tuple)) else layers
    if not isinstance(layers, list) or not layers or not all(isinstance(layer, ConvRBM) for layer in layers):
        raise TypeError(f"layers must be a non-empty list of tfdpmech ConvRBM layers, got {layers!r:.80}")
    if isinstance(input_shape, (str, bytes)) or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                                                        and d > 0 for d in input_shape):
        raise TypeError(f"input_shape must be one image's shape as positive ints, e.g. (28, 28, 1), got {input_shape!r}")
    num_classes = check_positive_int(num_classes, "num_classes", minimum=2)
    fc_units = None if fc_units is None else check_positive_int(fc_units, "fc_units")
    head_mechanism = check_choice(head_mechanism, "head_mechanism", ("laplace", "gaussian"))
    fc = [] if fc_units is None else [keras.layers.Dense(fc_units, activation="sigmoid", name="random_fc")]
    if head_mechanism == "gaussian":
        head = [FeatureMap(clip_norm=True, name="unit_norm"),
                keras.layers.Dense(num_classes, use_bias=False, kernel_initializer="zeros", name="head")]
    else:
        head = [keras.layers.Dense(num_classes, kernel_initializer="zeros", name="head")]
    return keras.Sequential([keras.Input(tuple(input_shape)), *layers, keras.layers.Flatten(), *fc, *head],
                            name="cdbn")


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
