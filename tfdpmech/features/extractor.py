"""A feature extractor that never saw the private data, with its provenance as an ε = 0 release.

The functional head (:mod:`tfdpmech.mechanisms.functional_head`) is private only if the features feeding its
polynomial do not depend on the private records (Zhang et al., PVLDB 2012, §4: the
objective's coefficients must be sums of per-record terms). A :class:`FeatureExtractor`
carries that fact with the model: where its weights came from (a ``Release`` with ε = 0 and
the argument), the bounds its outputs obey by construction, a fingerprint of its weights (a
later change is refused), a frozen copy of exactly those weights (every feature is computed
with it, and the models built on the features hold it), and, when given, hashes of the public
records it was trained on (a private set that overlaps them is refused).
"""

from __future__ import annotations

import functools
import hashlib
import math

import keras
import numpy as np
import tensorflow as tf

from ..accounting.ledger import Release
from ..validation import check_array, check_positive_int
from .public_data import check_disjoint, record_hashes

__all__ = ["FeatureExtractor", "weights_fingerprint", "check_feature_seed", "check_extractor_or_none"]


def check_feature_seed(seed) -> int:
    """The integer seed of a data-independent feature draw (None is refused: the features must be reproducible)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an integer (the features must be reproducible), got {seed!r}")
    return int(seed)


def weights_fingerprint(model) -> str:
    """A short hash of every weight (trainable or not) of a Keras model or layer."""
    h = hashlib.sha256()
    for w in model.weights:
        arr = np.ascontiguousarray(np.asarray(w.numpy() if hasattr(w, "numpy") else w))
        h.update(str(arr.shape).encode() + str(arr.dtype).encode() + arr.tobytes())
    return h.hexdigest()[:16]


AUTO_BATCH_FLOATS = 16 * 2**20  # 64 MB of float32 activations per forward pass of the extractor


def _frozen_copy(model, fingerprint: str):
    """A non-trainable copy of ``model`` with the same weights (``keras.models.clone_model``)."""
    try:
        copy = keras.models.clone_model(model)
        copy.set_weights(model.get_weights())
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise TypeError(
            f"model {model.name!r} cannot be copied with keras.models.clone_model ({exc}); the extractor keeps a "
            "frozen copy of the weights whose provenance it records, so build it as a Functional or Sequential "
            "model of serialisable layers"
        ) from exc
    copy.trainable = False
    if weights_fingerprint(copy) != fingerprint:  # pragma: no cover - clone_model + set_weights is exact
        raise RuntimeError(f"the frozen copy of {model.name!r} differs from the model")
    return copy


def _output_sizes(layer) -> list:
    """Floats per record of each output of ``layer`` ([] when unknown: a layer never called, or
    called more than once)."""
    try:
        outputs = tf.nest.flatten(layer.output)
    except (AttributeError, RuntimeError, ValueError):
        return []
    return [int(np.prod(o.shape[1:])) for o in outputs if all(d is not None for d in o.shape[1:])]


def check_extractor_or_none(features):
    """``features`` if it is a :class:`FeatureExtractor` or None, else a TypeError naming the fix."""
    if features is not None and not isinstance(features, FeatureExtractor):
        raise TypeError(
            f"features must be a tfdpmech.features.FeatureExtractor or None, got {type(features).__name__}; "
            "wrap a model trained on public data with tfdpmech.features.public_features(model, layer)"
        )
    return features


class FeatureExtractor:
    """A Keras model ``x → features`` whose weights are independent of the private data.

    Build one with :func:`tfdpmech.features.public_features` (a model trained on public data)
    or :func:`tfdpmech.features.random_features` (data-independent); constructing it directly
    is the same assertion, stated in ``provenance``.

    Args:
        model: a built Keras model mapping a batch of records to features (any rank; flattened).
        name: short name used in the ledger (``features:<name>``).
        provenance: why the weights carry no information about the private records; it becomes
            the ``basis`` of the ε = 0 release.
        bounds: ``(low, high)`` every output coordinate obeys by construction (e.g. ``(0, 1)`` after a
            sigmoid or :class:`~tfdpmech.layers.UnitClip`); ``(-inf, inf)`` when unknown.
        trained_on: the public records the weights were fit on, if any; only their hashes are kept,
            to refuse a private set that shares records with them.

    Attributes:
        frozen: a non-trainable copy of ``model`` made here, when the provenance is recorded. Every
            feature is computed with it, and the models built on the features (e.g.
            :meth:`tfdpmech.mechanisms.functional_head.FunctionalHead.to_keras`) hold it, so training ``model`` further
            cannot change what a release was computed from; such a change is refused on the next use.

    Raises:
        TypeError: ``model`` is not a Keras model, or cannot be copied (a subclassed model).
        ValueError: bounds with ``low >= high`` or NaN.
    """

    def __init__(self, model, *, name: str, provenance: str, bounds=(-math.inf, math.inf), trained_on=None):
        if not isinstance(model, keras.Model):
            raise TypeError(f"model must be a keras.Model mapping records to features, got {type(model).__name__}")
        low, high = (float(b) for b in bounds)
        if not low < high:
            raise ValueError(f"bounds must be (low, high) with low < high, got {bounds!r}")
        self.model = model  # used in inference mode only; its trainable flags are left alone (shared layers)
        self.name = str(name)
        self.bounds = (low, high)
        self.fingerprint = weights_fingerprint(model)
        self.frozen = _frozen_copy(model, self.fingerprint)
        self._public_hashes = None if trained_on is None else record_hashes(trained_on, "trained_on")
        self.release = Release(
            component=f"features:{self.name}", mechanism="none", epsilon_claimed=0.0, epsilon_provable=0.0,
            neighbours="replace_one", protects="record",  # ε = 0: holds under either relation
            basis=str(provenance),
            details={"weights_fingerprint": self.fingerprint, "bounds": [low, high],
                     "public_records": None if self._public_hashes is None else len(self._public_hashes)},
        )

    @property
    def input_shape(self) -> tuple:
        """Shape of one input record."""
        return tuple(self.model.input_shape[1:])

    @property
    def num_features(self) -> int:
        """Number of output features (flattened)."""
        return int(np.prod(self.model.output_shape[1:]))

    @property
    def nonnegative(self) -> bool:
        """Every feature is >= 0 by construction."""
        return self.bounds[0] >= 0.0

    @property
    def unit_bounded(self) -> bool:
        """Every feature lies in [0, 1] by construction (what the Laplace calibration needs)."""
        return self.bounds[0] >= 0.0 and self.bounds[1] <= 1.0

    def check_unchanged(self) -> None:
        """Refuse weights that changed since the provenance (and any release using it) was recorded,
        in the model or in its frozen copy.

        Raises:
            ValueError: the weights' fingerprint differs from the recorded one.
        """
        for which, model in (("its weights", self.model), ("the weights of its frozen copy", self.frozen)):
            now = weights_fingerprint(model)
            if now != self.fingerprint:
                raise ValueError(
                    f"feature extractor {self.name!r}: {which} changed after its provenance was recorded "
                    f"(fingerprint {self.fingerprint} -> {now}); statistics released with the old features do not "
                    "describe the new ones. If the new weights also never saw the private data, wrap the model again "
                    "(tfdpmech.features.public_features) and build a new head (a new release, a new budget)"
                )

    def check_disjoint(self, x_private, name: str = "x_private") -> None:
        """Refuse private records identical to public records the extractor was trained on.

        Raises:
            ValueError: at least one record of ``x_private`` equals a ``trained_on`` record.
        """
        if self._public_hashes is not None:
            check_disjoint(self._public_hashes, x_private, names=("trained_on", name))

    @functools.cached_property
    def auto_batch_size(self) -> int:
        """Records per forward pass when none is given: as many as keep the widest layer's output
        under :data:`AUTO_BATCH_FLOATS` floats (64 MB), within [256, 8192]; 512 when the layers'
        shapes are unknown. No effect on privacy or on the features.
        The MLP families' extractors take 8,192 records at a time, the MNIST CNN's about 650."""
        sizes = [size for layer in self.model.layers for size in _output_sizes(layer)]
        if not sizes:  # shapes unknown (a subclassed model): a fixed 512
            return 512
        widest = max(sizes)
        return int(min(8192, max(256, AUTO_BATCH_FLOATS // widest)))

    def __call__(self, x, *, batch_size: int | None = None, name: str = "x") -> np.ndarray:
        """Features of ``x`` as float64 ``(n, num_features)``, computed with :attr:`frozen` and checked.

        ``batch_size`` (records per forward pass) defaults to :attr:`auto_batch_size`.

        Raises:
            ValueError: changed weights, non-finite inputs/features, features outside the bounds
                (never clipped: the bounds are what a sensitivity was computed for), or a record's
                features that change with the other records of its batch (one record would then
                influence every other record's features, and no per-record sensitivity would hold).
        """
        self.check_unchanged()
        x = check_array(x, name, ndim_min=2)
        expected = tuple(self.frozen.inputs[0].shape[1:])
        if len(expected) != x.ndim - 1 or any(e is not None and e != s for e, s in zip(expected, x.shape[1:])):
            raise ValueError(
                f"{name} has records of shape {x.shape[1:]}, but feature extractor {self.name!r} takes records of "
                f"shape {expected}; pass the raw records the extractor was built for"
            )
        batch_size = self.auto_batch_size if batch_size is None else check_positive_int(batch_size, "batch_size")
        f = self._forward(x, batch_size)
        if len(x) >= 2 and not np.allclose(self._forward(x[:1], 1)[0], f[0], rtol=1e-4, atol=1e-5):
            raise ValueError(
                f"feature extractor {self.name!r}: a record's features change with the other records of its batch "
                "(a layer using batch statistics at inference?), so one record would influence the others' features "
                "and no per-record sensitivity would hold; use per-record layers only"
            )
        check_array(f, f"features of {name}")
        lo, hi = float(f.min()), float(f.max())
        if lo < self.bounds[0] or hi > self.bounds[1]:
            raise ValueError(
                f"feature extractor {self.name!r} produced values in [{lo:g}, {hi:g}] on {name}, outside its declared "
                f"bounds {list(self.bounds)}; fix the extractor (end it with a sigmoid or tfdpmech.layers.UnitClip) "
                "or declare the bounds it really obeys"
            )
        return f

    def _forward(self, x: np.ndarray, batch_size: int) -> np.ndarray:
        parts = [np.asarray(self.frozen(x[i:i + batch_size].astype(np.float32, copy=False), training=False))
                 for i in range(0, len(x), batch_size)]
        return np.concatenate(parts).reshape(len(x), -1).astype(np.float64)

    def __repr__(self) -> str:
        return (f"FeatureExtractor({self.name!r}, features={self.num_features}, bounds={list(self.bounds)}, "
                f"fingerprint={self.fingerprint})")
