"""One worker of the two-process DP-SGD tests (run by tests/mechanisms/dpsgd/test_multiworker.py; TF_CONFIG set by the test).

Usage: python _multiworker_worker.py MODE OUT
MODE: "train" (noise-free Poisson and shuffled runs, then the noise of one step), "kill_before" (worker 1 exits
after compile, before fit) or "kill_during" (worker 1 exits when its input pipeline reaches global step 7 of 8).
OUT: where this process writes its JSON result.
"""

import json
import os
import sys

import keras
import numpy as np
import tensorflow as tf

import tfdpmech.mechanisms.dpsgd.runs.run_engines as engines
from tfdpmech.distribute import is_chief
from tfdpmech.mechanisms.dpsgd import ShuffledDPSGD, OptimizerSettings, DPSGD

# the test module imports this one for its data, model and seed: the command line is read only when run
MODE, OUT = (sys.argv[1], sys.argv[2]) if __name__ == "__main__" else (None, None)
SEED = 1234  # the shared sampling seed


def noise_off(install):
    """tfdpmech's train step with σ = 0: the update is the clipped sum / L, comparable exactly."""
    def without_noise(model, **kwargs):
        return install(model, **dict(kwargs, noise_multiplier=0.0))
    return without_noise


def data(n=64, d=10, c=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (n, d)).astype(np.float32), np.eye(c, dtype=np.float32)[rng.integers(c, size=n)]


def initial_weights(d=10, c=3):
    rng = np.random.default_rng(5)
    return [rng.normal(size=(d, c)), rng.normal(size=(c,))]


def small_model():
    # float64 stated on the layer: Keras 3 keeps the dtype policy of the first layer a process built
    model = keras.Sequential([keras.Input((10,), dtype="float64"), keras.layers.Dense(3, dtype="float64")])
    model.set_weights(initial_weights())
    return model


def trained(dp, strategy, x, y, **fit):
    with strategy.scope():
        model = dp.compile(small_model())
    model.fit(dp.dataset(x, y, **fit), epochs=dp.epochs, verbose=0)
    return {"weights": [w.tolist() for w in model.get_weights()], "steps": int(model.optimizer.iterations.numpy()),
            "releases": len(dp.ledger.releases), "epsilon": sum(r.epsilon_provable for r in dp.ledger.releases)}


def main():
    keras.backend.set_floatx("float64")
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=20)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    worker = strategy.cluster_resolver.task_id
    result = {"replicas": strategy.num_replicas_in_sync, "chief": is_chief(strategy)}
    x, y = data()
    if MODE == "train":
        install = engines.install_dp_train_step
        engines.install_dp_train_step = noise_off(install)
        result["poisson"] = trained(DPSGD(2.0, 1e-5, expected_batch_size=16, epochs=1, n=64, seed=SEED,
                                                 optimizer=OptimizerSettings("sgd", learning_rate=0.5),
                                                 engine="tfdpmech"),
                                    strategy, x, y)
        result["shuffled"] = trained(ShuffledDPSGD(2.0, 1e-5, 16, 1, 64, optimizer=OptimizerSettings("sgd", learning_rate=0.5)),
                                     strategy, x, y, seed=SEED)
        engines.install_dp_train_step = install
        # the noise of one global step: zero inputs, so the update is -noise / L alone
        dp = DPSGD(None, 1e-5, sampling_probability=1.0, epochs=1, n=6, noise_multiplier=1.7,
                          l2_norm_clip=0.3, optimizer=OptimizerSettings("sgd", learning_rate=1.0), seed=SEED)
        with strategy.scope():
            model = dp.compile(keras.Sequential([keras.Input((4,)), keras.layers.Dense(2000, use_bias=False,
                                                                                      kernel_initializer="zeros")]),
                               loss=keras.losses.MeanSquaredError())
        model.fit(dp.dataset(np.zeros((6, 4), np.float32), np.zeros((6, 2000), np.float32)), epochs=1, verbose=0)
        result["noise"] = (-model.get_weights()[0].ravel() * dp.expected_batch_size).tolist()
        result["noise_releases"] = len(dp.ledger.releases)
    else:
        dp = DPSGD(2.0, 1e-5, expected_batch_size=16, epochs=2, n=64, seed=SEED, engine="tfdpmech")
        with strategy.scope():
            model = dp.compile(small_model())
        if MODE == "kill_before" and worker == 1:
            os._exit(3)  # lost after compile, before training
        ds = dp.dataset(x, y)
        if MODE == "kill_during" and worker == 1:
            batch = dp.shared_batches.batch

            def dying(step):  # exits abruptly when its pipeline reaches global step 7 (of 8)
                if step >= 7:
                    os._exit(3)
                return batch(step)

            dp.shared_batches.batch = dying
        try:
            model.fit(ds, epochs=dp.epochs, verbose=0)
            result["steps"] = int(model.optimizer.iterations.numpy())
        except Exception as exc:  # noqa: BLE001 - reported to the test
            result["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            result["steps"] = int(model.optimizer.iterations.numpy())
        result["releases"] = len(dp.ledger.releases)
        result["epsilon"] = sum(r.epsilon_provable for r in dp.ledger.releases)
    with open(OUT + ".tmp", "w") as fh:
        json.dump(result, fh)
    os.replace(OUT + ".tmp", OUT)
    sys.stdout.flush()
    os._exit(0)  # skip the collective teardown of a cluster that may have lost a member


if __name__ == "__main__":
    main()
