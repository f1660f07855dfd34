"""BandMF on the fit path: ``DPSGD(..., bands=b)`` (tfdpmech.mechanisms.dpsgd.runs.banded_run).

bands = 1 is DP-SGD draw for draw; the correlated noise against a dense ``C⁻¹ Z`` from the same draws; cyclic Poisson
partitions; the amplified accounting; composition with chunks, views, users, resume and a one-device
MirroredStrategy; bad input refused before anything is charged. Tiny models, a few dozen steps.
"""

from __future__ import annotations

import math

import dp_accounting
import keras
import numpy as np
import pytest
import tensorflow as tf

import tfdpmech
from tfdpmech import DPSGD, make_private
from tfdpmech.accounting.ledger import PrivacyLedger
from tfdpmech.accounting.poisson_dpsgd import poisson_dpsgd_epsilon, poisson_dpsgd_noise_multiplier
from tfdpmech.mechanisms.dpsgd import make_dpsgd, ShuffledDPSGD
from tfdpmech.mechanisms.dpsgd.noise.banded_strategy import banded_strategy, dense_strategy
from tfdpmech.mechanisms.dpsgd.noise.correlated_noise import BandedNoise, noise_buffers
from tfdpmech.mechanisms.dpsgd.runs.paths import tf_privacy_available
from tfdpmech.mechanisms.dpsgd.runs.train_step import KERAS_3, noise_key, step_noise
from tfdpmech.mechanisms.dpsgd.sampling.cyclic_poisson import CyclicPartitions
from tfdpmech.mechanisms.dpsgd.sampling.poisson_sampling import poisson_batch

pytestmark = pytest.mark.dpsgd

N, L, EPOCHS = 120, 10, 2  # 12 steps per epoch, 24 steps


def _data(n=N):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 5)).astype("float32")
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0).astype("int64")


def _model(seed=1):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((5,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(2)])


def _run(**overrides):
    args = dict(epsilon=2.0, delta=1e-3, n=N, expected_batch_size=L, epochs=EPOCHS, seed=7)
    args.update(overrides)
    return DPSGD(**args)


def _fit(dp, epochs=None, model=None, optimizer=None, strategy=None, **fit):
    x, y = _data(fit.pop("n", N))
    with (strategy or tf.distribute.get_strategy()).scope():
        model = make_private(model if model is not None else _model(), dp)
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), optimizer=optimizer)
    model.fit(x, y, verbose=0, **({} if epochs is None else {"epochs": epochs}), **fit)
    return model


def _release(release):
    out = release.to_dict()
    out["details"] = {k: v for k, v in out["details"].items() if k != "run_id"}
    return out


# -- bands = 1 is DP-SGD -----------------------------------------------------------------------------------------
def test_one_band_is_dpsgd_bit_for_bit():
    plain, one = _run(), _run(bands=1)
    a, b = _fit(plain), _fit(one)
    for got, want in zip(b.get_weights(), a.get_weights()):
        np.testing.assert_array_equal(got, want)
    assert one.noise_multiplier == plain.noise_multiplier == poisson_dpsgd_noise_multiplier(
        2.0, 1e-3, q=L / N, steps=24)
    assert [_release(r) for r in one.ledger.releases] == [_release(r) for r in plain.ledger.releases]
    assert one.ledger.epsilon_provable() == plain.ledger.epsilon_provable()
    release = one.ledger.releases[0]
    assert release.mechanism == "dpsgd" and "bands" not in release.details
    assert one.partitions(one._sampling_key) is None and noise_buffers(b.optimizer) is None
    assert "bands" not in b.optimizer.tfdpmech_run_state()["run"]


def test_one_band_draws_plain_poisson_batches():
    dp = _run(bands=1)
    x, y = _data()
    y = keras.utils.to_categorical(y, 2)
    for step, (xb, _, (mask, _)) in enumerate(dp.dataset(x, y).take(5)):
        want, _, wmask = poisson_batch(x, y, dp.sampling_probability, dp.batch_rows(), dp._sampling_key, step)
        np.testing.assert_array_equal(xb.numpy()[mask.numpy() > 0], want[wmask > 0])


# -- the correlated noise ----------------------------------------------------------------------------------------
def test_stream_noise_equals_dense_inverse_of_the_same_draws():
    steps, bands = 6, 3
    strategy = banded_strategy(steps, bands)
    shapes = [(tf.TensorShape([3, 2]), tf.float32), (tf.TensorShape([2]), tf.float32)]
    variables = [tf.Variable(tf.zeros(s, d)) for s, d in shapes]
    optimizer = keras.optimizers.SGD()
    optimizer.build(variables)
    key, std = noise_key(11), 0.7
    noise = BandedNoise(strategy.coefficients, strategy.sensitivity, lambda: 100, (1, 2, 3, 4))
    streamed, drawn = [], []
    for t in range(steps):
        z = step_noise(key, t, shapes, std * strategy.sensitivity)
        w, updates = noise(optimizer, variables, z, t)
        noise.assign(updates)
        streamed.append(np.concatenate([v.numpy().ravel() for v in w]))
        drawn.append(np.concatenate([v.numpy().ravel() for v in z]).astype(np.float64))
    dense = np.linalg.solve(dense_strategy(strategy.coefficients, steps), np.array(drawn))  # C⁻¹ Z
    np.testing.assert_allclose(np.array(streamed), dense, rtol=1e-5, atol=1e-6)
    assert not np.allclose(dense, np.array(drawn))  # correlated: not the draws themselves
    buffers = noise_buffers(optimizer)
    assert [tuple(b.shape) for b in buffers] == [(2, 3, 2), (2, 2)]  # b − 1 past vectors, never steps × steps
    np.testing.assert_allclose(buffers[1].numpy()[0], np.array(streamed)[-1][6:], rtol=1e-6)


def test_training_noise_equals_dense_reference():
    """σ so large that the clipped gradients vanish beside the noise: SGD's steps are −lr·(C⁻¹ Z)_t / L."""
    steps, bands, sigma, lr = 6, 3, 1e6, 1e-6
    dp = DPSGD(None, 1e-3, expected_batch_size=L, epochs=1, n=60, noise_multiplier=sigma, seed=3, bands=bands,
               optimizer=tfdpmech.mechanisms.dpsgd.OptimizerSettings("sgd", learning_rate=lr))
    assert dp.steps == steps
    model = make_private(_model(), dp)
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = _data(60)
    seen = [np.concatenate([w.ravel() for w in model.get_weights()])]
    record = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: seen.append(
        np.concatenate([w.ravel() for w in model.get_weights()])))
    model.fit(x, y, verbose=0, callbacks=[record])
    released = -np.diff(np.array(seen, np.float64), axis=0) * L / lr  # (C⁻¹ Z)_t, plus gradients of order 1e-6
    strategy = dp.strategy
    shapes = [(tf.TensorShape(v.shape), tf.float32) for v in model.trainable_variables]
    z = np.array([np.concatenate([d.numpy().ravel() for d in step_noise(
        noise_key(dp._noise_seed), t, shapes, dp.l2_norm_clip * sigma * strategy.sensitivity)]) for t in range(steps)])
    want = np.linalg.solve(dense_strategy(strategy.coefficients, steps), z)
    assert np.abs(released - want).max() <= 2e-3 * np.abs(want).max()
    for buffer in noise_buffers(model.optimizer):  # the run's last step zeroed the secret buffer
        assert not np.any(buffer.numpy())


# -- sampling and accounting -------------------------------------------------------------------------------------
def test_cyclic_partitions_and_accounting():
    dp = _run(bands=4, n=122)  # 122 is no multiple of 4: each unit's partition is its own uniform draw
    x, y = _data(122)
    y = keras.utils.to_categorical(y, 2)
    q_b = 4 * L / 122
    assert dp.partition_sampling_probability == q_b and dp.rounds == math.ceil(dp.steps / 4)
    parts = dp.partitions(dp._sampling_key).parts
    assert len(parts) == 4 and all(len(p) > 0 for p in parts)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(122))
    last = {}
    for step, (xb, _, (mask, ticket)) in enumerate(dp.dataset(x, y).take(24)):
        rows = xb.numpy()[mask.numpy() > 0]
        ids = [int(np.flatnonzero((x == r).all(axis=1))[0]) for r in rows]
        assert set(ids) <= set(parts[step % 4].tolist())
        for i in ids:  # at most once in any 4 consecutive steps
            assert step - last.get(i, -4) >= 4
            last[i] = step
    sigma = poisson_dpsgd_noise_multiplier(2.0, 1e-3, q=q_b, steps=dp.rounds)
    assert dp.noise_multiplier == sigma > _run().noise_multiplier  # weaker amplification: a larger σ
    assert dp.epsilon_after_steps(dp.steps) == poisson_dpsgd_epsilon(sigma, 1e-3, q=q_b, steps=dp.rounds) <= 2.0
    assert dp.epsilon_after_steps(5) == poisson_dpsgd_epsilon(sigma, 1e-3, q=q_b, steps=2)


def test_adding_a_unit_moves_no_other_unit_between_partitions():
    """Add-or-remove neighbours: each unit's partition is its own draw, so the others' do not change."""
    key = (5, 6, 7, 8)
    small, large = CyclicPartitions(500, 7, key), CyclicPartitions(501, 7, key)
    for a, b in zip(small.parts, large.parts):
        np.testing.assert_array_equal(a, b[b < 500])
    sizes = [len(p) for p in CyclicPartitions(70000, 7, key).parts]  # uniform: about 10,000 each
    assert max(abs(s - 10000) for s in sizes) < 6 * math.sqrt(10000)


def test_ledger_names_bandmf_and_its_bands():
    dp = _run(bands=3)
    _fit(dp)
    release = dp.ledger.releases[0]
    assert release.mechanism == "dpsgd_bandmf" and "BandMF, 3 bands" in release.basis
    details = release.details
    assert details["bands"] == 3 and details["noise"] == "bandmf" and details["rounds"] == 8
    assert details["strategy_coefficients"][0] == 1.0 and len(details["strategy_coefficients"]) == 3
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(
        3 * L / N, dp_accounting.GaussianDpEvent(dp.noise_multiplier)), 8)
    assert release.event == event
    saved = PrivacyLedger.from_dict(dp.ledger.to_dict())
    assert saved.epsilon_provable() == pytest.approx(dp.ledger.epsilon_provable()) and saved.epsilon_provable() <= 2.0


# -- composition -------------------------------------------------------------------------------------------------
def test_chunks_views_and_users_train_with_bands():
    whole, chunked = _fit(_run(bands=3)), _fit(_run(bands=3, physical_batch_size=4))
    for got, want in zip(chunked.get_weights(), whole.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    views = _run(bands=3, augmentation=lambda r, seed: r + 0.01 * tf.random.stateless_normal(tf.shape(r), seed),
                 augmentation_multiplicity=2)
    assert len(views.ledger.releases) == 0 and np.all(np.isfinite(_fit(views).get_weights()[0]))
    assert views.ledger.releases[0].details["augmentation_multiplicity"] == 2
    ids = np.repeat(np.arange(60), 2)
    users = _run(bands=3, n=60, expected_batch_size=5, user_ids=ids, records_per_user=2)
    assert users.partitions(users._sampling_key).n == 60  # the units partitioned are the users
    model = _fit(users, n=120)
    assert users.ledger.releases[0].neighbours == "add_remove_user" and model.optimizer.iterations.numpy() == 24


def test_save_mid_run_and_resume_equals_an_uninterrupted_run(tmp_path):
    whole = _fit(_run(bands=3))
    model = _fit(_run(bands=3), epochs=1)
    assert any(np.any(b.numpy()) for b in noise_buffers(model.optimizer))  # mid-run: the secret buffer is live
    model.save(tmp_path / "half.keras")
    loaded = keras.models.load_model(tmp_path / "half.keras")
    with pytest.raises(ValueError, match="another sampling key"):
        tfdpmech.resume(loaded, seed=8)
    loaded = keras.models.load_model(tmp_path / "half.keras")
    resumed = tfdpmech.resume(loaded, seed=7)
    assert resumed.dp_sgd.bands == 3 and len(resumed.privacy_ledger) == 1
    x, y = _data()
    resumed.fit(x, y, verbose=0)
    for got, want in zip(resumed.get_weights(), whole.get_weights()):
        np.testing.assert_array_equal(got, want)
    assert [_release(r) for r in resumed.privacy_ledger.releases] == [_release(r) for r in whole.privacy_ledger.releases]


def test_one_device_mirrored_strategy_equals_one_device():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        model = _model()
    if not KERAS_3:  # Keras 2.15's optimizer variables take no replica aggregation: refused before any release
        dp = _run(bands=3)
        with pytest.raises(ValueError, match="Keras 2's optimizer variables cannot hold the noise buffer"):
            _fit(dp, model=model, strategy=strategy)
        assert len(dp.ledger.releases) == 0
        return
    mirrored, plain = _fit(_run(bands=3), model=model, strategy=strategy), _fit(_run(bands=3))
    assert mirrored.dp_sgd.replicas == 1 and isinstance(mirrored.distribute_strategy, tf.distribute.MirroredStrategy)
    for got, want in zip(mirrored.get_weights(), plain.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# -- bad input, refused before anything is charged ---------------------------------------------------------------
@pytest.mark.parametrize("bands,error,match", [(0, ValueError, "bands must be >= 1.*got bands=0"),
                                               (2.5, TypeError, "bands must be an int.*2.5"),
                                               ("3", TypeError, "bands must be an int.*'3'"),
                                               (True, TypeError, "bands must be an int")])
def test_bad_bands(bands, error, match):
    with pytest.raises(error, match=match):
        _run(bands=bands)


def test_bands_above_an_epoch_refused_at_construction_and_at_first_fit():
    with pytest.raises(ValueError, match=r"bands=13 is more than the 12 steps of an epoch.*Pass bands <= 12"):
        _run(bands=13)
    with pytest.raises(ValueError, match="bands=12 is more than the 11 steps.*fewer than the expected batch"):
        _run(bands=12, n=110)  # 11 steps of an epoch
    with pytest.raises(ValueError, match=r"bands=12 is more than the 12 steps.*q_b = bands · L / n = 1.05"):
        _run(bands=12, n=114, expected_batch_size=10)  # 12 steps an epoch, but 114 / 12 < 10 records a partition
    dp = DPSGD(2.0, 1e-3, expected_batch_size=L, epochs=EPOCHS, seed=7, bands=13)  # n from the first fit
    ledger = dp.ledger
    with pytest.raises(ValueError, match="bands=13 is more than the 12 steps"):
        _fit(dp)
    assert len(ledger.releases) == 0


def test_bands_with_what_the_amplification_does_not_cover():
    with pytest.raises(ValueError, match="bands.*shuffled"):
        make_dpsgd(2.0, 1e-3, N, sampling="shuffled", bands=3)
    with pytest.raises(ValueError, match="bands=3.*shuffled"):
        ShuffledDPSGD(2.0, 1e-3, L, EPOCHS, N, bands=3)
    if tf_privacy_available():  # else the engine itself is refused first, as for any run
        with pytest.raises(ValueError, match="bands=3 .BandMF. trains on tfdpmech's engine"):
            _run(bands=3, engine="tensorflow_privacy")
    dp = _run(bands=3)
    if keras.__version__.startswith("3"):  # Keras 2's optimizers have no gradient accumulation to refuse
        with pytest.raises(ValueError, match="gradient_accumulation_steps"):
            _fit(dp, optimizer=keras.optimizers.SGD(0.1, gradient_accumulation_steps=2))
        assert len(dp.ledger.releases) == 0
    x, y = _data()
    y = keras.utils.to_categorical(y, 2)
    with pytest.raises(ValueError, match="partitions are fixed.*drop dataset"):
        dp.dataset(x, y, seed=8)
    assert make_dpsgd(2.0, 1e-3, N, bands=3).bands == 3


def test_sample_weight_and_mixed_precision_keep_the_buffer_through_save(tmp_path):
    x, y = _data()
    weighted = make_private(_model(), _run(bands=3))
    weighted.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    weighted.fit(x, y, sample_weight=np.linspace(0.5, 1.0, N), verbose=0)
    assert weighted.optimizer.iterations.numpy() == 24
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = _fit(_run(bands=3), epochs=1)
        inner = model.optimizer.inner_optimizer  # the loss-scale wrapper's optimizer holds the buffer
        assert [tuple(b.shape) for b in noise_buffers(inner)] == [(2, 5, 4), (2, 4), (2, 4, 2), (2, 2)]
        model.save(tmp_path / "mixed.keras")
        resumed = tfdpmech.resume(keras.models.load_model(tmp_path / "mixed.keras"), seed=7)
        for got, want in zip(noise_buffers(resumed.optimizer.inner_optimizer), noise_buffers(inner)):
            assert np.any(want.numpy()) and np.array_equal(got.numpy(), want.numpy())
        resumed.fit(x, y, verbose=0)
        assert resumed.optimizer.iterations.numpy() == 24
    finally:
        keras.mixed_precision.set_global_policy("float32")


@pytest.mark.skipif(not KERAS_3, reason="the average's warm-up is Keras 3's")
def test_bands_with_a_warmed_up_weight_average_resume_as_an_uninterrupted_run(tmp_path):
    from tfdpmech.mechanisms.dpsgd import OptimizerSettings

    settings = OptimizerSettings("adam", learning_rate=0.05, ema_momentum=0.9, ema_warmup=True)
    whole = _fit(_run(bands=3, optimizer=settings))
    model = _fit(_run(bands=3, optimizer=settings), epochs=1)
    model.save(tmp_path / "half.keras")
    resumed = tfdpmech.resume(keras.models.load_model(tmp_path / "half.keras"), seed=7)
    x, y = _data()
    resumed.fit(x, y, verbose=0)
    for got, want in zip(resumed.get_weights(), whole.get_weights()):  # the average, which fit leaves in the model
        np.testing.assert_array_equal(got, want)
    assert not any(np.array_equal(a, b) for a, b in zip(whole.get_weights(), _fit(_run(bands=3)).get_weights()))
