"""tfdpmech's DP-SGD engine: the same step as tensorflow-privacy's where both run, and correct everywhere.

The cross-checks against tensorflow-privacy are the only tests of this file that skip on the
Keras 3 stack (tensorflow-privacy imports on TensorFlow 2.15 only).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.mechanisms.dpsgd import ShuffledDPSGD, OptimizerSettings, DPSGD, tanh_mlp
from tfdpmech.mechanisms.dpsgd.runs.paths import tf_privacy_available
from tfdpmech.mechanisms.dpsgd.sampling.poisson_sampling import run_element
from tfdpmech.mechanisms.dpsgd.runs.train_step import install_dp_train_step
from tfdpmech.models import standard_cnn

pytestmark = pytest.mark.dpsgd  # the slow ones run on the tensorflow-privacy stack too (.ci/run: "not slow or dpsgd")
NEEDS_TF_PRIVACY = pytest.mark.skipif(not tf_privacy_available(),
                                      reason="tensorflow-privacy imports on the TensorFlow 2.15 stack only")


def _one_padded_batch(x, y, rows, real, seed=0):
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(x), real, replace=False)
    xb = np.zeros((rows,) + x.shape[1:], np.float32)
    yb = np.zeros((rows,) + y.shape[1:], np.float32)
    mask = np.zeros(rows, np.float32)
    xb[:real], yb[:real], mask[:real] = x[idx], y[idx], 1.0
    return xb, yb, mask


def _step_update(engine, build, batch, n, expected_batch, clip=0.05):
    """The clipped sum / L read off one noise-free SGD step (a large step size: float32 rounding of the
    weights stays far below the update)."""
    keras.utils.set_random_seed(0)
    model = build()
    before = [v.numpy().copy() for v in model.trainable_variables]
    dp = DPSGD(1.0, 1e-5, expected_batch_size=expected_batch, epochs=1, n=n, l2_norm_clip=clip,
                      optimizer=OptimizerSettings("sgd", learning_rate=1e4), engine=engine, seed=0)
    dp_model = dp.compile(model)
    if engine == "tensorflow_privacy":  # the noise off: its train step draws N(0, (C·σ)²)
        dp_model._noise_multiplier = 0.0
    else:
        install_dp_train_step(dp_model, loss=dp_model.loss, l2_norm_clip=clip, noise_multiplier=0.0,
                              divisor=dp.expected_batch_size, clipping=dp.path, require_mask=True)
        dp._guard_train_step(dp_model)  # the run's checks around the noise-free step
    ticket = np.tile(np.array([dp.run_id, dp.global_step()], np.int64), (len(batch[2]), 1))  # the run's step 0
    dp_model.fit(tf.data.Dataset.from_tensors(run_element((*batch, ticket))), epochs=1, verbose=0)
    return [(b - v.numpy()) / 1e4 for b, v in zip(before, model.trainable_variables)], dp.path


def _assert_relatively_equal(a_list, b_list, rtol=1e-5):
    for a, b in zip(a_list, b_list):
        scale = max(np.abs(b).max(), 1e-12)
        assert np.abs(a - b).max() <= rtol * scale, (np.abs(a - b).max(), scale)


@NEEDS_TF_PRIVACY
@pytest.mark.parametrize("family", ["mlp", "cnn"])
def test_the_clipped_sum_equals_tensorflow_privacy_on_the_same_batch(mnist_sample, family):
    x, y = np.asarray(mnist_sample.x_train[:512]), np.asarray(mnist_sample.y_train[:512])
    build = tanh_mlp if family == "mlp" else standard_cnn
    batch = _one_padded_batch(x, y, rows=64, real=50)
    ours, our_path = _step_update("tfdpmech", build, batch, n=512, expected_batch=50)
    theirs, their_path = _step_update("tensorflow_privacy", build, batch, n=512, expected_batch=50)
    # tensorflow-privacy: ghost norms on the MLP, vectorized per-example gradients on the CNN (no Conv2D rule)
    assert their_path == ("fast_clipping" if family == "mlp" else "vectorized")
    assert our_path == "fast_clipping"  # tfdpmech has ghost norms for Conv2D too
    assert max(np.abs(u).max() for u in ours) > 0
    _assert_relatively_equal(ours, theirs, rtol=1e-5)


def test_one_step_divides_the_noisy_clipped_sum_by_the_expected_batch():
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(1.0), loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    install_dp_train_step(model, loss=keras.losses.CategoricalCrossentropy(from_logits=True), l2_norm_clip=1e-3,
                          noise_multiplier=0.0, divisor=4.0, clipping="fast_clipping", require_mask=True)
    x = np.array([[1, 2, 3], [3, 1, 0], [9, 9, 9]], np.float32)
    y = np.eye(2, dtype=np.float32)[[0, 1, 1]]
    mask = np.array([1, 1, 0], np.float32)
    w0 = [v.numpy().copy() for v in model.trainable_variables]
    model.fit(tf.data.Dataset.from_tensors((x, y, mask)), epochs=1, verbose=0)
    # two real records, each clipped to norm 1e-3 (their raw norms are far larger): ‖Σ‖ <= 2e-3, ÷ 4
    total = np.sqrt(sum(float(np.sum((a - v.numpy()) ** 2)) for a, v in zip(w0, model.trainable_variables)))
    assert 0 < total <= 2e-3 / 4 * (1 + 1e-5)


def test_the_noise_of_one_step_has_variance_sigma_squared_c_squared():
    """Zero gradients (the loss does not reach the weights): the update is the noise / L alone."""
    sigma, clip, divisor = 1.7, 0.3, 5.0
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(200, use_bias=False, kernel_initializer="zeros")])
    model.compile(optimizer=keras.optimizers.SGD(1.0), loss=keras.losses.MeanSquaredError())
    install_dp_train_step(model, loss=keras.losses.MeanSquaredError(), l2_norm_clip=clip, noise_multiplier=sigma,
                          divisor=divisor, clipping="fast_clipping", noise_seed=3)
    x = np.zeros((6, 4), np.float32)  # zero inputs: zero gradient for every record
    model.fit(x, np.zeros((6, 200), np.float32), batch_size=6, epochs=1, verbose=0)
    noise = -model.trainable_variables[0].numpy().ravel() * divisor
    assert noise.size == 800
    # sample sd of 800 normals: within 10 % of σC at far beyond 3 standard errors (SE ≈ 2.5 %)
    assert np.std(noise) == pytest.approx(sigma * clip, rel=0.10)
    assert abs(np.mean(noise)) < 4 * sigma * clip / np.sqrt(noise.size)


def test_poisson_batches_without_a_mask_are_refused():
    dp = DPSGD(1.0, 1e-5, expected_batch_size=10, epochs=1, n=100, engine="tfdpmech", seed=0)
    model = dp.compile(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]))
    with pytest.raises(ValueError, match=r"only on the Poisson batches its run draws itself.*fit\(x, y\)"):
        model.fit(np.zeros((100, 3), np.float32), np.eye(2, dtype=np.float32)[np.zeros(100, int)], batch_size=10,
                  epochs=1, verbose=0)


def test_tfdpmech_engine_refuses_microbatches():
    with pytest.raises(ValueError, match="engine='tfdpmech' clips every example"):
        ShuffledDPSGD(1.0, 1e-5, 10, 1, 100, num_microbatches=5, engine="tfdpmech")
    with pytest.raises(ValueError, match="engine must be one of"):
        DPSGD(1.0, 1e-5, expected_batch_size=10, epochs=1, n=100, engine="opacus")


def test_an_activity_regulariser_is_refused_before_any_release():
    dp = DPSGD(1.0, 1e-5, expected_batch_size=10, epochs=1, n=100, engine="tfdpmech")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activity_regularizer="l2")])
    with pytest.raises(ValueError, match="activity_regularizer"):
        dp.compile(model)
    assert not dp.ledger.releases


def test_the_shuffled_run_trains_with_tfdpmech_and_records_its_engine(mnist_sample):
    x = np.asarray(mnist_sample.x_train[:400]).reshape(400, -1)
    y = np.asarray(mnist_sample.y_train[:400])
    dp = ShuffledDPSGD(2.0, 1e-5, batch_size=100, epochs=2, n=400, engine="tfdpmech")
    model = dp.compile(keras.Sequential([keras.Input((784,)), keras.layers.Dense(10)]))
    history = model.fit(dp.dataset(x, y, seed=0), epochs=dp.epochs, verbose=0, callbacks=[dp.callback(verbose=0)])
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
    release = dp.ledger.releases[0]
    assert release.details["engine"] == "tfdpmech" and release.details["path"] == "fast_clipping"
    with pytest.raises(tf.errors.InvalidArgumentError, match="privacy budget spent"):
        model.fit(dp.dataset(x, y, seed=1), epochs=1, verbose=0)


@pytest.mark.slow
@NEEDS_TF_PRIVACY
def test_accuracy_at_epsilon_one_agrees_with_tensorflow_privacy_within_the_seeds_spread(mnist_sample):
    """Same model, data, σ and steps (the recipe at 10 epochs, ε = 1), 5 seeds per engine."""
    from tfdpmech.mechanisms.dpsgd import RECIPE, make_dpsgd

    x, y = np.asarray(mnist_sample.x_train[1000:]), np.asarray(mnist_sample.y_train[1000:])
    x_test, y_test = np.asarray(mnist_sample.x_test), np.asarray(mnist_sample.y_test)
    recipe = RECIPE.replace(epochs=10)
    accuracy = {}
    for engine in ("tfdpmech", "tensorflow_privacy"):
        accuracy[engine] = []
        for seed in range(5):
            keras.utils.set_random_seed(seed)
            dp = make_dpsgd(1.0, 1e-5, len(x), recipe=recipe, seed=seed, engine=engine)
            model = dp.compile(tanh_mlp())
            model.fit(dp.dataset(x, y), epochs=dp.epochs, verbose=0, callbacks=[dp.callback(verbose=0)])
            accuracy[engine].append(model.evaluate(x_test, y_test, verbose=0)[1])
            assert dp.release.epsilon_provable <= 1.0
    ours, theirs = np.array(accuracy["tfdpmech"]), np.array(accuracy["tensorflow_privacy"])
    spread = max(np.ptp(ours), np.ptp(theirs))
    assert min(ours.mean(), theirs.mean()) > 0.6, accuracy  # both learn
    assert abs(ours.mean() - theirs.mean()) <= spread, accuracy
