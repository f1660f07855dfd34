"""Memory of one DP-SGD step: does ``physical_batch_size`` bound it, whatever the logical batch?

For each model (:data:`tfdpmech.experiments.dpsgd_speed.MODELS`: the ``keras.applications`` networks at 32×32×3
among them) and each number of rows, a fresh process builds the model, traces the ghost-norm clipped sum
(:func:`~tfdpmech.mechanisms.dpsgd.clipping.chunked_clipping.chunked_clipped_gradient_sum`) once on two rows
for any number of rows, then runs it on a batch of that many rows, whole (``chunk`` none) and ``chunk`` rows at a
time, and reports the peak growth of the process RSS over that one step
(:class:`~tfdpmech.experiments.measuring.PeakMemory`: the kernel's high-water mark on Linux, after glibc has
returned what the trace freed). Without chunks the step holds every row's activations and taps at once; with them,
one chunk's at a time, plus the batch itself and the running sum.

    python -m tfdpmech.experiments.step_memory --models mobilenet_v2,efficientnet_b0,resnet50 --rows 32,128 \\
        --chunk 16 --out docs/results/applications_memory
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import keras
import numpy as np
import tensorflow as tf

from ..validation import check_positive_int
from .measuring import PeakMemory, device_description

__all__ = ["clipped_step_peak_bytes", "step_peak_bytes", "run", "main"]


def clipped_step_peak_bytes(model, x, y, chunk: int | None, loss=None) -> int:
    """In this process: the RSS growth over one ghost-norm clipped-sum step of ``model`` on all of ``x``, ``y``,
    ``chunk`` rows at a time (None: whole), after a trace that serves any number of rows."""
    from ..mechanisms.dpsgd.clipping.chunked_clipping import chunked_clipped_gradient_sum  # noqa: PLC0415
    from ..mechanisms.dpsgd.clipping.clipped_sums import per_example_loss  # noqa: PLC0415

    loss = per_example_loss(loss or keras.losses.CategoricalCrossentropy(from_logits=True))
    x, y = np.asarray(x), np.asarray(y)
    signature = [tf.TensorSpec((None, *x.shape[1:]), x.dtype), tf.TensorSpec((None, *y.shape[1:]), y.dtype),
                 tf.TensorSpec((None,), tf.float32)]
    step = tf.function(lambda a, b, w: chunked_clipped_gradient_sum(model, loss, a, b, w, 1.0, "fast_clipping",
                                                                    chunk)[0], input_signature=signature)
    # traced once, for any number of rows, on two: what the allocator keeps of the trace's own run stays small, so
    # the step's growth is its own (a trace on the measured batch would leave that batch's memory resident)
    step(x[:2], y[:2], np.ones(min(len(x), 2), np.float32))
    with PeakMemory(interval=0.002) as memory:
        step(x, y, np.ones(len(x), np.float32))
    return int(memory.peak_bytes)


def step_peak_bytes(model_name: str, rows: int, chunk: int | None) -> int:
    """:func:`clipped_step_peak_bytes` of a :data:`~tfdpmech.experiments.dpsgd_speed.MODELS` model on ``rows``
    random records."""
    from .dpsgd_speed import MODELS, _batch  # noqa: PLC0415

    spec = MODELS[model_name]
    keras.utils.set_random_seed(0)
    x, y, _ = _batch(spec, rows)
    return clipped_step_peak_bytes(spec.build(), x, y, chunk)


def _in_fresh_process(model_name: str, rows: int, chunk: int | None) -> int:
    code = (f"from tfdpmech.experiments.step_memory import step_peak_bytes; "
            f"print(step_peak_bytes({model_name!r}, {rows}, {chunk}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{model_name} at {rows} rows (chunk {chunk}) failed:\n{done.stderr[-3000:]}")
    return int(done.stdout.split()[-1])


def run(models, rows=(64, 256), chunk: int = 16, log=print) -> dict:
    """``{model: {rows: {"whole": bytes, "chunked": bytes}}}``, each value from its own fresh process.

    Raises:
        ValueError / TypeError: no model, a model the speed benchmark does not build, rows or chunk not ints >= 1
            (before any process starts).
    """
    from .dpsgd_speed import MODELS  # noqa: PLC0415

    models = list(models)
    unknown = [m for m in models if m not in MODELS]
    if not models or unknown:
        raise ValueError(f"models must name at least one of {', '.join(MODELS)}; got {models!r} (unknown: {unknown})")
    rows = [check_positive_int(r, "rows") for r in rows]
    if not rows:
        raise ValueError("rows must hold at least one batch size, e.g. rows=(64, 256)")
    chunk = check_positive_int(chunk, "chunk")
    result = {"device": device_description(), "chunk": chunk, "rows": list(rows), "models": {}}
    for name in models:
        table = {}
        for r in rows:
            table[str(r)] = {"whole": _in_fresh_process(name, r, None), "chunked": _in_fresh_process(name, r, chunk)}
            log(f"  {name}, {r} rows: whole {table[str(r)]['whole'] / 2**20:.0f} MiB, chunks of {chunk} "
                f"{table[str(r)]['chunked'] / 2**20:.0f} MiB")
        result["models"][name] = table
    return result


def markdown(result: dict, command: str) -> str:
    chunk, rows = result["chunk"], result["rows"]
    lines = ["# Memory of one DP-SGD step", "", f"Command: `{command}`. {result['device']}. `results.json` beside this "
             "file holds every number.", "",
             "Peak growth of the process RSS over one ghost-norm clipped-sum step (MiB), the batch whole and "
             f"`physical_batch_size={chunk}` (the kernel's high-water mark on Linux), each in a fresh process after the "
             "step was traced on two rows.", "",
             "| model | " + " | ".join(f"{r} rows, whole | {r} rows, chunks of {chunk}" for r in rows) + " |",
             "|---|" + "---|---|" * len(rows)]
    for name, table in result["models"].items():
        cells = [f"{table[str(r)]['whole'] / 2**20:.0f} | {table[str(r)]['chunked'] / 2**20:.0f}" for r in rows]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tfdpmech.experiments.step_memory", description=__doc__)
    parser.add_argument("--models", default="mobilenet_v2,efficientnet_b0,resnet50")
    parser.add_argument("--rows", default="64,256", help="comma-separated batch sizes")
    parser.add_argument("--chunk", type=int, default=16, help="physical_batch_size")
    parser.add_argument("--out", default=None, help="folder for results.json and results.md")
    args = parser.parse_args(argv)
    result = run([m for m in args.models.split(",") if m], [int(r) for r in args.rows.split(",")], args.chunk)
    command = "python -m tfdpmech.experiments.step_memory " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(result, command)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.json"), "w") as fh:
            json.dump(result, fh, indent=2)
        with open(os.path.join(args.out, "results.md"), "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
