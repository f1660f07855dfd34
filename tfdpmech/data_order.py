"""The standard record order of a dataset, whatever source it was read from.

``tensorflow_datasets`` stores MNIST's records in an order of its own (examples are shuffled by a
hash of their key when the dataset is prepared), while the IDX files keep the published order.
A split such as "the last 5,000 training images" must mean the same records from either source,
so :func:`reorder_like` puts records into a reference order given by :func:`fingerprints`: one
64-bit BLAKE2b digest of each record's pixels and label.

The reference order of the MNIST training set is bundled as ``datasets/mnist-train-fingerprints.bin``
(60,000 little-endian uint64, the IDX order); the test set's is computed from the bundled test IDX
files. This module does not import TensorFlow.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

__all__ = ["fingerprints", "reorder_like", "MNIST_TRAIN_FINGERPRINTS", "mnist_train_fingerprints"]

MNIST_TRAIN_FINGERPRINTS = Path(__file__).resolve().parent / "datasets" / "mnist-train-fingerprints.bin"


def fingerprints(images, labels) -> np.ndarray:
    """One uint64 per record: the first 8 bytes of BLAKE2b over its uint8 pixels and its integer label."""
    images = np.ascontiguousarray(np.asarray(images))
    labels = np.asarray(labels).reshape(-1).astype(np.int64)
    if images.dtype != np.uint8:
        raise TypeError(f"images must be uint8 pixels as stored in the files, got {images.dtype}")
    if len(images) != len(labels):
        raise ValueError(f"images has {len(images)} records but labels has {len(labels)}")
    out = np.empty(len(images), dtype="<u8")
    for i, (image, label) in enumerate(zip(images, labels)):
        digest = hashlib.blake2b(image.tobytes(), digest_size=8, person=b"tfdpmech")
        digest.update(int(label).to_bytes(2, "little"))
        out[i] = int.from_bytes(digest.digest(), "little")
    return out


def reorder_like(images, labels, reference: np.ndarray, *, what: str):
    """``(images, labels)`` permuted into the order of ``reference`` (fingerprints of the same records).

    Raises ValueError naming ``what`` when the records are not exactly the reference's (a record
    missing, changed or added): then the data are not the standard dataset.
    """
    own = fingerprints(images, labels)
    reference = np.asarray(reference, dtype="<u8")
    if len(own) != len(reference):
        raise ValueError(f"{what}: {len(own)} records, the standard set has {len(reference)}")
    own_sorted, ref_sorted = np.argsort(own, kind="stable"), np.argsort(reference, kind="stable")
    if not np.array_equal(own[own_sorted], reference[ref_sorted]):
        missing = int(np.sum(~np.isin(reference, own)))
        raise ValueError(f"{what}: the records differ from the standard set ({missing} of {len(reference)} not "
                         "found); the source holds another version of the data")
    order = np.empty(len(own), dtype=np.int64)
    order[ref_sorted] = own_sorted  # the record at reference position p is own record order[p]
    return np.asarray(images)[order], np.asarray(labels)[order]


def mnist_train_fingerprints() -> np.ndarray:
    """The bundled fingerprints of the 60,000 MNIST training records, in the IDX order."""
    return np.fromfile(MNIST_TRAIN_FINGERPRINTS, dtype="<u8")
