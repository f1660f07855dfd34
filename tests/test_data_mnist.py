"""The whole MNIST: the shared offline copy checked against MNIST's published facts, and the same
arrays in the same order from an IDX folder and from ``tensorflow_datasets``.

The shared copy is found through ``$TFDPMECH_DATA_DIR/mnist`` (``.ci/run`` points it at
``../shared/datasets``); without it the checks that need it skip and say why.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from tfdpmech import data, data_order

# MNIST's published md5s of the decompressed files, and its class counts (digits 0-9).
MD5 = {
    "train-images-idx3-ubyte.gz": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte.gz": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte.gz": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte.gz": "27ae3e4e09519cfbb04c329615203637",
}
TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
# md5 of the bundled fingerprint file (60,000 uint64, the IDX order of the training set)
FINGERPRINTS_MD5 = "e755485dec5d1e77ba1f4fb618acb33a"


def _shared_mnist() -> Path:
    root = os.environ.get(data.DATA_DIR_ENV)
    folder = Path(root) / "mnist" if root else None
    if folder is None or not all((folder / name).exists() for name in MD5):
        pytest.skip(f"the whole MNIST is not here: set ${data.DATA_DIR_ENV} to a folder with mnist/ holding the four "
                    "IDX .gz files (.ci/run points it at ../shared/datasets)")
    return folder


@pytest.fixture(scope="module")
def shared():
    folder = _shared_mnist()
    return folder, data.load("mnist")


def test_shared_copy_is_mnist(shared):
    folder, splits = shared
    for name, md5 in MD5.items():
        assert hashlib.md5(gzip.decompress((folder / name).read_bytes())).hexdigest() == md5, name
    assert splits.x_train.shape == (60000, 28, 28, 1) and splits.x_test.shape == (10000, 28, 28, 1)
    assert np.bincount(splits.y_train.argmax(1), minlength=10).tolist() == TRAIN_COUNTS
    assert np.bincount(splits.y_test.argmax(1), minlength=10).tolist() == TEST_COUNTS
    assert 0.0 <= splits.x_train.min() and splits.x_train.max() == 1.0
    assert "TFDPMECH_DATA_DIR" in splits.source and "LeCun" in splits.source


def test_bundled_fingerprints_are_the_idx_order(shared):
    folder, _ = shared
    bundled = data_order.mnist_train_fingerprints()
    assert hashlib.md5(data_order.MNIST_TRAIN_FINGERPRINTS.read_bytes()).hexdigest() == FINGERPRINTS_MD5
    images = data.read_idx(folder / "train-images-idx3-ubyte.gz")
    labels = data.read_idx(folder / "train-labels-idx1-ubyte.gz")
    np.testing.assert_array_equal(data_order.fingerprints(images, labels), bundled)
    assert len(np.unique(bundled)) == 60000  # one fingerprint per record: the order is unambiguous


def test_tfds_gives_the_same_arrays_in_the_same_order(shared, monkeypatch):
    """tensorflow_datasets stores the records shuffled; load('mnist') returns them in the IDX order."""
    folder, from_idx = shared
    rng = np.random.default_rng(0)
    pixels = {k: data.read_idx(folder / f"{k}.gz") for k in
              ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
    p_train, p_test = rng.permutation(60000), rng.permutation(10000)

    class FakeTfds:  # what tfds.load(..., batch_size=-1, as_supervised=True) returns, in tfds's own order
        @staticmethod
        def load(name, split, batch_size, as_supervised, download):
            assert name == "mnist" and split == ["train", "test"] and batch_size == -1 and as_supervised
            return ((pixels["train-images-idx3-ubyte"][p_train][..., None], pixels["train-labels-idx1-ubyte"][p_train]),
                    (pixels["t10k-images-idx3-ubyte"][p_test][..., None], pixels["t10k-labels-idx1-ubyte"][p_test]))

        @staticmethod
        def as_numpy(split):
            return split

    monkeypatch.delenv(data.DATA_DIR_ENV)
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", FakeTfds)
    from_tfds = data.load("mnist")
    assert "tensorflow_datasets" in from_tfds.source
    for part in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(from_tfds, part), getattr(from_idx, part), err_msg=part)


def test_reorder_refuses_other_records():
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (20, 28, 28), dtype=np.uint8)
    labels = np.arange(20) % 10
    reference = data_order.fingerprints(images, labels)
    perm = rng.permutation(20)
    x, y = data_order.reorder_like(images[perm], labels[perm], reference, what="toy")
    np.testing.assert_array_equal(x, images)
    np.testing.assert_array_equal(y, labels)
    changed = images.copy()
    changed[3, 0, 0] ^= 1  # one pixel of one record
    with pytest.raises(ValueError, match="toy: the records differ.*1 of 20"):
        data_order.reorder_like(changed, labels, reference, what="toy")
    with pytest.raises(ValueError, match="toy: 19 records"):
        data_order.reorder_like(images[:19], labels[:19], reference, what="toy")
    with pytest.raises(TypeError, match="uint8"):
        data_order.fingerprints(images.astype(np.float32), labels)


def test_validation_split_never_holds_a_test_image(shared):
    _, splits = shared
    validation = data.load("mnist_validation")
    assert validation.x_train.shape == (55000, 28, 28, 1) and validation.x_test.shape == (5000, 28, 28, 1)
    np.testing.assert_array_equal(validation.x_train, splits.x_train[:55000])
    np.testing.assert_array_equal(validation.x_test, splits.x_train[55000:])
    np.testing.assert_array_equal(validation.y_test, splits.y_train[55000:])
    assert "test set unused" in validation.source
