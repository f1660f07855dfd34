"""Scale of the functional head's private step: wall time and peak memory per record, 10⁴ to 10⁶ records.

The private step is :meth:`tfdpmech.mechanisms.functional_head.FunctionalHead.fit` on a ``tf.data`` stream of feature
batches (statistics in one float64 pass, the one release, PSD projection, solve). Each size runs in a
fresh process (``python -m tfdpmech.experiments.scale_bench --one N``) so its peak resident memory is
its own; the synthetic features are generated inside the stream (``tf.random.stateless_uniform`` per
batch), so no array of n records exists anywhere and memory may stay flat. A second fresh process with
two logical devices (two GPUs when present) measures records/s under ``MirroredStrategy`` ÷ one device.

With a GPU present the pass runs under ``MirroredStrategy`` on the GPU(s) (per-replica float64 sums on the
device); on a CPU-only machine the one-process stream path runs on the host.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from .peak_rss import peak_rss_mib

SIZES = (10_000, 100_000, 1_000_000)
FEATURES, CLASSES, BATCH = 64, 10, 4096


def _stream(n: int, d: int = FEATURES, c: int = CLASSES, batch: int = BATCH):
    import tensorflow as tf

    def make(start):
        rows = tf.minimum(tf.cast(batch, tf.int64), n - start)
        seed = tf.stack([start, tf.constant(17, tf.int64)])
        x = tf.random.stateless_uniform(tf.stack([rows, d]), seed=seed, dtype=tf.float64)
        y = tf.random.stateless_uniform(tf.stack([rows]), seed=seed + 1, maxval=c, dtype=tf.int64)
        return x, y

    return tf.data.Dataset.range(0, n, batch).map(make).prefetch(2)


def one(n: int, devices: int = 0) -> dict:
    """The private step on ``n`` synthetic records in this process: seconds, records/s, peak memory.

    ``devices``: 0 picks by itself (a MirroredStrategy over the GPUs when present, else the host stream);
    1 or 2: MirroredStrategy over that many devices (GPUs if enough, else logical CPU devices, which must
    be configured before TensorFlow starts: :func:`run` does it in a fresh process).
    """
    import tensorflow as tf

    from ..mechanisms.functional_head import FunctionalHead

    gpus = tf.config.list_logical_devices("GPU")
    strategy = None
    where = "host (numpy float64)"
    if devices or gpus:
        k = devices or len(gpus)
        names = [g.name for g in gpus[:k]] if len(gpus) >= k else [c.name for c in tf.config.list_logical_devices("CPU")[:k]]
        strategy = tf.distribute.MirroredStrategy(names)
        where = f"MirroredStrategy over {', '.join(names)}"
    warm = FunctionalHead(None, CLASSES, mechanism="gaussian", epsilon=1.0, delta=1e-6, seed=0)
    warm.fit(_stream(2 * BATCH), strategy=strategy)  # traces and allocations outside the measurement
    before = peak_rss_mib()
    head = FunctionalHead(None, CLASSES, mechanism="gaussian", epsilon=1.0, delta=1e-6, seed=0)
    start = time.perf_counter()
    head.fit(_stream(n), strategy=strategy)
    seconds = time.perf_counter() - start
    assert head.n == n and len(head.ledger.releases) == 1
    return {"n": n, "seconds": seconds, "us_per_record": 1e6 * seconds / n, "records_per_s": n / seconds,
            "peak_rss_mb": peak_rss_mib(), "peak_rss_mb_before_pass": before, "where": where,
            "features": FEATURES, "classes": CLASSES}


def _fresh(args: list[str], timeout: float = 1800) -> dict:
    proc = subprocess.run([sys.executable, "-m", "tfdpmech.experiments.scale_bench", *args],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"scale benchmark process failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(sizes=SIZES, mirrored_n: int = 200_000) -> dict:
    """Every size in a fresh process, then records/s on 2 devices ÷ 1 device (fresh processes too)."""
    rows = [_fresh(["--one", str(n)]) for n in sizes]
    one_dev = _fresh(["--one", str(mirrored_n), "--devices", "1"])
    two_dev = _fresh(["--one", str(mirrored_n), "--devices", "2"])
    first, last = rows[0], rows[-1]
    return {
        "sizes": rows,
        "memory_ratio_largest_to_smallest": last["peak_rss_mb"] / first["peak_rss_mb"],
        "time_per_record_ratio_largest_to_smallest": last["us_per_record"] / first["us_per_record"],
        "mirrored": {"one_device": one_dev, "two_devices": two_dev,
                     "speedup_two_over_one": two_dev["records_per_s"] / one_dev["records_per_s"]},
    }


def format_table(out: dict) -> str:
    lines = ["| records | where | seconds | µs / record | peak RSS MB | peak RSS before the pass MB |",
             "|---:|---|---:|---:|---:|---:|"]
    for r in out["sizes"]:
        lines.append(f"| {r['n']:,} | {r['where']} | {r['seconds']:.2f} | {r['us_per_record']:.2f} | "
                     f"{r['peak_rss_mb']:.0f} | {r['peak_rss_mb_before_pass']:.0f} |")
    m = out["mirrored"]
    lines.append(f"\npeak memory {out['sizes'][-1]['n']:,} ÷ {out['sizes'][0]['n']:,} records: "
                 f"{out['memory_ratio_largest_to_smallest']:.3f}×; time per record: "
                 f"{out['time_per_record_ratio_largest_to_smallest']:.3f}×")
    lines.append(f"MirroredStrategy, {m['one_device']['n']:,} records: {m['one_device']['records_per_s']:,.0f} records/s "
                 f"on 1 device ({m['one_device']['where']}), {m['two_devices']['records_per_s']:,.0f} on 2 "
                 f"({m['two_devices']['where']}): ×{m['speedup_two_over_one']:.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", type=int, help="run one size in this process and print its JSON")
    parser.add_argument("--devices", type=int, default=0)
    args = parser.parse_args(argv)
    if args.one:
        if args.devices > 1:
            import tensorflow as tf

            if len(tf.config.list_physical_devices("GPU")) < args.devices:  # before TensorFlow initialises them
                cpu = tf.config.list_physical_devices("CPU")[0]
                tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * args.devices)
        print(json.dumps(one(args.one, args.devices)))
        return 0
    out = run()
    print(format_table(out))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
