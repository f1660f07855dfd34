"""The public model's weights kept beside a resumable comparison's runs.

A comparison with ``resume`` on may be trained over several processes (it is stopped and started again). Were each
process to train the public model again, the rows of one seed could start from different public models (training
on a CPU with several threads need not give the same weights twice). With ``resume`` on, the first
process saves the trained weights (and the seconds they took) to ``<out>/parts/public-<key>.npz``; every later
process of the same comparison loads them. The key covers what makes the model: the data kind, the family and its
arguments, the seed, the recipe, the public records' fingerprints, the model's layer classes and weight shapes and the
Keras version. Public records only: nothing private is saved here, so a committed report keeps its public models
(``docs/results/<preset>/parts/public-*.npz``) and a preset resumed on another machine starts from the same ones.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import keras
import numpy as np

from .run_parts import PARTS_FOLDER

__all__ = ["public_weights_path", "load_public_weights", "save_public_weights"]


def public_weights_path(out, key: tuple, model: keras.Model) -> Path:
    """Where the public model of ``key`` (built as ``model``) is kept in the comparison folder ``out``."""
    # layer classes and weight shapes, not the configuration: its names count up within a process
    structure = [(type(layer).__name__, [tuple(w.shape) for w in layer.weights]) for layer in model.layers]
    digest = hashlib.sha1(repr((key, structure, keras.__version__)).encode()).hexdigest()[:20]
    return Path(out) / PARTS_FOLDER / f"public-{digest}.npz"


def load_public_weights(path: Path, model: keras.Model) -> float | None:
    """Put the kept weights into ``model`` and return their training seconds; ``None`` when none fit it."""
    if not path.exists():
        return None
    with np.load(path) as kept:
        weights = [kept[f"w{i}"] for i in range(int(kept["count"]))]
        seconds = float(kept["seconds"])
    if [w.shape for w in weights] != [tuple(v.shape) for v in model.weights]:
        return None
    model.set_weights(weights)
    return seconds


def save_public_weights(path: Path, model: keras.Model, seconds: float) -> None:
    """Keep ``model``'s weights at ``path`` (written whole, then renamed: a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    weights = model.get_weights()
    partial = path.with_name(path.stem + ".partial.npz")
    np.savez(partial, count=len(weights), seconds=seconds, **{f"w{i}": w for i, w in enumerate(weights)})
    os.replace(partial, path)
