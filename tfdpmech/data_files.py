"""Dataset files on disk: IDX (the MNIST format) and the CIFAR-10 binary version, gzip or raw.

:func:`read_idx` reads one IDX file; :func:`read_idx_folder` and :func:`read_cifar_folder` read
a dataset's four arrays (train images and labels, test images and labels) from the standard
file names in a folder, or return None when a file is missing. The loaders of
:mod:`tfdpmech.data` call them.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

__all__ = ["read_idx", "read_idx_folder", "read_cifar_folder", "read_dataset_folder"]


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


def _find(folder: Path, stem: str):
    for candidate in (folder / f"{stem}.gz", folder / stem):
        if candidate.is_file():
            return candidate
    return None


def read_idx_folder(folder: Path):
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


def read_cifar_folder(folder: Path):
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


def read_dataset_folder(name: str, folder: Path):
    """The 4 arrays of dataset ``name`` from ``folder`` (CIFAR-10 binary or IDX files), or None if a file is missing."""
    return read_cifar_folder(folder) if name == "cifar10" else read_idx_folder(folder)
