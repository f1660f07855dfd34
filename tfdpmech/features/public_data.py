"""Public data for the feature extractors, kept apart from the private records.

Two public sources:

* a count taken from the *start* of a :class:`~tfdpmech.data.DataSplits` training split, the rest
  being the private set (:func:`split_public`); the two parts are checked to share no record;
* scikit-learn's 8×8 handwritten digits (1,797 images, pixel values 0…16, by E. Alpaydin and
  C. Kaynak, UCI), divided by the public bound 16 and resized with ``tf.image.resize`` to a
  20×20 box centred in 28×28, the framing MNIST documents for its own digits
  (:func:`load_digits_public`): public data from a related but different source than MNIST.
"""

from __future__ import annotations

import dataclasses
import hashlib
import numbers

import numpy as np

from ..validation import check_array, check_one_hot

__all__ = ["PublicSplit", "record_hashes", "check_disjoint", "split_public", "load_digits_public", "public_split"]

DIGITS_PIXEL_HIGH = 16.0  # public bound of scikit-learn's 8×8 digits (4-bit counts)


def _row_digests(x, name: str):
    """SHA-1 (hex) of each record's float32 bytes, in order."""
    rows = np.ascontiguousarray(check_array(x, name, ndim_min=2), dtype=np.float32).reshape(len(x), -1)
    return (hashlib.sha1(row).hexdigest() for row in rows)


def record_hashes(x, name: str = "x") -> frozenset:
    """SHA-1 of each record's float32 bytes (records compared exactly, as stored by :mod:`tfdpmech.data`)."""
    return frozenset(_row_digests(x, name))


def check_disjoint(x_public, x_private, *, names=("x_public", "x_private")) -> None:
    """Refuse a private set that shares a record with the public one.

    Args:
        x_public: public records, or a set of hashes from :func:`record_hashes`.
        x_private: private records.
        names: the two arguments' names, for the message.

    Raises:
        ValueError: at least one identical record in both.
    """
    pub = x_public if isinstance(x_public, (set, frozenset)) else record_hashes(x_public, names[0])
    shared = sum(digest in pub for digest in _row_digests(x_private, names[1]))
    if shared:
        raise ValueError(
            f"{names[1]} shares {shared} record(s) with {names[0]}: a feature extractor trained on them is not "
            "independent of the private data. Take the public records from a disjoint part (e.g. "
            "tfdpmech.features.split_public) or from another source"
        )


@dataclasses.dataclass(frozen=True, eq=False)
class PublicSplit:
    """Public and private records (and the untouched test set), with where the public part came from."""

    x_public: np.ndarray
    y_public: np.ndarray
    x_private: np.ndarray
    y_private: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str


def split_public(splits, n_public: int) -> PublicSplit:
    """The first ``n_public`` training records are public, the others private (checked disjoint).

    Args:
        splits: a :class:`tfdpmech.data.DataSplits`.
        n_public: how many training records are public (1 <= n_public < n_train).

    Raises:
        TypeError / ValueError: a non-integer or out-of-range count, or overlapping parts.
    """
    n = len(splits.x_train)
    if isinstance(n_public, bool) or not isinstance(n_public, numbers.Integral):
        raise TypeError(f"n_public must be an integer number of records, got {n_public!r}")
    if not 1 <= n_public < n:
        raise ValueError(f"n_public must lie in [1, {n - 1}] for {splits.name} ({n} training records), got {n_public}")
    k = int(n_public)
    out = PublicSplit(splits.x_train[:k], splits.y_train[:k], splits.x_train[k:], splits.y_train[k:],
                      splits.x_test, splits.y_test,
                      source=f"the first {k} training records of {splits.name} (the other {n - k} are private)")
    check_disjoint(out.x_public, out.x_private)
    check_disjoint(out.x_public, out.x_test, names=("x_public", "x_test"))
    return out


def load_digits_public(image_shape=(28, 28), *, box: int | None = 20):
    """scikit-learn's 8×8 digits as public images: ``(x, y)``, float32 NHWC in [0, 1] and one-hot labels.

    Pixels are divided by their public bound 16 and bilinearly resized with ``tf.image.resize``
    (a convex combination of pixels, so the values stay in [0, 1]; checked, never clipped).

    Args:
        image_shape: output height and width.
        box: resize the digit to ``box × box`` and pad it with zeros to ``image_shape``, the framing
            MNIST documents for its digits (size-normalised to a 20×20 box, centred in 28×28); None
            resizes the 8×8 image to the whole frame.

    Raises:
        ValueError: a box larger than the image.
    """
    import tensorflow as tf
    from sklearn.datasets import load_digits

    height, width = (int(s) for s in image_shape)
    if box is not None and not 1 <= int(box) <= min(height, width):
        raise ValueError(f"box must lie in [1, {min(height, width)}] for image_shape={image_shape!r}, got {box!r}; "
                         "or pass box=None to resize to the whole frame")
    digits = load_digits()
    x = digits.images.astype(np.float32)[..., None] / DIGITS_PIXEL_HIGH
    if box is None:
        x = tf.image.resize(x, (height, width), method="bilinear").numpy()
    else:
        x = tf.image.resize(x, (int(box), int(box)), method="bilinear")
        x = tf.image.pad_to_bounding_box(x, (height - int(box)) // 2, (width - int(box)) // 2, height, width).numpy()
    x = x.astype(np.float32)
    lo, hi = float(x.min()), float(x.max())
    if lo < 0.0 or hi > 1.0:  # pragma: no cover - bilinear weights are convex
        raise ValueError(f"resized digits left [0, 1]: [{lo:g}, {hi:g}]")
    y = np.eye(10, dtype=np.float32)[digits.target]
    return x, check_one_hot(y, "y", num_classes=10)


def public_split(spec, splits) -> PublicSplit:
    """Public data by a short spec: an int ``N`` (the first N training records) or ``"digits"``.

    With ``"digits"`` every training record of ``splits`` is private.

    Raises:
        ValueError: an unknown spec, or digits for data that are not 28×28×1 / 10 classes.
    """
    if isinstance(spec, str) and spec.strip().isdigit():
        spec = int(spec)
    if isinstance(spec, numbers.Integral) and not isinstance(spec, bool):
        return split_public(splits, int(spec))
    if spec == "digits":
        if splits.input_shape[-1] != 1 or splits.num_classes != 10:
            raise ValueError(f"public='digits' needs 10-class grey-scale images, got {splits.name} with input shape "
                             f"{splits.input_shape} and {splits.num_classes} classes; pass a count instead")
        x, y = load_digits_public(splits.input_shape[:2])
        check_disjoint(x, splits.x_train, names=("digits", "x_private"))
        return PublicSplit(x, y, splits.x_train, splits.y_train, splits.x_test, splits.y_test,
                           source="scikit-learn 8×8 digits (1,797 images, /16, resized bilinearly to 20×20 and "
                                  f"centred in {splits.input_shape[0]}×{splits.input_shape[1]} as MNIST frames its digits)")
    raise ValueError(f"public must be a record count N (the first N training records) or 'digits', got {spec!r}")
