"""The released-data guard of the noise-once mechanisms: a model trains on the released arrays or not at all.

A noise-once mechanism (ILM/AdLM's perturbed inputs, input perturbation) proves its ε for a
model trained on the arrays it released. :class:`ReleasedData` fingerprints those arrays;
:func:`guard_training_data` makes a model's train step refuse any batch that is not part of
them; :class:`ReleasedDataGuard` does that from a Keras callback. :func:`array_fingerprint` is
the package's one fingerprint of an array.
"""

from __future__ import annotations

import hashlib

import keras
import numpy as np
import tensorflow as tf

__all__ = ["array_fingerprint", "ReleasedData", "guard_training_data", "ReleasedDataGuard"]


def array_fingerprint(array) -> str:
    """A short SHA-256 of an array's bytes and shape: shows that frozen noise or released data did not change."""
    arr = np.ascontiguousarray(np.asarray(array))
    return hashlib.sha256(arr.tobytes() + str(arr.shape).encode()).hexdigest()[:16]


class ReleasedData:
    """The arrays a mechanism released for training, fingerprinted so that training on anything else is refused.

    A noise-once mechanism's guarantee covers a model trained on the arrays it released (the
    model is post-processing of them), and nothing else: a model fitted on the raw data has no
    guarantee, whatever the callback logs. This object keeps, per released record, one float64
    random projection of all its arrays jointly (e.g. ``x̄_i`` and ``ϕ̄_i``), sorted; a training
    batch passes only if every one of its records projects onto a released record's value. The
    projections are a checksum of the noisy (already public) release, not of the raw data.

    Args:
        arrays: the released arrays, all with the same number of records (first axis).
        source: who released them, e.g. ``"ILM.perturb"`` (named in the error).
        fix: what to train on instead (named in the error).
    """

    RELATIVE_TOLERANCE = 1e-9  # float64 summation order may differ between numpy and TensorFlow

    def __init__(self, arrays, *, source: str, fix: str):
        arrays = [np.asarray(a) for a in arrays]
        if not arrays or len({len(a) for a in arrays}) != 1:
            raise ValueError("ReleasedData needs one or more arrays with the same number of records")
        self.source, self.fix = source, fix
        self.n = len(arrays[0])
        self.row_sizes = tuple(int(np.prod(a.shape[1:], dtype=np.int64)) for a in arrays)
        self.fingerprints = tuple(array_fingerprint(a) for a in arrays)
        rng = np.random.default_rng(0x7FD9)  # public, fixed directions: a checksum, not a secret
        self._directions = tuple(rng.standard_normal(size) for size in self.row_sizes)
        projection = sum(a.reshape(self.n, -1).astype(np.float64) @ r for a, r in zip(arrays, self._directions))
        self._sorted = np.sort(projection)

    def assert_batch(self, data) -> tf.Operation:
        """An op that fails (``InvalidArgumentError``) if a record of the batch ``data`` was not released.

        Raises:
            ValueError: (at trace time) ``data`` does not have the released structure or row shapes.
        """
        x, y, _ = keras.utils.unpack_x_y_sample_weight(data)
        parts = [x] if len(self.row_sizes) == 1 else [x, y]
        if len(self.row_sizes) > 2:
            raise ValueError("ReleasedData.assert_batch handles (x,) or (x, y) releases")
        names = ("x", "y")
        projection = magnitude = None
        for i, (part, r, size) in enumerate(zip(parts, self._directions, self.row_sizes)):
            if part is None or isinstance(part, (dict, list, tuple)):
                raise ValueError(
                    f"{names[i]} passed to fit is {type(part).__name__}, not the single array {self.source} "
                    f"released; {self.fix}"
                )
            part = tf.convert_to_tensor(part)
            got = part.shape[1:].num_elements()
            if got is not None and got != size:
                raise ValueError(
                    f"{names[i]} passed to fit has {got} value(s) per record (shape {tuple(part.shape)}), but "
                    f"{self.source} released {size} per record: this is not the released data, and a model trained "
                    f"on it has no privacy guarantee; {self.fix}"
                )
            flat = tf.reshape(tf.cast(part, tf.float64), [tf.shape(part)[0], size]) * tf.constant(r)
            projection = tf.reduce_sum(flat, axis=1) if projection is None else projection + tf.reduce_sum(flat, 1)
            mag = tf.reduce_sum(tf.abs(flat), axis=1)
            magnitude = mag if magnitude is None else magnitude + mag
        released = tf.constant(self._sorted)
        idx = tf.searchsorted(released, projection)
        below = tf.gather(released, tf.maximum(idx - 1, 0))
        above = tf.gather(released, tf.minimum(idx, self.n - 1))
        distance = tf.minimum(tf.abs(projection - below), tf.abs(projection - above))
        foreign = tf.reduce_sum(tf.cast(distance > self.RELATIVE_TOLERANCE * magnitude + 1e-300, tf.int32))
        return tf.debugging.assert_equal(
            foreign, 0,
            message=(f"training data is not the data {self.source} released (records of this batch are not among "
                     f"the released ones): a model trained on it has no privacy guarantee; {self.fix}"),
        )


def guard_training_data(model, released: ReleasedData) -> None:
    """Make ``model``'s train step refuse every batch that is not part of ``released``.

    Wraps ``model.train_step`` (once per release; re-wrapping replaces the previous guard) and
    drops the cached train function so the next ``fit`` traces the guarded step.
    """
    if getattr(model, "_tfdpmech_released", None) is released:
        return
    inner = getattr(model, "_tfdpmech_unguarded_train_step", None) or model.train_step

    def train_step(data):
        try:
            check = released.assert_batch(data)
        except ValueError:
            model.train_function = None  # the failed trace must not poison the next fit
            raise
        with tf.control_dependencies([check]):
            return inner(data)

    model._tfdpmech_unguarded_train_step = inner
    model._tfdpmech_released = released
    model.train_step = train_step
    model.train_function = None


class ReleasedDataGuard:
    """Mixin for a Keras callback of a noise-once mechanism: the model it is given refuses other data.

    Subclasses implement :meth:`released_data`. In ``set_model`` (called by ``fit`` before the
    first step) the model's train step is guarded with :func:`guard_training_data`, so a ``fit``
    on data the mechanism did not release stops before any step (``InvalidArgumentError``, or
    ``ValueError`` when the shapes already differ) and no epoch logs a guarantee.
    """

    def released_data(self) -> ReleasedData:  # pragma: no cover - abstract
        raise NotImplementedError

    def set_model(self, model):
        super().set_model(model)
        guard_training_data(model, self.released_data())
