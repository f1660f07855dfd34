"""Tests for tfdpmech.data: bundled MNIST, loaders, IDX reader, public-bound scaling.

No test touches the network: tensorflow_datasets is blocked or replaced with monkeypatch.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest

from tfdpmech import data
from tfdpmech.validation import PrivacyLeakWarning

BUNDLED = Path(data.__file__).resolve().parent / "datasets"
MNIST_TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")

_IDX_CODES = {np.dtype("u1"): 0x08, np.dtype("i1"): 0x09, np.dtype("i2"): 0x0B, np.dtype("i4"): 0x0C,
              np.dtype("f4"): 0x0D, np.dtype("f8"): 0x0E}


def write_idx(path: Path, arr: np.ndarray, *, gz: bool = False) -> Path:
    arr = np.asarray(arr)
    header = bytes([0, 0, _IDX_CODES[arr.dtype], arr.ndim]) + np.asarray(arr.shape, dtype=">u4").tobytes()
    payload = header + arr.astype(arr.dtype.newbyteorder(">")).tobytes()
    path.write_bytes(gzip.compress(payload) if gz else payload)
    return path


def write_idx_set(folder: Path, *, n_train=30, n_test=20, gz=True, seed=0) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": np.arange(n_train, dtype=np.uint8) % 10,
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": np.arange(n_test, dtype=np.uint8) % 10,
    }
    for stem, arr in arrays.items():
        write_idx(folder / (stem + (".gz" if gz else "")), arr, gz=gz)
    return arrays


@pytest.fixture
def offline(monkeypatch):
    """No tensorflow_datasets, no $TFDPMECH_DATA_DIR: what a machine without internet sees."""
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)  # import raises ImportError
    monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)


@pytest.fixture(scope="module")
def sample():
    return data.load()


# --------------------------------------------------------------------------- bundled file


def test_bundled_images_md5():
    raw = gzip.decompress((BUNDLED / "t10k-images-idx3-ubyte.gz").read_bytes())
    assert hashlib.md5(raw).hexdigest() == "2646ac647ad5339dbf082846283269ea"


def test_bundled_labels_class_counts_and_shapes():
    labels = data.read_idx(BUNDLED / "t10k-labels-idx1-ubyte.gz")
    images = data.read_idx(BUNDLED / "t10k-images-idx3-ubyte.gz")
    assert labels.shape == (10000,) and labels.dtype == np.uint8
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    assert np.bincount(labels, minlength=10).tolist() == MNIST_TEST_COUNTS


def test_bundled_readme_keeps_credit():
    text = (BUNDLED / "README.md").read_text()
    assert "LeCun" in text and "Cortes" in text and "CC BY-SA 3.0" in text
    assert "LeCun" in data.__doc__ and "CC BY-SA 3.0" in data.__doc__


# --------------------------------------------------------------------------- mnist_sample


def test_sample_shapes_dtypes_range_one_hot(sample):
    s = sample
    assert s.name == "mnist_sample" and s.num_classes == 10
    assert s.x_train.shape == (8000, 28, 28, 1) and s.x_test.shape == (2000, 28, 28, 1)
    assert s.y_train.shape == (8000, 10) and s.y_test.shape == (2000, 10)
    assert s.input_shape == (28, 28, 1)
    for x in (s.x_train, s.x_test):
        assert x.dtype == np.float32 and x.min() >= 0.0 and x.max() <= 1.0
        assert x.max() == 1.0  # 255 maps to exactly 1: scaled with the public bound
    for y in (s.y_train, s.y_test):
        assert y.dtype == np.float32
        assert set(np.unique(y).tolist()) == {0.0, 1.0} and np.all(y.sum(axis=1) == 1)
    assert "LeCun" in s.source and "CC BY-SA 3.0" in s.source
    assert "(8000, 28, 28, 1)" in repr(s)


def test_sample_is_stratified_partition_of_bundled_set(sample):
    counts_test = sample.y_test.sum(axis=0)
    assert np.all(np.abs(counts_test - 0.2 * np.array(MNIST_TEST_COUNTS)) < 1)
    np.testing.assert_array_equal(sample.y_train.sum(axis=0) + counts_test, MNIST_TEST_COUNTS)

    def keys(x, y):
        pix = np.round(x.reshape(len(x), -1) * 255).astype(np.uint8)
        return sorted(hashlib.sha1(p.tobytes() + bytes([c])).hexdigest() for p, c in zip(pix, y.argmax(1)))

    images = data.read_idx(BUNDLED / "t10k-images-idx3-ubyte.gz").reshape(10000, -1)
    labels = data.read_idx(BUNDLED / "t10k-labels-idx1-ubyte.gz")
    full = sorted(hashlib.sha1(p.tobytes() + bytes([c])).hexdigest() for p, c in zip(images, labels))
    # train + test is exactly the bundled set, record for record: disjoint and complete.
    assert sorted(keys(sample.x_train, sample.y_train) + keys(sample.x_test, sample.y_test)) == full


def test_sample_split_deterministic(sample):
    again = data.load("mnist_sample", seed=0)
    np.testing.assert_array_equal(again.x_train, sample.x_train)
    np.testing.assert_array_equal(again.y_test, sample.y_test)
    other = data.load("mnist_sample", seed=1)
    assert not np.array_equal(other.x_test, sample.x_test)


def test_split_indices_disjoint_and_seeded():
    labels = data.read_idx(BUNDLED / "t10k-labels-idx1-ubyte.gz").astype(np.int64)
    tr, te = data._stratified_split(labels, 2000, np.random.default_rng(0))
    tr2, te2 = data._stratified_split(labels, 2000, np.random.default_rng(0))
    np.testing.assert_array_equal(tr, tr2)
    np.testing.assert_array_equal(te, te2)
    assert len(te) == 2000 and len(tr) == 8000
    assert np.intersect1d(tr, te).size == 0 and np.union1d(tr, te).size == 10000


def test_sample_test_size():
    s = data.load("mnist_sample", test_size=500)
    assert len(s.x_test) == 500 and len(s.x_train) == 9500
    with pytest.raises(ValueError, match="test_size"):
        data.load("mnist_sample", test_size=0)
    with pytest.raises(TypeError, match="test_size"):
        data.load("mnist_sample", test_size=0.2)
    with pytest.raises(TypeError, match="seed"):
        data.load("mnist_sample", seed="abc")
    with pytest.raises(ValueError, match="data_dir"):
        data.load("mnist_sample", data_dir="/tmp")


# --------------------------------------------------------------------------- load errors


def test_unknown_name_lists_known():
    with pytest.raises(ValueError) as info:
        data.load("imagenet")
    for known in data.KNOWN_DATASETS:
        assert known in str(info.value)


def test_test_size_refused_for_official_split():
    with pytest.raises(ValueError, match="official"):
        data.load("mnist", test_size=2000)


def test_mnist_offline_without_tfds_names_fix(offline):
    with pytest.raises(RuntimeError) as info:
        data.load("mnist")
    msg = str(info.value)
    assert "\n" not in msg
    assert "mnist_sample" in msg and "tensorflow-datasets" in msg and "not importable" in msg


def test_mnist_tfds_download_failure_names_fix(monkeypatch):
    monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)
    calls = []

    def failing(name, *, download):
        calls.append(download)
        raise ConnectionError("Failed to resolve 'storage.googleapis.com'")

    monkeypatch.setattr(data, "_tfds_load", failing)
    with pytest.raises(RuntimeError) as info:
        data.load("mnist")
    msg = str(info.value)
    assert calls == [False, True]  # local tfds cache first, download last
    assert "\n" not in msg and "ConnectionError" in msg and "mnist_sample" in msg


def test_tfds_arrays_are_converted(monkeypatch):
    monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)
    rng = np.random.default_rng(0)

    def fake(name, *, download):
        assert name == "cifar10" and download is False
        return (rng.integers(0, 256, (12, 32, 32, 3), dtype=np.uint8), np.arange(12) % 10,
                rng.integers(0, 256, (6, 32, 32, 3), dtype=np.uint8), np.arange(6) % 10)

    monkeypatch.setattr(data, "_tfds_load", fake)
    s = data.load("cifar10")
    assert s.x_train.shape == (12, 32, 32, 3) and s.y_test.shape == (6, 10)
    assert s.x_train.dtype == np.float32 and 0 <= s.x_train.min() and s.x_train.max() <= 1
    assert "tensorflow_datasets" in s.source and "Krizhevsky" in s.source


@pytest.mark.skipif(
    not (FASHION_DIR / "train-images-idx3-ubyte.gz").is_file(),
    reason="Debian package dataset-fashion-mnist not installed (apt-get install dataset-fashion-mnist)",
)
def test_fashion_mnist_from_debian_package(offline):
    s = data.load("fashion_mnist")
    assert s.x_train.shape == (60000, 28, 28, 1) and s.x_test.shape == (10000, 28, 28, 1)
    assert s.x_train.dtype == np.float32 and s.x_train.min() >= 0 and s.x_train.max() <= 1
    assert s.y_test.sum(axis=0).tolist() == [1000.0] * 10  # Fashion-MNIST test set, not MNIST
    assert str(FASHION_DIR) in s.source and "Zalando" in s.source


def test_fashion_mnist_offline_without_debian_names_fix(offline, monkeypatch, tmp_path):
    monkeypatch.setitem(data._SYSTEM_DIRS, "fashion_mnist", (tmp_path / "nothing",))
    with pytest.raises(RuntimeError) as info:
        data.load("fashion_mnist")
    msg = str(info.value)
    assert "\n" not in msg and "apt-get install dataset-fashion-mnist" in msg and "mnist_sample" in msg


# --------------------------------------------------------------------------- local files


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_from_data_dir(offline, tmp_path, gz):
    arrays = write_idx_set(tmp_path, gz=gz)
    s = data.load("mnist", data_dir=tmp_path)
    assert s.x_train.shape == (30, 28, 28, 1) and s.x_test.shape == (20, 28, 28, 1)
    np.testing.assert_allclose(s.x_test[..., 0] * 255, arrays["t10k-images-idx3-ubyte"], atol=1e-4)
    np.testing.assert_array_equal(s.y_train.argmax(1), arrays["train-labels-idx1-ubyte"])
    assert s.source.startswith("local files in <data_dir>; ") and str(tmp_path) not in s.source


def test_data_dir_without_files_is_an_error(offline, tmp_path):
    with pytest.raises(ValueError, match="data_dir"):
        data.load("mnist", data_dir=tmp_path)
    # Only the test half, as in shared/datasets/mnist: still an error, naming mnist_sample.
    write_idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((2, 28, 28), np.uint8))
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match="mnist_sample"):
        data.load("mnist", data_dir=tmp_path)


def test_env_var_uses_dataset_subfolder_only(offline, monkeypatch, tmp_path):
    write_idx_set(tmp_path)  # flat MNIST-named files: must not be taken for Fashion-MNIST
    monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path))
    monkeypatch.setitem(data._SYSTEM_DIRS, "fashion_mnist", ())
    with pytest.raises(RuntimeError, match="TFDPMECH_DATA_DIR"):
        data.load("fashion_mnist")
    write_idx_set(tmp_path / "fashion_mnist", n_train=10, n_test=10)
    s = data.load("fashion_mnist")
    assert len(s.x_train) == 10 and "TFDPMECH_DATA_DIR" in s.source


@pytest.mark.parametrize("sub", ["fashion_mnist", "fashion-mnist"])
def test_sources_name_folders_from_their_root_never_the_machine_s_directories(offline, monkeypatch, tmp_path, sub):
    """A committed report states ``$TFDPMECH_DATA_DIR/<name>``, not where that variable pointed on the machine."""
    root = tmp_path / "machine" / "datasets"
    write_idx_set(root / sub, n_train=10, n_test=10)
    monkeypatch.setenv(data.DATA_DIR_ENV, str(root))
    s = data.load("fashion_mnist")
    assert s.source.startswith(f"local files in $TFDPMECH_DATA_DIR/{sub}; Fashion-MNIST by Han Xiao")
    assert str(tmp_path) not in s.source
    monkeypatch.delenv(data.DATA_DIR_ENV)
    given = data.load("fashion_mnist", data_dir=root)  # data_dir= is stated as <data_dir>, its sub-folder kept
    assert given.source.startswith(f"local files in <data_dir>/{sub}; ") and str(tmp_path) not in given.source
    assert "(tfdpmech/datasets, 10000 images)" in data.load("mnist_sample").source  # the embedded set


def test_cifar10_binary_from_data_dir(offline, tmp_path):
    rng = np.random.default_rng(0)
    batches = {}
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        chw = rng.integers(0, 256, (2, 3, 32, 32), dtype=np.uint8)
        labels = rng.integers(0, 10, 2, dtype=np.uint8)
        (tmp_path / name).write_bytes(np.concatenate([labels[:, None], chw.reshape(2, -1)], axis=1).tobytes())
        batches[name] = (chw, labels)
    s = data.load("cifar10", data_dir=tmp_path)
    assert s.x_train.shape == (10, 32, 32, 3) and s.x_test.shape == (2, 32, 32, 3)
    chw, labels = batches["test_batch.bin"]
    np.testing.assert_allclose(s.x_test * 255, chw.transpose(0, 2, 3, 1), atol=1e-4)  # CHW -> HWC
    np.testing.assert_array_equal(s.y_test.argmax(1), labels)


# --------------------------------------------------------------------------- read_idx


@pytest.mark.parametrize("dtype", ["u1", "i1", "i2", "i4", "f4", "f8"])
def test_read_idx_round_trip(tmp_path, dtype):
    arr = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype)
    out = data.read_idx(write_idx(tmp_path / "a.idx", arr))
    np.testing.assert_array_equal(out, arr)
    assert out.dtype.isnative and out.dtype.kind == np.dtype(dtype).kind and out.flags.writeable


def test_read_idx_corrupt_files(tmp_path):
    good = write_idx(tmp_path / "good", np.arange(10, dtype=np.uint8))
    payload = good.read_bytes()
    cases = {
        "bad_magic": b"\x12\x34" + payload[2:],
        "bad_type": payload[:2] + b"\x07" + payload[3:],
        "short": payload[:3],
        "truncated_data": payload[:-1],
        "extra_data": payload + b"\x00",
        "truncated_header": payload[:6],
        "bad_gzip": gzip.compress(payload)[:-8],
    }
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=name) as info:
            data.read_idx(tmp_path / name)
        assert "corrupt" in str(info.value) or "not an IDX" in str(info.value)
    with pytest.raises(FileNotFoundError):
        data.read_idx(tmp_path / "missing")


# --------------------------------------------------------------------------- scaling


def test_scale_to_unit_public_bounds():
    x = np.array([0, 51, 255], dtype=np.uint8)
    out = data.scale_to_unit(x, 0, 255)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [0.0, 0.2, 1.0], rtol=1e-6)
    # per-feature bounds broadcast over records
    t = np.array([[1.0, 10.0], [3.0, 30.0]])
    np.testing.assert_allclose(data.scale_to_unit(t, [1.0, 0.0], [3.0, 30.0]), [[0, 1 / 3], [1, 1]], rtol=1e-6)
    # float64 values at the edge stay inside [0, 1]
    y = data.scale_to_unit(np.array([-1e-300, 0.1, 0.3]), -1e-300, 0.3)
    assert y.min() >= 0 and y.max() <= 1


def test_scale_to_unit_refuses_instead_of_clipping():
    with pytest.raises(ValueError, match=r"x has 1 value\(s\) outside") as info:
        data.scale_to_unit(np.array([0.0, 256.0]), 0, 255)
    assert "clipped" in str(info.value)
    with pytest.raises(ValueError, match="x has"):
        data.scale_to_unit(np.array([-1, 3]), 0, 255)
    with pytest.raises(ValueError, match="low must be < high"):
        data.scale_to_unit(np.array([1.0]), 5, 5)
    with pytest.raises(ValueError, match="x contains"):
        data.scale_to_unit(np.array([np.nan]), 0, 1)
    with pytest.raises(ValueError, match="high"):
        data.scale_to_unit(np.array([1.0]), 0, np.inf)
    with pytest.raises(ValueError, match="broadcast"):
        data.scale_to_unit(np.ones((4, 2)), [0, 0, 0], 1)
    with pytest.raises(TypeError, match="low"):
        data.scale_to_unit(np.ones(2), True, 2)


def test_scale_with_data_bounds_warns_privacy_leak():
    x = np.array([[2.0, 5.0], [4.0, 5.0], [3.0, 5.0]])
    with pytest.warns(PrivacyLeakWarning, match="public"):
        out, (lo, hi) = data.scale_with_data_bounds(x)
    assert (lo, hi) == (2.0, 5.0) and out.dtype == np.float32
    np.testing.assert_allclose(out[:, 0], [0, 2 / 3, 1 / 3], rtol=1e-6)
    with pytest.warns(PrivacyLeakWarning):
        out, (lo, hi) = data.scale_with_data_bounds(x, axis=0)
    np.testing.assert_allclose(lo, [[2.0, 5.0]])
    np.testing.assert_allclose(out, [[0, 0], [1, 0], [0.5, 0]])  # constant feature maps to 0


# --------------------------------------------------------------------------- DataSplits


def test_datasplits_frozen_and_validated(sample):
    with pytest.raises(dataclasses.FrozenInstanceError):
        sample.name = "other"
    good = dict(x_train=np.zeros((2, 2, 2, 1), np.float32), y_train=np.eye(2, dtype=np.float32),
                x_test=np.zeros((1, 2, 2, 1), np.float32), y_test=np.eye(2, dtype=np.float32)[:1],
                num_classes=2, name="t", source="test")
    data.DataSplits(**good)
    with pytest.raises(ValueError, match="x_train"):
        data.DataSplits(**{**good, "x_train": np.zeros((2, 2, 2, 1))})  # float64
    with pytest.raises(ValueError, match="y_test"):
        data.DataSplits(**{**good, "y_test": np.array([[0.5, 0.5]], np.float32)})
    with pytest.raises(ValueError, match="records"):
        data.DataSplits(**{**good, "x_test": np.zeros((3, 2, 2, 1), np.float32)})
