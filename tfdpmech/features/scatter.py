"""Scattering-transform features (Tramèr & Boneh, ICLR 2021): data-independent, via ``kymatio``.

The 2-D scattering transform (Mallat 2012; Bruna & Mallat 2013) is a fixed cascade of Morlet
wavelet convolutions and moduli: its filters depend on the image shape and ``J`` only, never on
data, so it releases nothing about the private records (ε = 0) and needs no public data. The
``81·(H/4)·(W/4)`` coefficients (J = 2, 8 angles) are reduced to ``units`` by a fixed Gaussian
random projection drawn from ``numpy.random.default_rng(seed)``; the functional head's Gaussian
calibration then normalises each vector (bias included) to unit L2 norm. kymatio is imported when
the layer is built (:mod:`tfdpmech.features.kymatio_compat` says how it loads on recent SciPy).
"""

from __future__ import annotations

import collections
import hashlib
import math

import keras
import numpy as np
import tensorflow as tf

from ..noise import make_rng
from ..validation import check_positive_int
from .extractor import FeatureExtractor
from .seeded_layer import SeededFeatureLayer

__all__ = ["ScatteringProjection", "check_scattering_shape", "scatter_features", "scattering_channels",
           "scattering_coefficients"]


@keras.saving.register_keras_serializable(package="tfdpmech")
class ScatteringProjection(SeededFeatureLayer):
    """2-D scattering transform of one-channel images, then a fixed random projection.

    Args:
        J: scale of the transform (the output is ``2^J`` times smaller per side).
        units: dimension of the random projection.
        seed: integer seed of the projection (frozen, data-independent).

    Input shape: ``(batch, H, W, 1)``. Output shape: ``(batch, units)``.
    """

    CONFIG_KEYS = ("J", "units", "seed")

    def __init__(self, J: int = 2, units: int = 512, seed: int = 0, **kwargs):
        super().__init__(units, seed, **kwargs)
        self.J = check_positive_int(J, "J")

    def build(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(f"ScatteringProjection needs (batch, H, W, 1) images, got {tuple(input_shape)}")
        check_scattering_shape(tuple(input_shape[1:]), self.J, "ScatteringProjection's input shape")
        height, width = int(input_shape[1]), int(input_shape[2])
        from .kymatio_compat import kymatio_tensorflow  # ImportError naming the extra when kymatio is missing

        self._scattering = kymatio_tensorflow.Scattering2D(J=self.J, shape=(height, width))
        dim = int(np.prod(self._scattering(tf.zeros((1, height, width))).shape[1:]))
        self.kernel = self.add_frozen("kernel", make_rng(self.seed).normal(0.0, 1.0 / math.sqrt(self.units),
                                                                           (dim, self.units)))
        super().build(input_shape)

    def call(self, inputs):
        s = self._scattering(tf.cast(inputs[..., 0], tf.float32))
        return tf.matmul(tf.reshape(s, (tf.shape(s)[0], -1)), self.kernel)


def scatter_features(input_shape=(28, 28, 1), *, J: int = 2, units: int = 512, seed: int = 0) -> FeatureExtractor:
    """A data-independent :class:`FeatureExtractor`: scattering transform + fixed random projection.

    Needs no public data (Tramèr & Boneh's ScatterNet features). The features are unbounded, so use
    them with the Gaussian calibration of :class:`~tfdpmech.mechanisms.functional_head.FunctionalHead`.

    Args:
        input_shape: shape of one image, ``(H, W, 1)`` with ``H`` and ``W`` greater than ``2**J``.
        J: scattering scale.
        units: projection dimension.
        seed: projection seed (recorded in the ledger).

    Raises:
        TypeError: ``input_shape`` is not three integers.
        ValueError: ``input_shape`` has more than one channel, or a side of at most ``2**J`` pixels
            (:func:`check_scattering_shape`); ``J`` or ``units`` below 1.
    """
    if isinstance(input_shape, (str, bytes)) or not hasattr(input_shape, "__iter__") or len(input_shape) != 3:
        raise TypeError(f"input_shape must be the shape of one image, e.g. (28, 28, 1), got {input_shape!r}")
    shape = tuple(check_positive_int(s, f"input_shape[{i}]") for i, s in enumerate(input_shape))
    check_scattering_shape(shape, check_positive_int(J, "J"), "input_shape")
    inp = keras.Input(shape)
    layer = ScatteringProjection(J, units, seed, name="scattering_projection")
    model = keras.Model(inp, layer(inp), name=f"scatter_J{J}_{units}")
    provenance = (f"2-D scattering transform (kymatio, J={J}, Morlet filters fixed by the image shape) and a "
                  f"{units}-dimensional Gaussian random projection drawn from numpy.random.default_rng({seed}), "
                  "independent of any data: ε = 0")
    return FeatureExtractor(model, name=f"scatter:J{J}:{units}", provenance=provenance)


def scattering_coefficients(x, *, J: int = 2, groups: int = 27, batch_size: int = 1000) -> np.ndarray:
    """ScatterNet features of each image, normalised per record: ``(n, 81·(H/2^J)·(W/2^J))`` float32.

    Tramèr & Boneh's features for DP-SGD: the 2-D scattering transform (J = 2, 8 angles: 81
    channels), then each record's channels split into ``groups`` groups, each group shifted and
    scaled to mean 0 and variance 1 over its own coefficients (group normalisation without learned
    parameters). Every step is a fixed function of the one record (no statistic across records), so
    computing them releases nothing (ε = 0); DP-SGD then trains on them like on any input.

    The transform of the last two image arrays is kept in memory (:func:`scattering_channels`); each
    call returns its own array.
    """
    coefficients = scattering_channels(x, J=J, batch_size=batch_size)  # (n, 81, H', W')
    channels = coefficients.shape[1]
    groups = check_positive_int(groups, "groups")
    if channels % groups:
        raise ValueError(f"groups={groups} must divide the {channels} scattering channels (e.g. 27, 9 or 3)")
    grouped = coefficients.reshape(len(coefficients), groups, -1)
    grouped = (grouped - grouped.mean(axis=2, keepdims=True)) / np.sqrt(grouped.var(axis=2, keepdims=True) + 1e-5)
    return grouped.reshape(len(coefficients), -1).astype(np.float32)


def scattering_channels(x, *, J: int = 2, batch_size: int = 1000) -> np.ndarray:
    """The 2-D scattering transform of each image, not normalised: ``(n, 81, H/2^J, W/2^J)`` float32 (J = 2).

    The channels in kymatio's order (order 0, the first-order paths, then the second-order ones). The last
    two results are kept in memory, keyed by the images' bytes and ``J`` (the whole MNIST takes minutes on a
    CPU and a comparison asks for the same features once per run); the array returned is shared with that
    cache: read it, never write to it.
    """
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 4:
        raise ValueError(f"x must be (n, H, W, 1) images, got shape {x.shape}")
    check_scattering_shape(x.shape[1:], check_positive_int(J, "J"), "x's image shape")
    key = (hashlib.sha1(np.ascontiguousarray(x).data).hexdigest(), x.shape, J)
    if key not in _COEFFICIENTS:
        _COEFFICIENTS[key] = _coefficients(x, J, batch_size)
        _COEFFICIENTS[key].flags.writeable = False
        while len(_COEFFICIENTS) > _KEEP:
            _COEFFICIENTS.popitem(last=False)
    _COEFFICIENTS.move_to_end(key)
    return _COEFFICIENTS[key]


def check_scattering_shape(shape, J: int, name: str) -> None:
    """Check ``shape`` = ``(H, W, C)`` is an image the 2-D scattering transform at scale ``J`` takes.

    kymatio's ``Scattering2D`` transforms one channel and pads each side of an image by up to
    ``2**J`` pixels by reflection, which needs more than ``2**J`` pixels per side: ``H > 2**J`` and
    ``W > 2**J`` (``(28, 28, 1)`` at the default ``J = 2``; ``(5, 5, 1)`` is the smallest there).

    Raises:
        ValueError: naming ``name``, the shape and what it must be.
    """
    height, width, channels = (int(s) for s in shape)
    if channels != 1:
        raise ValueError(
            f"{name} must be (H, W, 1): the scattering transform takes one-channel images, got {tuple(shape)} "
            f"with {channels} channels; convert colour images to grey first, e.g. x.mean(axis=-1, keepdims=True), "
            f"and pass ({height}, {width}, 1)"
        )
    side = 2 ** J
    if min(height, width) <= side:
        raise ValueError(
            f"{name} must be (H, W, 1) with H and W greater than 2**J = {side} (J={J}: the transform pads each "
            f"side by up to {side} pixels by reflection), got {tuple(shape)}; use a smaller J (J=1 takes sides of "
            f"3 pixels and more) or larger images, e.g. ({max(height, side + 1)}, {max(width, side + 1)}, 1)"
        )


_COEFFICIENTS: collections.OrderedDict = collections.OrderedDict()
_KEEP = 2  # a comparison's private and test images


def _coefficients(x, J, batch_size) -> np.ndarray:
    from .kymatio_compat import kymatio_tensorflow  # ImportError naming the extra when kymatio is missing

    scattering = kymatio_tensorflow.Scattering2D(J=check_positive_int(J, "J"), shape=x.shape[1:3])
    parts = [np.asarray(scattering(tf.constant(x[i:i + batch_size, ..., 0]))) for i in range(0, len(x), batch_size)]
    return np.concatenate(parts)  # (n, 81, H', W')
