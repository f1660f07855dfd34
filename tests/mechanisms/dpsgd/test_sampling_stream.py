"""The Poisson stream of a run: batch t is a function of (secret key, t); only the run's own batches train.

Every fit of a run continues its step count (the optimizer's, saved with the model), so a fixed seed never
replays a draw; a batch of another dataset (whatever its third element), of another run, or drawn for
another step is refused before any step runs.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.accounting import PrivacyLedger
from tfdpmech import DPSGD, make_private

N, CLASSES = 60, 3
LOSS = keras.losses.CategoricalCrossentropy(from_logits=True)


def _data():
    rng = np.random.default_rng(0)
    x = rng.random((N, 4)).astype(np.float32)
    x[:, 0] = np.arange(N)  # a record's first feature is its index: the batches can be read off
    return x, keras.utils.to_categorical(rng.integers(0, CLASSES, N), CLASSES).astype(np.float32)


def _model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(CLASSES)])


def _private(epochs=2, **kw):
    args = dict(epsilon=3.0, delta=1e-3, n=N, expected_batch_size=15, epochs=epochs, seed=1234)
    args.update(kw)
    model = make_private(_model(), DPSGD(**args))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=LOSS)
    return _logging(model)


def _logging(model):
    """Record ``(step, indices of the real records)`` of every batch the compiled model trains on."""
    model.trained = []
    inner = model.train_step

    def note(step, x, mask):
        model.trained.append((int(step), tuple(int(i) for i in x.numpy()[mask.numpy() > 0, 0])))
        return np.int64(0)

    def train_step(data):
        x, _, rest = data
        mask = rest[0] if isinstance(rest, tuple) else rest
        done = tf.py_function(note, [model.optimizer.iterations, x, mask], tf.int64)
        with tf.control_dependencies([done]):
            return inner(data)

    model.train_step = train_step
    model.train_function = None
    return model


def test_a_second_fit_with_a_fixed_seed_draws_new_batches():
    x, y = _data()
    model = _private()
    model.fit(x, y, epochs=1, verbose=0)
    first = list(model.trained)
    model.fit(x, y, epochs=1, verbose=0)
    second = model.trained[len(first):]
    steps = model.dp_sgd.steps_per_epoch
    assert [t for t, _ in first] == list(range(steps)) and [t for t, _ in second] == list(range(steps, 2 * steps))
    assert [b for _, b in first] != [b for _, b in second]  # the second fit does not replay the first's batches
    assert all(b not in [c for _, c in first] for _, b in second if len(b) > 1)


def test_one_fit_of_two_epochs_draws_what_two_fits_of_one_epoch_draw():
    x, y = _data()
    once, twice = _private(), _private()
    once.fit(x, y, epochs=2, verbose=0)
    twice.fit(x, y, epochs=1, verbose=0)
    twice.fit(x, y, epochs=1, verbose=0)
    assert once.trained == twice.trained and len(once.trained) == once.dp_sgd.steps
    for a, b in zip(once.get_weights(), twice.get_weights()):  # the noise too is a function of (key, step)
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_the_step_count_is_saved_with_the_model_and_a_new_run_continues_it(tmp_path):
    x, y = _data()
    whole = _private()
    whole.fit(x, y, epochs=2, verbose=0)
    half = _private()
    half.fit(x, y, epochs=1, verbose=0)
    path = tmp_path / "half.keras"
    half.save(path)
    loaded = keras.models.load_model(path)
    assert int(loaded.optimizer.iterations.numpy()) == half.dp_sgd.steps_per_epoch
    resumed = make_private(loaded, DPSGD(epsilon=3.0, delta=1e-3, n=N, expected_batch_size=15, epochs=1, seed=1234))
    resumed.compile(optimizer=loaded.optimizer, loss=LOSS)
    resumed = _logging(resumed)
    resumed.fit(x, y, verbose=0)
    assert resumed.trained == whole.trained[len(half.trained):]  # steps s..2s-1 of the stream, not 0..s-1


def test_a_dataset_with_a_third_element_is_refused_before_any_step():
    x, y = _data()
    ledger = PrivacyLedger()
    model = _private(ledger=ledger)
    before = [w.copy() for w in model.get_weights()]
    shuffled = tf.data.Dataset.from_tensor_slices((x, y, np.ones(N, np.float32))).shuffle(N).batch(15)
    with pytest.raises(ValueError, match=r"fit\(x, y\)"):
        model.fit(shuffled, verbose=0)
    with pytest.raises(ValueError, match=r"fit\(x, y\)"):  # straight into Keras's fit: the train step refuses
        type(model).fit(model, shuffled, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 0
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    assert len(ledger) == 0  # refused before the first fit recorded the release: nothing spent


@pytest.mark.parametrize("engine", ["auto", "tfdpmech"])
def test_a_compiled_run_trains_only_on_its_own_batches_at_their_step(engine):
    x, y = _data()
    runs = [DPSGD(3.0, 1e-3, expected_batch_size=15, epochs=2, n=N, seed=s, engine=engine) for s in (1, 2)]
    model = runs[0].compile(_model())
    with pytest.raises(ValueError, match="only on the Poisson batches its run draws itself"):
        model.fit(tf.data.Dataset.from_tensor_slices((x, y, np.ones(N, np.float32))).batch(15), verbose=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="drawn by another DP-SGD run"):
        model.fit(runs[1].dataset(x, y), verbose=0)
    first = next(iter(runs[0].dataset(x, y)))  # drawn for step 0 ...
    model.fit(runs[0].dataset(x, y), epochs=1, verbose=0)  # ... but the model has moved on
    with pytest.raises(tf.errors.InvalidArgumentError, match="drawn for another global step"):
        model.fit(tf.data.Dataset.from_tensors(first), verbose=0)
    assert runs[0].steps_taken() == runs[0].steps_per_epoch


def test_a_bad_seed_is_refused_naming_it():
    with pytest.raises(TypeError, match=r"seed must be None .* got 'abc'"):
        DPSGD(1.0, 1e-3, expected_batch_size=15, epochs=1, n=N, seed="abc")
    with pytest.raises(TypeError, match="seed must be None"):
        make_private(_model(), DPSGD(epsilon=1.0, delta=1e-3, n=N, expected_batch_size=15, epochs=1, seed=1.5))
    with pytest.raises(ValueError, match="seed must be a non-negative int"):
        DPSGD(1.0, 1e-3, expected_batch_size=15, epochs=1, n=N, seed=-3)


def test_the_run_compiles_without_xla_and_refuses_a_step_traced_with_it():
    x, y = _data()
    dp = DPSGD(3.0, 1e-3, expected_batch_size=15, epochs=1, n=N, seed=1, engine="tfdpmech")
    model = dp.compile(_model())
    assert model.jit_compile is False  # XLA drops assertions, the guards among them
    model.jit_compile = True
    with pytest.raises(ValueError, match="jit_compile=True, but XLA drops the train step's checks"):
        model.fit(dp.dataset(x, y), verbose=0)
    assert dp.steps_taken() == 0


def test_the_run_stream_runs_no_autotuning_thread():
    """Its buffers are fixed; with tf.data's autotuning on, the end of a fit can wait for the tuning thread."""
    dp = DPSGD(epsilon=3.0, delta=1e-3, n=N, expected_batch_size=15, epochs=2, seed=1)
    make_private(_model(), dp).compile(optimizer=keras.optimizers.SGD(0.1), loss=LOSS)
    x, y = _data()
    assert dp.dataset(x, y).options().autotune.enabled is False
    assert tf.data.Dataset.range(3).options().autotune.enabled is not False  # tf.data's own default differs


def test_without_autotune_takes_only_a_dataset():
    from tfdpmech.input_pipeline import without_autotune

    with pytest.raises(TypeError, match="ds must be a tf.data.Dataset, got ndarray"):
        without_autotune(np.zeros(3))
