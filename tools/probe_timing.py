"""Compile time and clipping path of ``keras.applications`` networks under DP-SGD, for several initialisations.

For each network (``weights=None``, 32×32×3, 10 classes, BatchNormalization replaced by
``tfdpmech.replace_batch_norm``) and each seed, in a fresh process per network: build it under
``keras.utils.set_random_seed(seed)``, then time ``make_private(model, DPSGD(...))`` + ``compile`` (the checks
before any release: the batch-dependence probe and the ghost-norm probe) and record the clipping path it
chose. Writes ``<out>/probe.md`` and ``probe.json``; each finished (network, seed) is appended to
``<out>/runs.jsonl`` as it ends and not run again, so the tool resumes.

    python tools/probe_timing.py [--models MobileNetV2,EfficientNetB0,ResNet50] [--seeds 10] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "results", "probe_timing")
MODELS = ("MobileNetV2", "EfficientNetB0", "ResNet50")
OPTIONS = {"MobileNetV2": {"alpha": 0.35}}


def _one(name: str, seed: int) -> dict:
    """Build, make private and compile one network; its compile seconds and path (run in a child process)."""
    import keras  # noqa: PLC0415

    import tfdpmech  # noqa: PLC0415

    keras.utils.set_random_seed(seed)
    model = getattr(keras.applications, name)(weights=None, input_shape=(32, 32, 3), classes=10,
                                              classifier_activation=None, **OPTIONS.get(name, {}))
    model = tfdpmech.replace_batch_norm(model, verbose=False)
    dp = tfdpmech.DPSGD(epsilon=1.0, delta=1e-5, n=1000, expected_batch_size=32, epochs=1)
    start = time.perf_counter()
    tfdpmech.make_private(model, dp).compile(optimizer="sgd",
                                             loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    return {"model": name, "seed": seed, "layers": len(model.layers), "weights": int(model.count_params()),
            "compile_seconds": time.perf_counter() - start, "path": dp.path}


def _child(name: str, seeds: list[int], out: str) -> None:
    for seed in seeds:
        row = _one(name, seed)
        with open(os.path.join(out, "runs.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        print(f"{name} seed {seed}: {row['compile_seconds']:.1f} s, path {row['path']}", flush=True)


def _stored(out: str) -> list[dict]:
    path = os.path.join(out, "runs.jsonl")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def report(rows: list[dict], models, seeds: int) -> str:
    lines = ["# Compile time and clipping path of keras.applications networks under DP-SGD", "",
             "`python tools/probe_timing.py` (32×32×3, 10 classes, `weights=None`, BatchNormalization replaced by "
             "`tfdpmech.replace_batch_norm`; one process per network; the time of `make_private` + `compile`, which "
             f"runs every check before a release, for seeds 0–{seeds - 1}). Machine: {os.cpu_count()} CPU cores.", "",
             "| network | layers | weights | seeds | compile s, median (min–max) | paths chosen |",
             "|---|---:|---:|---:|---|---|"]
    for name in models:
        mine = [r for r in rows if r["model"] == name]
        if not mine:
            continue
        times = [r["compile_seconds"] for r in mine]
        paths = sorted({r["path"] for r in mine})
        lines.append(f"| {name} | {mine[0]['layers']} | {mine[0]['weights']:,} | {len(mine)} | "
                     f"{statistics.median(times):.1f} ({min(times):.1f}–{max(times):.1f}) | {', '.join(paths)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    models = [m for m in args.models.split(",") if m]
    os.makedirs(args.out, exist_ok=True)
    if args.child:
        _child(args.child, [int(s) for s in args.models.split(",")], args.out)
        return 0
    for name in models:
        done = {r["seed"] for r in _stored(args.out) if r["model"] == name}
        todo = [s for s in range(args.seeds) if s not in done]
        if todo:
            subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, "--models",
                            ",".join(map(str, todo)), "--out", args.out], check=True)
    rows = [r for r in _stored(args.out) if r["model"] in models and r["seed"] < args.seeds]
    with open(os.path.join(args.out, "probe.json"), "w", encoding="utf-8") as f:
        json.dump(rows, f, indent=1)
    text = report(rows, models, args.seeds)
    with open(os.path.join(args.out, "probe.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
