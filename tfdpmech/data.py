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

Scaling: :func:`scale_to_unit` maps data into [0, 1] with *public* domain
bounds and refuses values outside them. :func:`scale_with_data_bounds` uses the
data's own min/max, which leaks information about the private records, and
therefore warns :class:`~tfdpmech.validation.PrivacyLeakWarning` (as
diffprivlib does).

This module does not import TensorFlow; ``tensorflow_datasets`` is imported
only when a tfds-backed dataset is requested.
"""

from __future__ import annotations

import dataclasses
import gzip
import numbers
import os
import warnings
from pathlib import Path

import numpy as np

from .noise import make_rng
from .validation import PrivacyLeakWarning, check_array, check_choice, check_labels, check_one_hot

__all__ = [
    "KNOWN_DATASETS",
    "DATA_DIR_ENV",
    "DataSplits",
    "load",
    "read_idx",
    "scale_to_unit",
    "scale_with_data_bounds",
]

KNOWN_DATASETS = ("mnist_sample", "mnist", "fashion_mnist", "cifar10")

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
        source: where the data came from, with the dataset's credit.

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


# --------------------------------------------------------------------------- IDX files

_IDX_DTYPES = {
    0x08: np.dtype("u1"),
    0x09: np.dtype("i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def _read_bytes(path: Path) -> bytes:
    """Read a file, decompressing it when it starts with the gzip magic bytes."""
    with open(path, "rb") as fh:
        raw = fh.read()
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, ValueError) as exc:
            raise ValueError(f"{path}: corrupt or truncated gzip file ({exc}); download it again") from exc
    return raw


def read_idx(path) -> np.ndarray:
    """Read an IDX file (the MNIST format), gzip-compressed or raw.

    The header is two zero bytes, a type code (0x08 ubyte, 0x09 byte, 0x0B
    short, 0x0C int, 0x0D float, 0x0E double), the number of dimensions, then
    one big-endian uint32 per dimension; the data follow in big-endian order.

    Args:
        path: path to the file; gzip is detected from its content, not its name.

    Returns:
        A writable ndarray in native byte order with the shape given by the header.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: bad magic number, unknown type code, truncated or oversized data,
            or a corrupt gzip stream. The message names the file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"IDX file not found: {path}")
    buf = _read_bytes(path)
    if len(buf) < 4:
        raise ValueError(f"{path}: too short for an IDX header ({len(buf)} bytes); the file is corrupt")
    zero, code, ndim = buf[:2], buf[2], buf[3]
    if zero != b"\x00\x00" or code not in _IDX_DTYPES or ndim == 0:
        raise ValueError(
            f"{path}: bad IDX magic number 0x{buf[:4].hex()} (expected 0x0000 then a type code in "
            f"{sorted(hex(c) for c in _IDX_DTYPES)} and a dimension count >= 1); not an IDX file or corrupt"
        )
    header = 4 + 4 * ndim
    if len(buf) < header:
        raise ValueError(f"{path}: truncated IDX header ({len(buf)} bytes, need {header}); the file is corrupt")
    shape = tuple(int(d) for d in np.frombuffer(buf, dtype=">u4", count=ndim, offset=4))
    dtype = _IDX_DTYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    got = len(buf) - header
    if got != expected:
        raise ValueError(
            f"{path}: IDX header announces shape {shape} ({expected} data bytes) but the file holds {got}; "
            "the file is truncated or corrupt"
        )
    arr = np.frombuffer(buf, dtype=dtype, offset=header).reshape(shape)
    return arr.astype(dtype.newbyteorder("="))  # a native-order, writable copy


# --------------------------------------------------------------------------- scaling


def _check_bound(value, name: str) -> np.ndarray:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a real number or array of them, got {value!r}")
    arr = check_array(value, name, ndim_min=0)
    return arr.astype(np.float64)


def scale_to_unit(x, low, high) -> np.ndarray:
    """Map ``x`` from the public domain ``[low, high]`` to [0, 1].

    ``low`` and ``high`` must be known without looking at the private data
    (for 8-bit pixels: 0 and 255). They may be scalars or arrays broadcastable
    to ``x`` (per-feature bounds). Values outside the bounds are refused, never
    clipped: clipping would hide a wrong bound.

    Args:
        x: numeric array.
        low: public lower bound(s).
        high: public upper bound(s), greater than ``low``.

    Returns:
        float32 array of ``x``'s shape with values in [0, 1].

    Raises:
        TypeError: ``x`` or a bound is not numeric.
        ValueError: NaN/inf in ``x`` or the bounds, ``low >= high``, bounds that do
            not broadcast to ``x``, or values of ``x`` outside ``[low, high]``.
    """
    arr = check_array(x, "x", ndim_min=0)
    lo = _check_bound(low, "low")
    hi = _check_bound(high, "high")
    for bname, b in (("low", lo), ("high", hi)):
        try:
            ok = np.broadcast_shapes(b.shape, arr.shape) == arr.shape
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{bname} has shape {b.shape}, which does not broadcast to x's shape {arr.shape}")
    if np.any(lo >= hi):
        raise ValueError(
            f"low must be < high, got low={_short(lo)}, high={_short(hi)}; pass the public domain bounds, "
            "e.g. low=0, high=255 for 8-bit pixels"
        )
    below = arr < lo
    above = arr > hi
    if np.any(below) or np.any(above):
        raise ValueError(
            f"x has {int(np.count_nonzero(below | above))} value(s) outside the public bounds "
            f"[low={_short(lo)}, high={_short(hi)}] (x spans [{float(arr.min()):g}, {float(arr.max()):g}]); "
            "fix the bounds (they must be known without looking at the data) or clean the data first; "
            "values are never clipped silently"
        )
    # float32 arithmetic for 8/16-bit data (large image sets), float64 otherwise. Rounding is
    # monotone, so x in [low, high] still maps into [0, 1] exactly.
    work = np.result_type(arr.dtype, np.float32)
    out = (arr.astype(work) - lo.astype(work)) / (hi.astype(work) - lo.astype(work))
    return np.asarray(out, dtype=np.float32)


def scale_with_data_bounds(x, *, axis=None):
    """Map ``x`` to [0, 1] with bounds taken from ``x`` itself; warns PrivacyLeakWarning.

    The minimum and maximum of the private data are themselves private: a
    mechanism whose sensitivity assumes public bounds is no longer differentially
    private when the bounds come from the data. Prefer :func:`scale_to_unit`
    with public bounds. A constant feature (min == max) maps to 0.

    Args:
        x: numeric array.
        axis: None for one global min/max, or an axis (e.g. 0 for per-feature bounds
            of an (n, d) table).

    Returns:
        ``(scaled, (low, high))``: the float32 scaled array and the bounds used
        (floats, or arrays with ``axis`` kept as size 1).

    Raises:
        TypeError: ``x`` is not numeric.
        ValueError: ``x`` is empty or holds NaN/inf.

    Warns:
        PrivacyLeakWarning: always.
    """
    arr = check_array(x, "x", ndim_min=0)
    warnings.warn(
        "scale_with_data_bounds takes the bounds from the private data itself, which leaks information "
        "and voids the privacy guarantee of mechanisms that assume public bounds; pass public domain "
        "bounds to tfdpmech.data.scale_to_unit instead (e.g. low=0, high=255 for pixels)",
        PrivacyLeakWarning,
        stacklevel=2,
    )
    work = np.result_type(arr.dtype, np.float32)
    a = arr.astype(work)
    lo = a.min(axis=axis, keepdims=axis is not None)
    hi = a.max(axis=axis, keepdims=axis is not None)
    span = hi - lo
    safe = np.where(span > 0, span, 1)
    out = np.asarray((a - lo) / safe, dtype=np.float32)
    if axis is None:
        return out, (float(lo), float(hi))
    return out, (lo.astype(np.float64), hi.astype(np.float64))


def _short(a: np.ndarray) -> str:
    if a.ndim == 0 or a.size == 1:
        return f"{float(a.reshape(-1)[0]):g}"
    return f"array{a.shape}[{float(a.min()):g}..{float(a.max()):g}]"


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


def _find(folder: Path, stem: str):
    for candidate in (folder / f"{stem}.gz", folder / stem):
        if candidate.is_file():
            return candidate
    return None


def _read_idx_dir(folder: Path):
    """Return the 4 arrays from standard-named IDX files in ``folder``, or None if any is missing."""
    stems = [f"{split}-{kind}" for split in ("train", "t10k") for kind in ("images-idx3-ubyte", "labels-idx1-ubyte")]
    paths = [_find(folder, s) for s in stems]
    if any(p is None for p in paths):
        return None
    x_train, y_train, x_test, y_test = (read_idx(p) for p in paths)
    for split, x, y in (("train", x_train, y_train), ("t10k", x_test, y_test)):
        if x.ndim != 3 or len(x) != len(y):
            raise ValueError(
                f"{folder}: {split} images have shape {x.shape} but labels {y.shape}; expected (n, H, W) and (n,)"
            )
    return x_train, y_train, x_test, y_test


def _read_cifar_dir(folder: Path):
    """Return the 4 arrays from the CIFAR-10 binary version in ``folder``, or None if a file is missing."""
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
    paths = [folder / n for n in names]
    if not all(p.is_file() for p in paths):
        return None
    record = 1 + 3 * 32 * 32  # label byte + CHW pixels

    def read(group):
        parts = []
        for p in group:
            raw = np.frombuffer(_read_bytes(p), dtype=np.uint8)
            if raw.size == 0 or raw.size % record:
                raise ValueError(f"{p}: {raw.size} bytes is not a whole number of CIFAR-10 records; corrupt file")
            parts.append(raw.reshape(-1, record))
        rows = np.concatenate(parts)
        return rows[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), rows[:, 0]

    x_train, y_train = read(paths[:5])
    x_test, y_test = read(paths[5:])
    return x_train, y_train, x_test, y_test


def _read_local(name: str, folder: Path):
    return _read_cifar_dir(folder) if name == "cifar10" else _read_idx_dir(folder)


def _candidates(name: str, root: Path, *, flat: bool):
    dirs = [root / sub for sub in _SUBDIRS[name]]
    return dirs + [root] if flat else dirs


def _tfds_load(name: str, *, download: bool):
    """Load the official splits through tensorflow_datasets as numpy arrays (raises on any failure)."""
    import tensorflow_datasets as tfds  # optional dependency

    train, test = tfds.load(name, split=["train", "test"], batch_size=-1, as_supervised=True, download=download)
    (x_train, y_train), (x_test, y_test) = tfds.as_numpy(train), tfds.as_numpy(test)
    return x_train, y_train, x_test, y_test


def _short_reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:150]}"


def _load_named(name: str, data_dir) -> DataSplits:
    credit = _CREDITS[name]
    if data_dir is not None:
        root = Path(data_dir)
        for folder in _candidates(name, root, flat=True):
            arrays = _read_local(name, folder)
            if arrays is not None:
                return _to_splits(*arrays, name=name, source=f"local files in {folder}; {credit}")
        raise ValueError(
            f"data_dir={str(root)!r} holds no complete {name} files (looked in {root} and its "
            f"{'/'.join(_SUBDIRS[name])} sub-folder); fix: {_FIXES[name]}"
        )

    tried = []
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        # Only the per-dataset sub-folder: a flat folder of MNIST files must never load as Fashion-MNIST.
        for folder in _candidates(name, Path(env), flat=False):
            arrays = _read_local(name, folder)
            if arrays is not None:
                return _to_splits(*arrays, name=name, source=f"local files in {folder} (${DATA_DIR_ENV}); {credit}")
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
        arrays = _read_local(name, folder)
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
    return _load_named(name, data_dir)
