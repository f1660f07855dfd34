"""A DP-SGD epoch of MobileNetV2 in chunks of 256 records, with glibc's malloc defaults and with tfdpmech's training
settings (:mod:`tfdpmech.cpu_malloc`, applied when tfdpmech is imported).

The finetune preset's step (``tfdpmech.models.mobilenet_v2_gn``, 28×28×1, Adam, expected batch 256 of 1,024 records,
``physical_batch_size=256``): each setting (``TFDPMECH_MALLOC=default`` or unset; no ``GLIBC_TUNABLES``, no
``LD_PRELOAD``) in its own fresh process, the two alternating ``--repeats`` times; a process traces and
fits one epoch untimed, then times ``--epochs`` epochs of four steps, with the process's user and system CPU seconds
and its minor page faults. Writes ``<out>/large_chunks.md`` and ``large_chunks.json``.

    python tools/cpu_allocator_speed.py [--repeats 2] [--epochs 2] [--out docs/results/cpu_allocator]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = ("glibc_defaults", "training_settings")


def _child(epochs: int) -> None:
    import resource  # noqa: PLC0415
    import time  # noqa: PLC0415

    import keras  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    import tfdpmech  # noqa: PLC0415

    keras.utils.set_random_seed(0)
    n = 1024
    rng = np.random.default_rng(0)
    x, y = rng.random((n, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, n)
    model = tfdpmech.make_private(tfdpmech.models.mobilenet_v2_gn(), tfdpmech.DPSGD(
        epsilon=1.0, delta=1e-5, n=n, expected_batch_size=256, epochs=epochs + 1, physical_batch_size=256, seed=0))
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, epochs=1, verbose=0)  # the trace
    rows = []
    for _ in range(epochs):
        before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        model.fit(x, y, epochs=1, verbose=0)
        after = resource.getrusage(resource.RUSAGE_SELF)
        rows.append({"wall_s": time.perf_counter() - start, "user_s": after.ru_utime - before.ru_utime,
                     "system_s": after.ru_stime - before.ru_stime, "minor_faults": after.ru_minflt - before.ru_minflt})
    print(json.dumps(rows))


def _measure(setting: str, epochs: int) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "LD_PRELOAD", "TFDPMECH_MALLOC")}
    if setting == "glibc_defaults":
        env["TFDPMECH_MALLOC"] = "default"
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", str(epochs)], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def report(rows: dict, command: str) -> str:
    lines = ["# A DP-SGD epoch of MobileNetV2 in chunks of 256 records: glibc's malloc defaults and tfdpmech's "
             "training settings", "", f"Command: `{command}`; {os.cpu_count()} CPU cores. One epoch = 4 Poisson steps of "
             "expected 256 records (1,024 records), clipped 256 at a time; median [min–max] over every timed epoch "
             "of every process.", "",
             "| malloc | epochs timed | wall s | user CPU s | system CPU s | minor page faults |",
             "|---|---:|---|---|---|---|"]
    for setting in SETTINGS:
        epochs = rows[setting]

        def cell(key, fmt="{:.1f}"):
            values = [e[key] for e in epochs]
            return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}–{fmt.format(max(values))}]"

        lines.append(f"| {setting.replace('_', ' ')} | {len(epochs)} | {cell('wall_s')} | {cell('user_s')} | "
                     f"{cell('system_s')} | {cell('minor_faults', '{:,.0f}')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "results", "cpu_allocator"))
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        _child(args.child)
        return 0
    for name in ("repeats", "epochs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}={getattr(args, name)}: give at least 1")
    rows = {setting: [] for setting in SETTINGS}
    for repeat in range(args.repeats):
        for setting in SETTINGS:
            rows[setting].extend(_measure(setting, args.epochs))
            print(f"repeat {repeat + 1}/{args.repeats} {setting}: {rows[setting][-args.epochs:]}", flush=True)
    command = "python tools/cpu_allocator_speed.py " + " ".join(argv if argv is not None else sys.argv[1:])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "large_chunks.json"), "w", encoding="utf-8") as fh:
        json.dump(rows, fh, indent=2)
    with open(os.path.join(args.out, "large_chunks.md"), "w", encoding="utf-8") as fh:
        fh.write(report(rows, command.strip()))
    print(report(rows, command.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
