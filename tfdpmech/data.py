"""Dataset loading and public-bound scaling.

Every loader returns a :class:`DataSplits`: images as float32 NHWC in [0, 1]
(pixels divided by the public bound 255, never by the data's own maximum) and
one-hot float32 labels.

Datasets (``KNOWN_DATASETS``):

``mnist_sample`` (default, offline)
    The real MNIST test set (10,000 handwritten digits, 28x28) bundled in
    ``tfdpmech/datasets/``, split deterministically into 8,000 train and 2,000
    test images (stratified by class). MNIST is by Yann LeCun and Corinna
    Cortes (http://yann.lecun.com/exdb/mnist/) and is distributed under the
    Creative Commons Attribution-Share Alike 3.0 license (CC BY-SA 3.0).
``mnist_validation``, ``fashion_mnist_validation``
    The training set only: the first 55,000 images train, the last 5,000 are the held-out
    set on which hyper-parameters are chosen (the official test set is not read).
``mnist``, ``fashion_mnist``, ``cifar10``
    The official train/test splits. Sources tried in order: IDX (or CIFAR-10
    binary) files in ``data_dir=``; ``$TFDPMECH_DATA_DIR/<name>/``;
    ``tensorflow_datasets`` data already on disk; system copies (Fashion-MNIST
    from the Debian package ``dataset-fashion-mnist`` in
    ``/usr/share/datasets/fashion-mnist``); ``tensorflow_datasets`` download
    (needs internet). When none works a ``RuntimeError`` names the fix.
    Fashion-MNIST is by Han Xiao, Kashif Rasul and Roland Vollgraf (Zalando
    Research, MIT license); CIFAR-10 is by Alex Krizhevsky, Vinod Nair and
    Geoffrey Hinton.

Files: :func:`read_idx` and the folder readers are in :mod:`tfdpmech.data_files`.

Scaling (:mod:`tfdpmech.data_scaling`, importable from here): :func:`scale_to_unit`
maps data into [0, 1] with *public* domain bounds and refuses values outside them.
:func:`scale_with_data_bounds` uses the data's own min/max, which leaks information about the private records, and
therefore warns :class:`~tfdpmech.privacy_warnings.PrivacyLeakWarning` (as
diffprivlib does).

This module does not import TensorFlow; ``tensorflow_datasets`` is imported
only when a tfds-backed dataset is requested.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from pathlib import Path

import numpy as np

from .data_files import read_dataset_folder, read_idx
from .data_order import fingerprints, mnist_train_fingerprints, reorder_like
from .data_scaling import scale_to_unit, scale_with_data_bounds
from .noise import make_rng
from .validation import check_choice, check_labels, check_one_hot

__all__ = [
    "KNOWN_DATASETS",
    "DATA_DIR_ENV",
    "DataSplits",
    "load",
    "read_idx",
    "scale_to_unit",
    "scale_with_data_bounds",
]

KNOWN_DATASETS = ("mnist_sample", "mnist", "mnist_validation", "fashion_mnist", "fashion_mnist_validation", "cifar10")

VALIDATION_SIZE = 5000  # mnist_validation: the last 5,000 training images (IDX order) are its test set

DATA_DIR_ENV = "TFDPMECH_DATA_DIR"

PIXEL_LOW, PIXEL_HIGH = 0, 255  # public bounds of 8-bit pixels

_BUNDLED_DIR = Path(__file__).resolve().parent / "datasets"

_CREDITS = {
    "mnist": "MNIST by Yann LeCun and Corinna Cortes, CC BY-SA 3.0 (http://yann.lecun.com/exdb/mnist/)",
    "fashion_mnist": (
        "Fashion-MNIST by Han Xiao, Kashif Rasul and Roland Vollgraf, Zalando Research, MIT license "
        "(https://github.com/zalandoresearch/fashion-mnist)"
    ),
    "cifar10": (
        "CIFAR-10 by Alex Krizhevsky, Vinod Nair and Geoffrey Hinton "
        "(https://www.cs.toronto.edu/~kriz/cifar.html)"
    ),
}

# Sub-folder names accepted under a data directory, per dataset.
_SUBDIRS = {
    "mnist": ("mnist",),
    "fashion_mnist": ("fashion_mnist", "fashion-mnist"),
    "cifar10": ("cifar10", "cifar-10-batches-bin"),
}

# Read-only system copies (Debian packages); monkeypatched in tests.
_SYSTEM_DIRS = {
    "mnist": (),
    "fashion_mnist": (Path("/usr/share/datasets/fashion-mnist"),),
    "cifar10": (),
}

_FIXES = {
    "mnist": (
        "load('mnist_sample') works offline (the bundled MNIST test set); or put train-/t10k- IDX files in "
        f"data_dir= or ${DATA_DIR_ENV}/mnist/; or pip install tensorflow-datasets with internet"
    ),
    "fashion_mnist": (
        "apt-get install dataset-fashion-mnist (IDX files in /usr/share/datasets/fashion-mnist); or put "
        f"train-/t10k- IDX files in data_dir= or ${DATA_DIR_ENV}/fashion_mnist/; or pip install "
        "tensorflow-datasets with internet; load('mnist_sample') works offline"
    ),
    "cifar10": (
        "put the CIFAR-10 binary version (data_batch_1.bin..data_batch_5.bin, test_batch.bin) in data_dir= or "
        f"${DATA_DIR_ENV}/cifar10/; or pip install tensorflow-datasets with internet; "
        "load('mnist_sample') works offline"
    ),
}


@dataclasses.dataclass(frozen=True, eq=False)
class DataSplits:
    """A train/test split ready for ``model.fit``.

    Attributes:
        x_train: float32 array (n_train, H, W, C) with values in [0, 1].
        y_train: one-hot float32 array (n_train, num_classes).
        x_test: float32 array (n_test, H, W, C) with values in [0, 1].
        y_test: one-hot float32 array (n_test, num_classes).
        num_classes: number of classes.
        name: dataset name, one of ``KNOWN_DATASETS``.
        source: where the data came from, with the dataset's credit; a folder is named from its root
            (``$TFDPMECH_DATA_DIR/mnist``, ``<data_dir>/mnist``, ``tfdpmech/datasets``), never by
            the machine's own directories, so a committed report reads the same wherever it ran.

    Raises:
        ValueError: on construction, if the arrays do not match the description above.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    name: str
    source: str

    def __post_init__(self):
        for part in ("train", "test"):
            x = getattr(self, f"x_{part}")
            y = getattr(self, f"y_{part}")
            if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim != 4:
                raise ValueError(
                    f"x_{part} must be a float32 NHWC array, got {type(x).__name__} "
                    f"{getattr(x, 'dtype', '')} {getattr(x, 'shape', '')}"
                )
            check_one_hot(y, f"y_{part}", num_classes=self.num_classes)
            if len(x) != len(y):
                raise ValueError(f"x_{part} has {len(x)} records but y_{part} has {len(y)}")
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            raise ValueError(
                f"x_train records {self.x_train.shape[1:]} and x_test records {self.x_test.shape[1:]} differ"
            )

    @property
    def input_shape(self) -> tuple:
        """Shape of one record, e.g. ``(28, 28, 1)``."""
        return tuple(self.x_train.shape[1:])

    def __repr__(self) -> str:
        return (
            f"DataSplits(name={self.name!r}, x_train={self.x_train.shape}, x_test={self.x_test.shape}, "
            f"num_classes={self.num_classes}, source={self.source!r})"
        )


# --------------------------------------------------------------------------- loaders


def _to_splits(x_train, y_train, x_test, y_test, *, name, source, num_classes=10) -> DataSplits:
    """Scale uint8 images with the public pixel bounds, add a channel axis, one-hot the labels."""

    def images(x):
        x = scale_to_unit(x, PIXEL_LOW, PIXEL_HIGH)
        return x[..., None] if x.ndim == 3 else x

    def labels(y, which):
        y = np.asarray(y).reshape(-1)
        return check_labels(y, which, num_classes=num_classes)

    return DataSplits(
        x_train=images(x_train),
        y_train=labels(y_train, "y_train"),
        x_test=images(x_test),
        y_test=labels(y_test, "y_test"),
        num_classes=num_classes,
        name=name,
        source=source,
    )


def _stratified_split(labels: np.ndarray, test_size: int, rng: np.random.Generator):
    """Indices (train, test), shuffled; each class gets its share of the test set (largest remainder)."""
    n = len(labels)
    classes, counts = np.unique(labels, return_counts=True)
    quota = counts * (test_size / n)
    take = np.floor(quota).astype(int)
    rest = test_size - int(take.sum())
    # Ties broken by class id so the split depends on the seed only.
    order = np.lexsort((classes, -(quota - take)))
    take[order[:rest]] += 1
    perm = rng.permutation(n)
    is_test = np.zeros(n, dtype=bool)
    for c, k in zip(classes, take):
        members = perm[labels[perm] == c]
        is_test[members[:k]] = True
    return perm[~is_test[perm]], perm[is_test[perm]]


def _load_mnist_sample(seed, test_size) -> DataSplits:
    images = read_idx(_BUNDLED_DIR / "t10k-images-idx3-ubyte.gz")
    labels = read_idx(_BUNDLED_DIR / "t10k-labels-idx1-ubyte.gz").astype(np.int64)
    n = len(labels)
    if test_size is None:
        test_size = 2000
    if isinstance(test_size, (bool, np.bool_)) or not isinstance(test_size, numbers.Integral):
        raise TypeError(f"test_size must be an integer number of records, got {test_size!r}")
    if not 1 <= test_size <= n - 1:
        raise ValueError(f"test_size must lie in [1, {n - 1}] for mnist_sample ({n} images), got {test_size}")
    train_idx, test_idx = _stratified_split(labels, int(test_size), make_rng(seed))
    source = (
        f"bundled MNIST test set (tfdpmech/datasets, {n} images) split {n - test_size}/{test_size} "
        f"stratified with seed={seed!r}; " + _CREDITS["mnist"]
    )
    return _to_splits(
        images[train_idx], labels[train_idx], images[test_idx], labels[test_idx], name="mnist_sample", source=source
    )


def _shown(folder: Path, root: Path, label: str) -> str:
    """``folder`` as the source of a :class:`DataSplits` states it: ``label`` in place of ``root``
    (``$TFDPMECH_DATA_DIR/mnist``), so that a report never carries the machine's own directories."""
    relative = folder.relative_to(root).as_posix()
    return label if relative == "." else f"{label}/{relative}"


def _candidates(name: str, root: Path, *, flat: bool):
    dirs = [root / sub for sub in _SUBDIRS[name]]
    return dirs + [root] if flat else dirs


def _tfds_load(name: str, *, download: bool):
    """Load the official splits through tensorflow_datasets as numpy arrays (raises on any failure).

    MNIST comes back in the IDX files' record order (:mod:`tfdpmech.data_order`), so that a split
    of it means the same records whichever source was read.
    """
    import tensorflow_datasets as tfds  # optional dependency

    train, test = tfds.load(name, split=["train", "test"], batch_size=-1, as_supervised=True, download=download)
    (x_train, y_train), (x_test, y_test) = tfds.as_numpy(train), tfds.as_numpy(test)
    if name == "mnist":
        return _mnist_in_idx_order(x_train, y_train, x_test, y_test)
    return x_train, y_train, x_test, y_test


def _mnist_in_idx_order(x_train, y_train, x_test, y_test):
    """MNIST arrays from any source, permuted into the order of the published IDX files."""
    def pixels(x):
        return np.asarray(x).reshape(len(x), 28, 28)

    test_order = fingerprints(read_idx(_BUNDLED_DIR / "t10k-images-idx3-ubyte.gz"),
                              read_idx(_BUNDLED_DIR / "t10k-labels-idx1-ubyte.gz"))
    x_train, y_train = reorder_like(pixels(x_train), y_train, mnist_train_fingerprints(), what="MNIST train split")
    x_test, y_test = reorder_like(pixels(x_test), y_test, test_order, what="MNIST test split")
    return x_train, y_train, x_test, y_test


def _short_reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:150]}"


def _load_named(name: str, data_dir) -> DataSplits:
    credit = _CREDITS[name]
    if data_dir is not None:
        root = Path(data_dir)
        for folder in _candidates(name, root, flat=True):
            arrays = read_dataset_folder(name, folder)
            if arrays is not None:
                return _to_splits(*arrays, name=name, source=f"local files in {_shown(folder, root, '<data_dir>')}; "
                                                             f"{credit}")
        raise ValueError(
            f"data_dir={str(root)!r} holds no complete {name} files (looked in {root} and its "
            f"{'/'.join(_SUBDIRS[name])} sub-folder); fix: {_FIXES[name]}"
        )

    tried = []
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        # Only the per-dataset sub-folder: a flat folder of MNIST files must never load as Fashion-MNIST.
        for folder in _candidates(name, Path(env), flat=False):
            arrays = read_dataset_folder(name, folder)
            if arrays is not None:
                return _to_splits(*arrays, name=name,
                                  source=f"local files in {_shown(folder, Path(env), '$' + DATA_DIR_ENV)}; {credit}")
        tried.append(f"no files in ${DATA_DIR_ENV}/{_SUBDIRS[name][0]}")

    try:  # data tfds already has on disk: no network
        arrays = _tfds_load(name, download=False)
        return _to_splits(*arrays, name=name, source=f"tensorflow_datasets '{name}' (local cache); {credit}")
    except ImportError as exc:
        tfds_missing = True
        tried.append(f"tensorflow_datasets not importable ({_short_reason(exc)})")
    except Exception:  # not prepared yet, or any tfds failure: try the other sources
        tfds_missing = False

    for folder in _SYSTEM_DIRS[name]:
        arrays = read_dataset_folder(name, folder)
        if arrays is not None:
            return _to_splits(*arrays, name=name, source=f"system copy in {folder}; {credit}")
    if _SYSTEM_DIRS[name]:
        tried.append("no system copy in " + ", ".join(str(p) for p in _SYSTEM_DIRS[name]))

    if not tfds_missing:
        try:
            arrays = _tfds_load(name, download=True)
            return _to_splits(*arrays, name=name, source=f"tensorflow_datasets '{name}' (downloaded); {credit}")
        except Exception as exc:
            tried.append(f"tensorflow_datasets failed ({_short_reason(exc)})")

    raise RuntimeError(f"cannot load {name!r} here: {'; '.join(tried)}. Fix: {_FIXES[name]}")


def load(name: str = "mnist_sample", *, seed=0, test_size: int | None = None, data_dir=None) -> DataSplits:
    """Load a dataset as float32 NHWC images in [0, 1] and one-hot labels.

    Pixels are divided by the public bound 255 (:func:`scale_to_unit`), never by
    a bound read from the data.

    Args:
        name: one of ``KNOWN_DATASETS``. ``"mnist_sample"`` (default) is the bundled
            MNIST test set and works offline; the others use their official
            train/test splits (sources and their order: see the module docstring).
        seed: for ``mnist_sample``, the seed of the stratified train/test split (an
            int, a numpy Generator, or None for OS entropy); the same seed gives the
            same split. Unused by the official splits.
        test_size: for ``mnist_sample``, the number of test images (default 2000 of
            10000). Must be None for the other datasets, whose split is fixed.
        data_dir: a folder holding the dataset's files (IDX with the standard names
            ``train-images-idx3-ubyte[.gz]``, ``train-labels-idx1-ubyte[.gz]``,
            ``t10k-images-idx3-ubyte[.gz]``, ``t10k-labels-idx1-ubyte[.gz]``; for
            CIFAR-10 the binary version ``data_batch_{1..5}.bin``, ``test_batch.bin``),
            directly or in a sub-folder named after the dataset. When given, only
            this folder is used. Without it, ``$TFDPMECH_DATA_DIR/<name>/`` is tried.

    Returns:
        A :class:`DataSplits`.

    Raises:
        ValueError: unknown ``name`` (the message lists ``KNOWN_DATASETS``), a bad
            ``test_size``, ``data_dir`` without the files, or a corrupt file.
        TypeError: ``seed`` or ``test_size`` of the wrong type.
        RuntimeError: no source can provide ``name``; the message says what was
            tried and how to fix it.
    """
    check_choice(name, "name", KNOWN_DATASETS)
    if name == "mnist_sample":
        if data_dir is not None:
            raise ValueError("data_dir does not apply to 'mnist_sample' (it is bundled); pass data_dir=None")
        return _load_mnist_sample(seed, test_size)
    if test_size is not None:
        raise ValueError(
            f"test_size applies to 'mnist_sample' only; {name!r} uses its official train/test split, "
            "pass test_size=None"
        )
    if name.endswith("_validation"):
        return _validation_split(_load_named(name[:-len("_validation")], data_dir), name)
    return _load_named(name, data_dir)


def _validation_split(splits: DataSplits, name: str) -> DataSplits:
    """A training set split for choosing hyper-parameters: the first 55,000 images train, the last 5,000 are
    scored. The official test set is never read by a choice made on this split."""
    k = len(splits.x_train) - VALIDATION_SIZE
    return DataSplits(splits.x_train[:k], splits.y_train[:k], splits.x_train[k:], splits.y_train[k:],
                      splits.num_classes, name,
                      f"the first {k} / last {VALIDATION_SIZE} training images of {splits.name} (test set unused); "
                      + splits.source)
