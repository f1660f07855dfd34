"""The functional head on a tf.data stream: the same release as on arrays, checks per record, one pass."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.mechanisms.functional_head import FunctionalHead
from tfdpmech.mechanisms.pcdbn import FunctionalSoftmaxHead

from .test_functional import tiny_extractor


def _data(n=1000, d=5, c=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 1, (n, d)), rng.integers(c, size=n)


def _relative(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def _head(mechanism, features=None, c=3, **kwargs):
    extra = dict(delta=1e-5) if mechanism == "gaussian" else {}
    return FunctionalHead(features, c, mechanism=mechanism, epsilon=1.0, seed=4, **extra, **kwargs)


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
@pytest.mark.parametrize("batch", [1, 77, 5000])
def test_a_dataset_releases_the_statistics_of_the_same_arrays(mechanism, batch):
    x, y = _data()
    on_arrays = _head(mechanism)
    on_arrays.fit(x, y)
    streamed = _head(mechanism)
    streamed.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(batch))
    for key in ("s1_bar", "s2_bar"):
        assert _relative(streamed.statistics()[key], on_arrays.statistics()[key]) <= 1e-9
    assert streamed.release.details["n"] == on_arrays.release.details["n"] == 1000
    assert streamed.release.noise_scale == on_arrays.release.noise_scale
    assert streamed.ridge == on_arrays.ridge
    assert [r.component for r in streamed.ledger.releases] == ["functional_head"]


def test_a_dataset_through_an_extractor_matches_the_arrays():
    rng = np.random.default_rng(1)
    x, y = rng.uniform(0, 1, (600, 6)), rng.integers(3, size=600)
    on_arrays = _head("gaussian", tiny_extractor())
    on_arrays.fit(x, y)
    streamed = _head("gaussian", tiny_extractor())
    streamed.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(64))
    for key in ("s1_bar", "s2_bar"):  # float32 forward passes of different batch sizes, then float64 sums
        assert _relative(streamed.statistics()[key], on_arrays.statistics()[key]) <= 1e-6
    assert [r.component for r in streamed.ledger.releases] == ["features:tiny", "functional_head"]


def test_an_unknown_cardinality_is_counted_in_the_pass():
    x, y = _data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: b >= 0).batch(100)
    assert int(ds.cardinality()) == int(tf.data.UNKNOWN_CARDINALITY)
    head = _head("gaussian")
    head.fit(ds)
    assert head.release.details["n"] == 1000


def test_an_infinite_dataset_is_refused_before_anything_is_read():
    x, y = _data()
    reads = []

    def note(a):
        reads.append(1)
        return a

    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(100).repeat()
    ds = ds.map(lambda a, b: (tf.numpy_function(note, [a], a.dtype), b))
    head = _head("gaussian")
    with pytest.raises(ValueError, match="infinite cardinality.*n"):
        head.fit(ds)
    assert reads == [] and not head.released and not head.ledger.releases


def test_an_endless_repeat_below_a_filter_is_refused_before_anything_is_read():
    x, y = _data()
    reads = []

    def note(a):
        reads.append(1)
        return a

    ds = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (tf.numpy_function(note, [a], a.dtype), b))
    ds = ds.repeat().filter(lambda a, b: b >= 0).batch(100)
    assert int(ds.cardinality()) == int(tf.data.UNKNOWN_CARDINALITY)
    head = _head("gaussian")
    with pytest.raises(ValueError, match=r"infinite cardinality \(a .repeat\(\) without a count"):
        head.fit(ds)
    assert reads == [] and not head.released and not head.ledger.releases
    finite = tf.data.Dataset.from_tensor_slices((x, y)).repeat(2).filter(lambda a, b: b >= 0).batch(100)
    head = _head("gaussian")
    head.fit(finite)
    assert head.release.details["n"] == 2000  # a counted repeat is finite


def test_an_endless_generator_stops_at_the_stated_cap_with_nothing_released():
    def forever():
        rng = np.random.default_rng(0)
        while True:
            yield rng.uniform(0, 1, (50, 5)), rng.integers(3, size=50)

    ds = tf.data.Dataset.from_generator(forever, output_signature=(tf.TensorSpec((None, 5), tf.float64),
                                                                   tf.TensorSpec((None,), tf.int64)))
    head = _head("gaussian")
    with pytest.raises(ValueError, match="more than max_records=500 records"):
        head.fit(ds, max_records=500)
    assert not head.released and not head.ledger.releases
    with pytest.raises(ValueError, match="max_records must be >= 1"):
        _head("gaussian").fit(ds, max_records=0)


@pytest.mark.parametrize("what, at, match", [
    ("label", 123, r"record 123 of the stream has label 7"),
    ("nan", 57, r"record 57 of the stream holds NaN"),
    ("bounds", 250, r"record 250 of the stream has features in \[.*outside \[0, 1\]"),
    ("one_hot", 999, r"record 999 of the stream has label .* not one-hot"),
])
def test_a_bad_record_stops_the_pass_before_any_release_and_is_named(what, at, match):
    x, y = _data()
    if what == "one_hot":
        y = np.eye(3)[y]
        y[at] = [1, 1, 0]
    elif what == "label":
        y[at] = 7
    elif what == "nan":
        x[at, 2] = np.nan
    else:
        x[at, 1] = 1.5
    head = _head("laplace")
    with pytest.raises(ValueError, match=match):
        head.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(100))
    assert not head.released and not head.ledger.releases


def test_a_streamed_record_shared_with_the_public_data_is_named():
    rng = np.random.default_rng(2)
    public = rng.uniform(0, 1, (50, 6)).astype(np.float32)
    x = rng.uniform(0, 1, (300, 6)).astype(np.float32)
    x[211] = public[3]
    head = _head("gaussian", tiny_extractor(trained_on=public))
    with pytest.raises(ValueError, match="record 211 of the stream equals a record the feature extractor was trained"):
        head.fit(tf.data.Dataset.from_tensor_slices((x, rng.integers(3, size=300))).batch(64))
    assert [r.component for r in head.ledger.releases] == ["features:tiny"]  # its ε = 0 provenance only


def test_a_dataset_with_separate_labels_or_an_empty_one_is_refused():
    x, y = _data()
    with pytest.raises(ValueError, match="y must be None when x is a tf.data.Dataset"):
        _head("gaussian").fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(10), y)
    head = _head("gaussian")
    with pytest.raises(ValueError, match="holds no record"):
        head.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(10).take(0))
    assert not head.ledger.releases


def test_an_unsupported_strategy_is_refused_before_any_release():
    x, y = _data()
    head = _head("gaussian")
    strategy = tf.distribute.experimental.CentralStorageStrategy()
    with pytest.raises(ValueError, match="does not support strategy=CentralStorageStrategy.*MirroredStrategy"):
        head.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(10), strategy=strategy)
    with pytest.raises(TypeError, match="tf.distribute.Strategy"):
        head.fit(x, y, strategy="mirrored")
    assert not head.ledger.releases


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_one_device_mirrored_pass_matches_the_arrays(mechanism):
    """The distributed pass (indexed stream, per-replica float64 sums, SUM reduce) on one device."""
    x, y = _data()
    on_arrays = _head(mechanism)
    on_arrays.fit(x, y)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    head = _head(mechanism)
    head.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(33), strategy=strategy)
    for key in ("s1_bar", "s2_bar"):
        assert _relative(head.statistics()[key], on_arrays.statistics()[key]) <= 1e-9
    assert head.n == 1000 and len(head.ledger.releases) == 1
    y_bad = y.copy()
    y_bad[444] = 9
    bad = _head(mechanism)
    with pytest.raises(ValueError, match="record 444 of the stream has label 9"):
        bad.fit(tf.data.Dataset.from_tensor_slices((x, y_bad)).batch(33), strategy=strategy)
    assert not bad.ledger.releases


def test_pcdbn_head_accepts_a_dataset():
    x, y = _data()
    one_hot = np.eye(3)[y]
    on_arrays = FunctionalSoftmaxHead(3, epsilon=1.0, seed=2).fit(x, one_hot)
    streamed = FunctionalSoftmaxHead(3, epsilon=1.0, seed=2).fit(
        tf.data.Dataset.from_tensor_slices((x, one_hot)).batch(128))
    assert _relative(streamed.head.statistics()["s1_bar"], on_arrays.head.statistics()["s1_bar"]) <= 1e-9
    assert streamed.head.ridge == on_arrays.head.ridge  # ρ·n with n counted in the pass
    np.testing.assert_allclose(streamed.kernel, on_arrays.kernel, rtol=1e-5, atol=1e-6)
