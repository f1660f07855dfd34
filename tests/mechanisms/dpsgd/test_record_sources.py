"""Random-access sources under DP-SGD: a record source and an h5py array are sampled by index, each step reading
exactly its sampled records, with the ledger's n the source's length; bad records are refused, by index,
before the release."""

from __future__ import annotations

import os
import subprocess
import sys

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

import tfdpmech
from tfdpmech.mechanisms.dpsgd.sampling.poisson_sampling import PoissonSampler, sampling_key, step_rng

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
N, L, SEED = 96, 16, 7
HERE = os.path.dirname(os.path.abspath(__file__))


class CountingSource:
    """A record source ``(x, y)`` that logs every index it reads."""

    def __init__(self, x, y, w=None):
        self.x, self.y, self.w, self.reads = x, y, w, []

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        self.reads.append(int(i))
        return (self.x[i], self.y[i]) if self.w is None else (self.x[i], self.y[i], self.w[i])


def _data(n=N):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 5)).astype(np.float32), rng.integers(0, 3, n)


def _private(epochs=1):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)])
    model = tfdpmech.make_private(model, tfdpmech.DPSGD(epsilon=1.0, delta=1e-5, n=N, expected_batch_size=L,
                                                        epochs=epochs, seed=SEED))
    model.compile(optimizer="sgd", loss=LOSS)
    return model


def test_each_step_reads_exactly_its_sampled_records():
    x, y = _data()
    source = CountingSource(x, y)
    model = _private(epochs=2)
    model.fit(source, verbose=0)
    assert source.reads[:N] == list(range(N))  # every record checked once before the release
    key, steps = sampling_key(SEED), model.dp_sgd.steps
    sampled = [PoissonSampler(N, L / N, step_rng(key, t)).sample().tolist() for t in range(steps)]
    assert source.reads[N:] == [i for batch in sampled for i in batch]
    assert len(model.privacy_ledger) == 1


def test_a_source_trains_the_weights_its_arrays_train():
    x, y = _data()
    w = np.linspace(0.5, 2.0, N).astype(np.float32)
    from_arrays, from_source = _private(), _private()
    from_arrays.fit(x, y, sample_weight=w, verbose=0)
    from_source.fit(CountingSource(x, y, w), verbose=0)
    for a, b in zip(from_arrays.trainable_variables, from_source.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_an_h5py_array_is_read_by_index(tmp_path):
    x, y = _data()
    with h5py.File(tmp_path / "records.h5", "w") as f:
        f["x"] = x
    from_arrays = _private()
    from_arrays.fit(x, y, verbose=0)
    with h5py.File(tmp_path / "records.h5", "r") as f:
        from_file = _private()
        from_file.fit(f["x"], y, verbose=0)
    for a, b in zip(from_arrays.trainable_variables, from_file.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_tfrecord_files_written_as_array_record_are_read_by_index_in_batched_reads(tmp_path):
    array_record_module = pytest.importorskip("array_record.python.array_record_module")
    from tfdpmech.mechanisms.dpsgd.sampling.array_records import ParsedSource, array_record_source

    x, y = _data()
    tfrecords = []  # TFRecord files of tf.train.Example, then the docs' conversion: the serialized bytes as they are
    for k in range(2):
        tfrecords.append(str(tmp_path / f"part{k}.tfrecord"))
        with tf.io.TFRecordWriter(tfrecords[-1]) as writer:
            for i in range(k * N // 2, (k + 1) * N // 2):
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=x[i])),
                    "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[y[i]]))})).SerializeToString())
    path = str(tmp_path / "train.array_record")
    writer = array_record_module.ArrayRecordWriter(path, "group_size:1")
    for serialized in tf.data.TFRecordDataset(tfrecords).as_numpy_iterator():
        writer.write(serialized)
    writer.close()
    features = {"x": tf.io.FixedLenFeature([5], tf.float32), "y": tf.io.FixedLenFeature([], tf.int64)}

    def parse(serialized):
        example = tf.io.parse_single_example(serialized, features)
        return example["x"].numpy(), example["y"].numpy()

    source = array_record_source([path], parse)
    batched = []
    many = source.__getitems__
    source.__getitems__ = lambda indices: batched.append(list(indices)) or many(indices)
    from_arrays, from_file = _private(), _private()
    from_arrays.fit(x, y, verbose=0)
    from_file.fit(source, verbose=0)
    for a, b in zip(from_arrays.trainable_variables, from_file.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    key = sampling_key(SEED)  # one batched read per step, of exactly its sampled records
    assert batched == [PoissonSampler(N, L / N, step_rng(key, t)).sample().tolist()
                       for t in range(from_file.dp_sgd.steps)]
    with pytest.raises(TypeError, match="random access by index"):
        ParsedSource(tf.data.TFRecordDataset(tfrecords), parse)
    with pytest.raises(TypeError, match="parse must be a function of one stored record"):
        ParsedSource([b"record"], "parse")


@pytest.mark.slow  # two fresh processes, 15 s each on two cores
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads RssAnon from /proc/self/status")
def test_a_memmap_fit_uses_memory_bounded_by_the_batch_not_by_n(tmp_path):
    growth = {}
    for n in (10_000, 50_000):  # 78 MB and 391 MB of float32 records on disk
        path = tmp_path / f"x{n}.npy"
        x = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, 2048))
        for i in range(0, n, 5000):
            x[i:i + 5000] = np.random.default_rng(i).random((min(5000, n - i), 2048), dtype=np.float32)
        x.flush()
        del x
        done = subprocess.run([sys.executable, os.path.join(HERE, "_memmap_memory_worker.py"), str(path)],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        growth[n] = int(done.stdout.split()[-1])
    # five times the records (313 MB more on disk) add less than 16 MB of anonymous memory: what grows is the
    # batch, the traced step and TensorFlow's pools, not a copy of the data or an n-sized check
    assert growth[50_000] - growth[10_000] < 16 * 2**20, growth
    assert growth[50_000] < 200 * 2**20, growth


@pytest.mark.parametrize("bad, words", [
    (lambda x, y: CountingSource(np.where(np.arange(N)[:, None] == 5, np.nan, x), y), "source\\[5\\] x holds NaN"),
    (lambda x, y: _Ragged(x, y), "source\\[2\\] x has shape \\(4,\\)"),
    (lambda x, y: CountingSource(x, y, -np.ones(N)), "source\\[0\\]'s weight is -1.0"),
    (lambda x, y: CountingSource(x[:50], y[:50]), "n=96"),
])
def test_a_bad_source_is_refused_by_index_before_the_release(bad, words):
    x, y = _data()
    model = _private()
    with pytest.raises((ValueError, TypeError), match=words):
        model.fit(bad(x, y), verbose=0)
    assert len(model.privacy_ledger) == 0


class _Ragged(CountingSource):
    def __getitem__(self, i):
        x, y = super().__getitem__(i)
        return (x[:4] if i == 2 else x), y


def test_a_source_of_batches_or_of_unreadable_records_is_refused_before_the_release():
    x, y = _data()

    class Batches(CountingSource):  # a PyDataset-like source: each item a batch of 8 records
        def __len__(self):
            return N // 8

        def __getitem__(self, i):
            return self.x[8 * i:8 * (i + 1)], self.y[8 * i:8 * (i + 1)]

    class Columns:  # a table keyed by column names, not by record
        def __len__(self):
            return N

        def __getitem__(self, key):
            return {"x": x, "y": y}[key]

    for source, exc, words in ((Batches(x, y), ValueError, "model's batch dimension"),
                               (Columns(), TypeError, "source\\[0\\] raised KeyError")):
        model = _private()
        with pytest.raises(exc, match=words):
            model.fit(source, verbose=0)
        assert len(model.privacy_ledger) == 0
