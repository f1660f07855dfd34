"""The training loop of the reference modes (``AdLM.py:271-294``), resumable at any step.

:meth:`~tfdpmech.mechanisms.adlm.reference.AdLMReference.fit` checks its arguments and calls
:func:`train_steps`: build the run, put a saved state back (:mod:`.reference_state`), then take the
steps left, one batch (:class:`~.reference_steps.BatchSampler`) and one noise map per step, evaluating
every ``eval_every`` steps on the clean test images (and on a validation set when one is given), each in
one batch as the code does (``AdLM.py:285-294``), and saving the state after each evaluation.
"""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf

from .reference_state import RunState, run_settings
from .reference_steps import BatchSampler, to_code_range

__all__ = ["train_steps"]


def _keep_on_grid(history: dict, eval_every: int) -> dict:
    """Drop the evaluations a shorter run made at its own last step (off the ``eval_every`` grid): the
    continued run's curve is the one an unbroken run of its length would have."""
    keep = [i for i, s in enumerate(history["step"]) if s % eval_every == 0]
    for key in ("step", "accuracy", "validation_accuracy", "loss", "interval_seconds"):
        if key in history:
            history[key] = [history[key][i] for i in keep]
    return history


def train_steps(ref, x, y, *, steps: int, eval_every: int, x_test=None, y_test=None, x_val=None, y_val=None,
                state_path=None, callback=None, callbacks=(), per_epoch: int = 1, verbose: int = 0) -> dict:
    """Train ``ref`` (checked arguments, see ``fit``) to ``steps``; returns its history.

    History: ``step``, ``accuracy`` (test), ``validation_accuracy`` (with ``x_val``), ``loss`` (the last
    step's before each evaluation), ``interval_seconds`` (training seconds since the previous evaluation,
    evaluation excluded), ``part_starts`` (the step each process began at), ``seconds``, ``diverged``.
    """
    settings = run_settings(ref, x, y, eval_every)
    state = None if state_path is None else RunState(state_path)
    saved = None if state is None else state.load()
    if saved is not None:
        state.check(saved, settings, steps)  # before the training's budget is recorded
    ref.ratios(x.shape[1:3])  # raises before anything is spent if β is missing
    ref.build(y.shape[1], x.shape[1:])
    ref._record_training(len(x))
    ref._fitted = True
    xc = to_code_range(x)
    sampler = BatchSampler(len(xc), ref.batch_size, ref._rng)  # the generator left after build: the batch order
    evaluate = x_test is not None and y_test is not None
    validate = evaluate and x_val is not None and y_val is not None
    history = {"step": [], "accuracy": [], "loss": [], "interval_seconds": [], "part_starts": [], "seconds": 0.0}
    if validate:
        history["validation_accuracy"] = []
    done = 0
    if saved is not None:
        state.check_noise(saved, ref)
        history, done = state.restore(saved, ref, sampler), saved["meta"]["step"]
        if steps > done:
            history = _keep_on_grid(history, eval_every)
    history["part_starts"].append(done)
    ref.history = history
    before, start = history["seconds"], time.perf_counter()
    last = history["loss"][-1] if history["loss"] else None

    def log(step, seconds):
        history["step"].append(step)
        history["accuracy"].append(ref.evaluate(x_test, y_test))
        if validate:
            history["validation_accuracy"].append(ref.evaluate(x_val, y_val))
        history["loss"].append(last)
        history["interval_seconds"].append(seconds)
        if verbose:
            val = f"  validation {history['validation_accuracy'][-1]:.4f}" if validate else ""
            print(f"step {step:6d}  test accuracy {history['accuracy'][-1]:.4f}{val}  loss {last}  "
                  f"({before + time.perf_counter() - start:.0f}s)", flush=True)

    if evaluate and done == 0:
        log(0, 0.0)
        if callback is not None:
            callback(0, history["accuracy"][-1], last)
    if state is not None:
        state.write_curve(history)
    interval = time.perf_counter()
    for i in range(done + 1, steps + 1):
        if (i - 1) % per_epoch == 0:
            for cb in callbacks:
                cb.on_epoch_begin((i - 1) // per_epoch)
        idx = sampler.next()
        last = float(ref._step(tf.constant(xc[idx]), tf.constant(y[idx])))
        if i % eval_every == 0 or i == steps:
            trained = time.perf_counter() - interval
            if evaluate:
                log(i, trained)
            history["seconds"] = before + time.perf_counter() - start
            if state is not None:  # saved before anything can stop the run: a resume starts at step i
                state.save(ref, sampler, i, history, settings)
                if evaluate:
                    state.append_curve(history)
            if evaluate and callback is not None:
                callback(i, history["accuracy"][-1], last)
            interval = time.perf_counter()
        if i % per_epoch == 0 or i == steps:
            for cb in callbacks:
                cb.on_epoch_end((i - 1) // per_epoch)
    history["seconds"] = before + time.perf_counter() - start
    history["diverged"] = not all(np.isfinite(v) for v in history["loss"] + [last] if v is not None)
    return history
