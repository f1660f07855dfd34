"""A DP-SGD run survives save, load and restart: the same ledger, the same stream, the remaining steps."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

import tfdpmech
from tfdpmech import DPSGD, make_private
from tfdpmech.accounting import PrivacyLedger

N, BATCH, EPOCHS = 256, 32, 4  # 8 steps per epoch, 32 steps


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 8)).astype("float32")
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0).astype("int64")


def _model(seed=0):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(2)])


def _run(**overrides):
    args = dict(epsilon=4.0, delta=1e-5, n=N, expected_batch_size=BATCH, epochs=EPOCHS, seed=1)
    args.update(overrides)
    return DPSGD(**args)


def _compiled(model, dp):
    model = make_private(model, dp)
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def _release_dict(release):
    out = release.to_dict()
    out["details"] = {k: v for k, v in out["details"].items() if k != "run_id"}
    return out


@pytest.fixture(scope="module")
def uninterrupted():
    x, y = _data()
    model = _compiled(_model(), _run())
    model.fit(x, y, verbose=0)
    return model


def test_save_load_resume_equals_one_uninterrupted_run(uninterrupted, tmp_path):
    x, y = _data()
    model = _compiled(_model(), _run())
    model.fit(x, y, epochs=2, verbose=0)
    model.save(tmp_path / "half.keras")
    loaded = keras.models.load_model(tmp_path / "half.keras")
    assert type(loaded.optimizer).__name__ == "PrivateAdam"
    resumed = tfdpmech.resume(loaded, seed=1)
    assert len(resumed.privacy_ledger) == 1  # no new charge
    history = resumed.fit(x, y, verbose=0)
    assert len(history.history["loss"]) == 2  # the remaining epochs
    # same stream: batch t and the noise of step t come from (seed, t), so the weights are the same to the bit
    for got, want in zip(resumed.get_weights(), uninterrupted.get_weights()):
        np.testing.assert_array_equal(got, want)
    ledger, reference = resumed.privacy_ledger, uninterrupted.privacy_ledger
    assert [_release_dict(r) for r in ledger.releases] == [_release_dict(r) for r in reference.releases]
    assert ledger.epsilon_provable() == reference.epsilon_provable() <= 4.0
    assert ledger.steps_taken(ledger.releases[0]) == 32 == int(resumed.optimizer.iterations.numpy())
    with pytest.raises(ValueError, match="covers 1 to 0 epochs|taken all its"):
        resumed.fit(x, y, verbose=0)


def test_a_loaded_model_refuses_keras_own_fit_and_trains_nothing(tmp_path):
    x, y = _data()
    model = _compiled(_model(), _run())
    model.fit(x, y, epochs=1, verbose=0)
    model.save(tmp_path / "run.keras")
    loaded = keras.models.load_model(tmp_path / "run.keras")
    before = [w.copy() for w in loaded.get_weights()]
    with pytest.raises(RuntimeError, match=r"tfdpmech.resume\(model\)"):
        loaded.fit(x, y, verbose=0)
    for got, want in zip(loaded.get_weights(), before):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(loaded.predict(x[:4], verbose=0), model.predict(x[:4], verbose=0), rtol=1e-6)


def test_a_new_run_on_a_model_that_took_noisy_steps_composes_with_them(tmp_path):
    x, y = _data()
    model = _compiled(_model(), _run())
    model.fit(x, y, epochs=2, verbose=0)  # 16 of the 32 planned steps
    model.save(tmp_path / "half.keras")
    first = model.privacy_ledger.releases[0]
    sigma = model.dp_sgd.noise_multiplier
    loaded = keras.models.load_model(tmp_path / "half.keras")
    second = _compiled(loaded, _run(epsilon=None, noise_multiplier=sigma, epochs=2, seed=2))
    ledger = second.privacy_ledger
    assert len(ledger) == 1 and _release_dict(ledger.releases[0]) == _release_dict(first)  # composed at compile
    second.fit(x, y, verbose=0)  # its own release, at its first fit
    assert len(ledger) == 2
    assert ledger.releases[0].neighbours == ledger.releases[1].neighbours == "add_remove"
    # the first run was charged its whole plan: the total over-reports, and the ledger says so
    assert ledger.epsilon_provable() > 4.0
    assert "16 of the 32 planned ran" in ledger.summary()
    # the same in memory, without saving: the model's own optimizer carries the first two runs
    third = _compiled(second, _run(epsilon=None, noise_multiplier=sigma, epochs=1, seed=3))
    assert len(third.privacy_ledger) == 2
    third.fit(x, y, verbose=0)
    assert len(third.privacy_ledger) == 3
    # a ledger that already holds the carried releases does not count them twice
    shared = PrivacyLedger()
    fourth_model = _compiled(_model(), _run(ledger=shared))
    fourth_model.fit(x, y, epochs=1, verbose=0)
    fifth = _compiled(fourth_model, _run(ledger=shared, seed=5))
    fifth.fit(x, y, epochs=1, verbose=0)
    assert len(fifth.privacy_ledger) == 2


def test_resume_refuses_what_it_cannot_continue(tmp_path, uninterrupted):
    x, y = _data()
    with pytest.raises(ValueError, match="carries no DP-SGD run"):
        tfdpmech.resume(_model())
    uninterrupted.save(tmp_path / "done.keras")
    with pytest.raises(ValueError, match="taken all its 32 steps"):
        tfdpmech.resume(keras.models.load_model(tmp_path / "done.keras"))
    model = _compiled(_model(), _run())
    model.fit(x, y, epochs=1, verbose=0)
    model.optimizer.iterations.assign(11)  # as if saved inside the second epoch
    model.save(tmp_path / "inside.keras")
    with pytest.raises(ValueError, match="inside an epoch"):
        tfdpmech.resume(keras.models.load_model(tmp_path / "inside.keras"))
    model.optimizer.iterations.assign(8)
    model.save(tmp_path / "altered.keras")
    config_run = keras.models.load_model(tmp_path / "altered.keras")
    config_run.optimizer._tfdpmech_saved = config_run.optimizer._tfdpmech_saved.replace('"steps": 32', '"steps": 64')
    with pytest.raises(ValueError, match="cannot be read"):
        tfdpmech.resume(config_run)


_KILLED_RUN = textwrap.dedent("""
    import os, sys, signal
    import keras
    sys.path.insert(0, {tests!r})
    from mechanisms.dpsgd.test_save_and_resume import _compiled, _data, _model, _run

    class KillAtEpoch(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 2:  # after the checkpoint of epoch 2 was written: kill -9 mid-fit
                os.kill(os.getpid(), signal.SIGKILL)

    x, y = _data()
    model = _compiled(_model(), _run())
    model.fit(x, y, verbose=0, callbacks=[keras.callbacks.ModelCheckpoint({path!r}), KillAtEpoch()])
""")


@pytest.mark.slow
def test_kill_minus_9_then_restart_from_the_last_checkpoint(tmp_path, uninterrupted):
    path = str(tmp_path / "checkpoint.keras")
    tests = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = _KILLED_RUN.format(tests=tests, path=path)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == -9, done.stderr[-2000:]
    x, y = _data()
    restarted = tfdpmech.resume(keras.models.load_model(path), seed=1)
    assert restarted.dp_sgd.steps_taken() == 16
    restarted.fit(x, y, verbose=0)
    for got, want in zip(restarted.get_weights(), uninterrupted.get_weights()):
        np.testing.assert_array_equal(got, want)
    assert ([_release_dict(r) for r in restarted.privacy_ledger.releases]
            == [_release_dict(r) for r in uninterrupted.privacy_ledger.releases])
