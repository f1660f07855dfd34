"""DP-SGD under MirroredStrategy over 2 logical CPU devices (run by tests/mechanisms/dpsgd/test_distributed.py).

Usage: python _distributed_worker.py OUT. Writes a JSON of measurements and of the errors raised.
"""

import json
import sys

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]  # before TensorFlow initialises its devices
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tfdpmech.mechanisms.dpsgd import ShuffledDPSGD, DPSGD  # noqa: E402
from tfdpmech.mechanisms.dpsgd.runs.paths import tf_privacy_available  # noqa: E402
from tfdpmech.mechanisms.dpsgd.runs.train_step import install_dp_train_step  # noqa: E402

STRATEGY = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
ONE = tf.distribute.get_strategy()
out = {"replicas": STRATEGY.num_replicas_in_sync}


def noise_of_one_step(strategy, sigma=1.7, clip=0.3, divisor=5.0):
    """Zero inputs, zero gradients: the update of one step is the noise / L alone."""
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(500, use_bias=False,
                                                                        kernel_initializer="zeros")])
        model.compile(optimizer=keras.optimizers.SGD(1.0), loss=keras.losses.MeanSquaredError())
    install_dp_train_step(model, loss=keras.losses.MeanSquaredError(), l2_norm_clip=clip, noise_multiplier=sigma,
                          divisor=divisor, clipping="fast_clipping", noise_seed=3)
    model.fit(np.zeros((6, 4), np.float32), np.zeros((6, 500), np.float32), batch_size=6, epochs=1, verbose=0)
    return (-model.trainable_variables[0].numpy().ravel() * divisor).tolist()


def clipped_update(strategy):
    """The noise-free update of one step on the same batch (the clipped sum / L, plus the weight
    regulariser's gradient, which must enter once per global step, not once per replica)."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 4)).astype(np.float32), rng.normal(size=(8, 3)).astype(np.float32)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, kernel_regularizer=keras.regularizers.L2(0.5))])
        model.compile(optimizer=keras.optimizers.SGD(1.0), loss=keras.losses.MeanSquaredError())
    before = [v.numpy().copy() for v in model.trainable_variables]
    install_dp_train_step(model, loss=keras.losses.MeanSquaredError(), l2_norm_clip=0.1, noise_multiplier=0.0,
                          divisor=4.0, clipping="fast_clipping")
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    return np.concatenate([(b - v.numpy()).ravel() for b, v in zip(before, model.trainable_variables)]).tolist()


def error_of(fn):
    try:
        fn()
    except (ValueError, TypeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


out["noise_two_replicas"] = noise_of_one_step(STRATEGY)
out["clipped_two_replicas"] = clipped_update(STRATEGY)
out["clipped_one_device"] = clipped_update(ONE)

# Poisson DP-SGD trains under the strategy with engine='auto' (tfdpmech's engine), one release
rng = np.random.default_rng(1)
x, y = rng.uniform(0, 1, (400, 10)).astype(np.float32), np.eye(3, dtype=np.float32)[rng.integers(3, size=400)]
dp = DPSGD(2.0, 1e-5, expected_batch_size=40, epochs=1, n=400, seed=0)
with STRATEGY.scope():
    model = dp.compile(keras.Sequential([keras.Input((10,)), keras.layers.Dense(3)]))
history = model.fit(dp.dataset(x, y), epochs=1, verbose=0)
out["poisson"] = {"engine": dp.engine, "releases": len(dp.ledger.releases), "steps": int(model.optimizer.iterations.numpy()),
                  "padded": dp.padded_batch_size, "loss_finite": bool(np.isfinite(history.history["loss"][-1]))}

# refused before any release: a batch that does not split across the replicas; tensorflow-privacy's engine
bad = ShuffledDPSGD(1.0, 1e-5, 25, 1, 100, engine="tfdpmech")
with STRATEGY.scope():
    out["odd_batch_error"] = error_of(lambda: bad.compile(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])))
out["odd_batch_releases"] = len(bad.ledger.releases)
if tf_privacy_available():
    tfp = DPSGD(1.0, 1e-5, expected_batch_size=10, epochs=1, n=100, engine="tensorflow_privacy")
    with STRATEGY.scope():
        out["tf_privacy_error"] = error_of(
            lambda: tfp.compile(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])))
    out["tf_privacy_releases"] = len(tfp.ledger.releases)
# one worker without TF_CONFIG: MultiWorkerMirroredStrategy needs the shared sampling seed, and fits only on dataset()
multi = tf.distribute.MultiWorkerMirroredStrategy()
mw = DPSGD(1.0, 1e-5, expected_batch_size=10, epochs=1, n=100, engine="tfdpmech")  # no seed
with multi.scope():
    mw_model = mw.compile(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]))
xs, ys = rng.uniform(0, 1, (100, 3)).astype(np.float32), np.eye(2, dtype=np.float32)[rng.integers(2, size=100)]
out["multiworker_seed_error"] = error_of(lambda: mw.dataset(xs, ys))
out["multiworker_fit_error"] = error_of(lambda: mw_model.fit(xs, ys, batch_size=32, epochs=1, verbose=0))
out["multiworker_releases"] = len(mw.ledger.releases)



# BandMF (bands=3): the same run on two replicas and on one device; several workers refused before any release
def bandmf_run(strategy):
    run = DPSGD(2.0, 1e-5, expected_batch_size=40, epochs=2, n=400, seed=0, bands=3, engine="tfdpmech")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        bandmf = run.compile(keras.Sequential([keras.Input((10,)), keras.layers.Dense(3)]))
    bandmf.fit(run.dataset(x, y), epochs=2, verbose=0)
    return {"weights": [w.tolist() for w in bandmf.get_weights()], "steps": int(bandmf.optimizer.iterations.numpy()),
            "mechanism": run.ledger.releases[0].mechanism}


out["bandmf_two_replicas"], out["bandmf_one_device"] = bandmf_run(STRATEGY), bandmf_run(ONE)
mw_band = DPSGD(1.0, 1e-5, expected_batch_size=10, epochs=1, n=100, engine="tfdpmech", seed=1, bands=3)
with multi.scope():
    out["multiworker_bandmf_error"] = error_of(
        lambda: mw_band.compile(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])))
out["multiworker_bandmf_releases"] = len(mw_band.ledger.releases)

with open(sys.argv[1], "w") as fh:
    json.dump(out, fh)
