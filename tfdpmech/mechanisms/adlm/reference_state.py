"""A reference-mode run saved at any step, so that a run stopped part-way resumes as if never stopped.

The authors' MNIST code trains 80,001 steps (``AdLM.py:105-108``); at batch 1,800 that is hours on a
CPU. :class:`RunState` keeps, in one ``.npz`` written whole (a temporary file, then a rename), everything
the next step depends on:

- the network's variables (weights, batch-norm statistics) and the optimiser's (Adam's step count and
  moments, its learning rate);
- the per-step noise generator's state (``tf.random.Generator``: every later noise map);
- the batch sampler's permutation, position and numpy ``bit_generator.state`` (every later batch);
- the step reached, the evaluations so far (the accuracy curve) and the run's settings.

The once-drawn noise (β's Laplace draw, the weight-space noise N) is drawn again from the same seed when
the run is prepared again; its fingerprints are stored and compared, so a resumed run never mixes
another draw into the saved one. A resume whose settings differ from the saved run's raises ValueError
naming the setting. Beside the state, ``<name>.curve.jsonl`` gets one line per evaluation as it happens
(for reading while the run trains); the state's copy of the curve is the one a resumed run keeps.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import tensorflow as tf

from ...released_data import array_fingerprint

__all__ = ["RunState", "run_settings", "noise_fingerprints"]

STATE_VERSION = 1
_FIX = ("run with the saved run's settings to continue it, or remove {path} (and its .curve.jsonl) to start "
        "this run afresh")


def run_settings(ref, x, y, eval_every: int) -> dict:
    """What makes two runs the same run: the mechanism, its budgets and recipe, the seed, the records."""
    settings = {"mechanism": type(ref).__name__, "allocation": ref._allocation_name(), "eps1": ref.eps1,
                "eps2": ref.eps2, "eps3": ref.eps3, "batch_size": ref.batch_size, "learning_rate": ref.learning_rate,
                "hidden_units": ref.hidden_units, "delta2": ref.delta2, "eval_every": eval_every, "seed": ref.seed,
                "n": len(x), "x": array_fingerprint(x), "y": array_fingerprint(y)}
    for name in ("gamma", "n_regions"):  # AFRRS's segmentation
        if hasattr(ref, name):
            settings[name] = getattr(ref, name)
    return settings


def noise_fingerprints(ref) -> dict:
    """The once-drawn noise of a built run: the input-noise scales (β) and the weight-space noise N."""
    return {"scales": array_fingerprint(np.asarray(ref.scales, np.float64)),
            "weight_noise": array_fingerprint(np.asarray(ref.weight_noise, np.float64))}


def _variables(ref) -> tuple[list, list]:
    ref.optimizer.build(ref.model.trainable_variables)  # Adam's moments exist before they are restored
    return list(ref.model.variables), list(ref.optimizer.variables)


class RunState:
    """The saved state of one reference run at ``path`` (``.npz``); see the module's docstring."""

    def __init__(self, path):
        self.path = Path(path)
        if self.path.suffix != ".npz":
            raise ValueError(f"state_path={str(path)!r} must end in .npz")
        self.curve_path = self.path.with_suffix(".curve.jsonl")

    def load(self) -> dict | None:
        """The saved state (``meta`` and the arrays), or None when there is none."""
        if not self.path.exists():
            return None
        with np.load(self.path, allow_pickle=False) as saved:
            arrays = {name: saved[name] for name in saved.files}
        meta = json.loads(str(arrays.pop("meta")))
        if meta.get("version") != STATE_VERSION:
            raise ValueError(f"{self.path} is a state of version {meta.get('version')}, this package writes "
                             f"{STATE_VERSION}; " + _FIX.format(path=self.path))
        return {"meta": meta, "arrays": arrays}

    def check(self, saved: dict, settings: dict, steps: int) -> None:
        """ValueError naming the first setting where this run differs from the saved one, or ``steps``
        when the saved run is already past them (a run cannot be resumed backwards)."""
        stored = saved["meta"]["settings"]
        for name in sorted(set(stored) | set(settings)):
            if stored.get(name) != settings.get(name):
                what = "the training records" if name in ("x", "y", "n") else name
                raise ValueError(f"{what} differs from the saved run's: {name}={settings.get(name)!r} here, "
                                 f"{stored.get(name)!r} in {self.path}; " + _FIX.format(path=self.path))
        done = saved["meta"]["step"]
        if done > steps:
            raise ValueError(f"steps={steps} is below the {done} steps the saved run in {self.path} has trained; "
                             f"pass steps >= {done} to continue it, or remove {self.path} to start this run afresh")

    def check_noise(self, saved: dict, ref) -> None:
        """ValueError when the run drew other once-only noise than the saved one (another seed or relevance)."""
        now = noise_fingerprints(ref)
        for name, value in saved["meta"]["noise"].items():
            if now.get(name) != value:
                raise ValueError(f"the once-drawn noise ({name}) differs from the saved run's in {self.path} (another "
                                 "relevance model or seed); " + _FIX.format(path=self.path))

    def restore(self, saved: dict, ref, sampler) -> dict:
        """Put the saved variables, generator and batch order back into the built ``ref``; returns the history."""
        arrays, meta = saved["arrays"], saved["meta"]
        model_vars, opt_vars = _variables(ref)
        for prefix, variables in (("m", model_vars), ("o", opt_vars)):
            if meta[f"{prefix}_count"] != len(variables):
                raise ValueError(f"{self.path} holds {meta[f'{prefix}_count']} variables where this run has "
                                 f"{len(variables)}; " + _FIX.format(path=self.path))
            for i, variable in enumerate(variables):
                variable.assign(arrays[f"{prefix}{i}"])
        ref.generator.reset(tf.constant(arrays["generator"], ref.generator.state.dtype))  # the next noise map
        sampler.set_state({"perm": arrays["perm"], "pos": meta["pos"], "rng": meta["rng"]})  # the next batch
        return meta["history"]

    def save(self, ref, sampler, step: int, history: dict, settings: dict) -> None:
        """Write the whole state at ``step`` at once: a kill mid-write leaves the previous state."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        model_vars, opt_vars = _variables(ref)
        batches = sampler.state()
        meta = {"version": STATE_VERSION, "step": int(step), "settings": settings, "noise": noise_fingerprints(ref),
                "history": history, "pos": batches["pos"], "rng": batches["rng"],
                "m_count": len(model_vars), "o_count": len(opt_vars)}
        arrays = {f"m{i}": np.asarray(v.numpy()) for i, v in enumerate(model_vars)}
        arrays.update({f"o{i}": np.asarray(v.numpy()) for i, v in enumerate(opt_vars)})
        partial = self.path.with_suffix(".partial.npz")
        with open(partial, "wb") as fh:
            np.savez(fh, meta=np.array(json.dumps(meta)), generator=ref.generator.state.numpy(),
                     perm=batches["perm"], **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(partial, self.path)

    def write_curve(self, history: dict) -> None:
        """Rewrite ``.curve.jsonl`` from ``history`` (a fresh or resumed run starts from what the state holds)."""
        self.curve_path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.curve_path.with_suffix(".partial")
        with open(partial, "w", encoding="utf-8") as fh:
            for i in range(len(history["step"])):
                fh.write(json.dumps(_evaluation(history, i)) + "\n")
        os.replace(partial, self.curve_path)

    def append_curve(self, history: dict) -> None:
        """Append the last evaluation of ``history`` to ``.curve.jsonl``, flushed to disk."""
        with open(self.curve_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(_evaluation(history, -1)) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def _evaluation(history: dict, i: int) -> dict:
    return {key: history[key][i] for key in ("step", "accuracy", "validation_accuracy", "loss") if key in history}
