"""One process of the distributed functional-head tests (run by tests/mechanisms/functional_head/test_distributed.py).

Usage: python _distributed_worker.py MODE OUT [KILL_AT]
MODE: "mirrored2" (MirroredStrategy over 2 logical CPU devices) or "multiworker" (TF_CONFIG set by the
test). OUT: where this process writes its JSON result. KILL_AT: this process exits abruptly when its input
pipeline reaches that record index (a worker lost mid-pass).
"""

import json
import os
import sys

import numpy as np
import tensorflow as tf

MODE, OUT = sys.argv[1], sys.argv[2]
KILL_AT = int(sys.argv[3]) if len(sys.argv) > 3 else -1

if MODE == "mirrored2":  # before TensorFlow initialises its devices
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

from tfdpmech.mechanisms.functional_head import FunctionalHead  # noqa: E402


def data(n=2500, d=6, c=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 1, (n, d)), rng.integers(c, size=n)


def main():
    if MODE == "mirrored2":
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    else:
        options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=20)
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    x, y = data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(97)
    if KILL_AT >= 0:
        seen = {"n": 0}

        def count(xb):  # in this worker's input pipeline: exit abruptly when the pass reaches KILL_AT
            seen["n"] += len(xb)
            if seen["n"] > KILL_AT:
                os._exit(3)
            return np.int64(0)

        ds = ds.map(lambda xb, yb: (xb + tf.cast(tf.numpy_function(count, [xb], tf.int64), xb.dtype), yb))
    result = {"replicas": strategy.num_replicas_in_sync}
    head = FunctionalHead(None, 4, mechanism=os.environ.get("MECH", "gaussian"),
                          delta=1e-5 if os.environ.get("MECH", "gaussian") == "gaussian" else None,
                          epsilon=1.0, seed=7)
    try:
        head.fit(ds, strategy=strategy)
        stats = head.statistics()
        result.update(s1_bar=stats["s1_bar"].tolist(), s2_bar=stats["s2_bar"].tolist(), n=int(head.n),
                      kernel=head.kernel.tolist())
    except Exception as exc:  # noqa: BLE001 - reported to the test
        result["error"] = f"{type(exc).__name__}: {exc}"[:2000]
    result["releases"] = [r.component for r in head.ledger.releases]
    result["epsilon_spent"] = float(sum(r.epsilon_provable or 0.0 for r in head.ledger.releases))
    with open(OUT + ".tmp", "w") as fh:
        json.dump(result, fh)
    os.replace(OUT + ".tmp", OUT)
    sys.stdout.flush()
    os._exit(0)  # skip the collective teardown of a cluster that may have lost a member


if __name__ == "__main__":
    main()
