"""AdLM, ILM and AFRRS reference modes at the settings of the authors' MNIST code: the rows
``adlm_reference_authors``, ``ilm_reference_authors``, ``afrrs_reference_authors``
(preset ``mnist-papers-authors``).

The settings (``haiphanNJIT/PrivateDeepLearning@77fb357``, ``AdLM/MNIST/AdLM.py`` and ``input_data.py``;
``../shared/specs/authors_code_paths.md`` §1):

- batch 1,800 and Adam 3e-4 (``AdLM.py:94, 108, 272``): the comparison's ``batch_size`` and
  ``learning_rate``, which the preset sets to these;
- 80,001 steps (``AdLM.py:105-106``: ``int(60000/1800*2400 + 1)``, about 2,600 passes over the 55,000);
  ``options["steps"]`` (``--steps``) stops a run earlier;
- the training split: the first 5,000 training images are the validation set, the other 55,000 train
  (``input_data.py``: ``VALIDATION_SIZE = 5000``, ``train_images[:5000]``); the comparison's public
  records (the first ``public`` training images) must lie inside those 5,000, so with ``--public 1000``
  the relevance model is trained on the first 1,000 validation images and never on the 55,000;
- test accuracy on the 10,000 test images and validation accuracy on the 5,000, each in one batch as
  the code evaluates (``AdLM.py:285-294``), every ``options["eval_every"]`` steps (500; the code prints
  test accuracy every 165 steps, ``AdLM.py:284``, and chooses nothing on the validation set).

AFRRS has no public code: its rows run the AdLM code path and settings with AFRRS's region budgets.
With ``resume`` the run is saved every ``eval_every`` steps to ``<out>/parts/`` and continues from there
(:mod:`tfdpmech.mechanisms.adlm.reference_state`); the saved state outlives the stored run, so the same
command with a larger ``--steps`` continues the run. Ledger: claimed, none proven, as every reference row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...validation import check_step_count
from ..options import STEP_OPTIONS
from ..registry import Build, register_mechanism
from ..run_parts import PARTS_FOLDER
from .adlm import _REFERENCE_CLASSES, _gamma, _relevance_model

__all__ = ["CODE_STEPS", "CODE_BATCH", "CODE_LEARNING_RATE", "CODE_VALIDATION", "EVAL_EVERY", "authors_split"]

CODE_STEPS = 80_001  # AdLM.py:93-94, 105-106  T = int(D/L*epochs + 1), D = 60,000, L = 1,800, epochs = 2,400
CODE_BATCH = 1800  # AdLM.py:94  L = 1800
CODE_LEARNING_RATE = 3e-4  # AdLM.py:108, 272  AdamOptimizer(LR), LR = 3e-4; the decay schedule is unused
CODE_VALIDATION = 5000  # input_data.py  VALIDATION_SIZE = 5000: the first 5,000 training images
EVAL_EVERY = 500
_OPTIONS = ("gamma", "steps", "eval_every", "validation_size")  # the options these rows read (run_store keys)


def authors_split(ctx, validation_size: int = CODE_VALIDATION):
    """The code's split of the training images: ``(x_train, y_train, x_val, y_val)``.

    The first ``validation_size`` training images are the validation set: the public records (the
    first ``public``) and the private records after them; the rest of the private records train.
    """
    public = ctx.config.public
    if isinstance(public, bool) or not isinstance(public, int) or public > validation_size:
        raise ValueError(f"public={public!r}: the authors' settings hold the public records inside the "
                         f"{validation_size:,} validation images (the first training images); pass --public N with "
                         f"N <= {validation_size}")
    k = validation_size - public
    if ctx.n_private <= k:
        raise ValueError(f"{ctx.n_private} private records leave none to train once {k} join the validation set; "
                         "give more records or a smaller options validation_size")
    x_val = np.concatenate([ctx.x_public, ctx.x_private[:k]])
    y_val = np.concatenate([ctx.y_public, ctx.y_private[:k]])
    return ctx.x_private[k:], ctx.y_private[k:], x_val, y_val


def _state_path(ctx, name: str, epsilon, seed: int):
    """Where a resumable comparison keeps the run's state: one file per (dataset, row, ε, seed), whatever the
    steps, so that a longer run continues a shorter one."""
    if not ctx.config.resume:
        return None
    return str(Path(ctx.config.out) / PARTS_FOLDER / f"{ctx.dataset}-{name}-eps{epsilon:g}-seed{seed}.npz")


def _curve(ref, eval_every: int) -> dict:
    """The run's own evaluations for the runner (:meth:`~..measuring.EpochRecorder.adopt`): one "epoch" is
    ``eval_every`` steps; the seconds of full intervals, those that began a process marked (they trace)."""
    h = ref.history
    seconds, starts = [], []
    for i in range(1, len(h["step"])):
        prev, cur = h["step"][i - 1], h["step"][i]
        if cur - prev == eval_every:
            if any(prev <= p < cur for p in h["part_starts"]):
                starts.append(len(seconds))
            seconds.append(h["interval_seconds"][i])
    return {"epochs": [s / eval_every for s in h["step"]], "accuracy": list(h["accuracy"]), "seconds": seconds,
            "part_starts": starts, "train_seconds": h["seconds"]}


def authors_reference(kind: str):
    """``build`` of ``<kind>_reference_authors``: the authors' code path at its own settings; claimed, none proven."""
    name = f"{kind}_reference_authors"

    def build(ctx, epsilon, seed) -> Build:
        options = ctx.config.options or {}
        steps = check_step_count(options.get("steps", CODE_STEPS), "steps", STEP_OPTIONS["steps"])
        eval_every = check_step_count(options.get("eval_every", EVAL_EVERY), "eval_every", STEP_OPTIONS["eval_every"])
        if tuple(ctx.x_private.shape[1:]) != (28, 28, 1):
            raise ValueError(f"{name} runs the authors' MNIST code path, which needs 28x28x1 images; {ctx.dataset} "
                             f"has {tuple(ctx.x_private.shape[1:])}")
        validation_size = options.get("validation_size", CODE_VALIDATION)
        x, y, x_val, y_val = authors_split(ctx, validation_size)
        batch = ctx.config.batch_size
        ref = _REFERENCE_CLASSES[kind].from_total(epsilon, batch, seed=seed, learning_rate=ctx.config.learning_rate,
                                                  **(_gamma(ctx) if kind == "afrrs" else {}))
        relevance_model = None if kind == "ilm" else _relevance_model(ctx, seed)
        path = _state_path(ctx, name, epsilon, seed)
        fit_options = {"relevance_model": relevance_model, "steps": steps, "eval_every": eval_every,
                       "x_test": ctx.x_test, "y_test": ctx.y_test, "x_val": x_val, "y_val": y_val,
                       "state_path": path, "verbose": int(bool(ctx.config.verbose))}
        split = (f"{len(x):,} training images after the first {validation_size:,} (validation: the public "
                 f"{ctx.config.public:,} and the next {validation_size - ctx.config.public:,}); test: {len(ctx.x_test):,}")
        setting = {"steps": steps, "eval_every": eval_every, "learning_rate": ctx.config.learning_rate,
                   "steps_per_epoch": eval_every, "split": split, "state_file": path,
                   "settings": f"authors' code: batch {CODE_BATCH:,}, Adam {CODE_LEARNING_RATE:g}, {CODE_STEPS:,} steps"}

        def after_fit() -> dict:
            h = ref.history
            return {**ref.describe(), **setting, "curve_steps": list(h["step"]),
                    "validation_accuracy_curve": list(h.get("validation_accuracy", [])),
                    **({"trained_in_parts": len(h["part_starts"])} if len(h["part_starts"]) > 1 else {})}

        return Build(ref, None, x, y, fit_options, notes=setting,
                     prepared={"predict_proba": ref.predict_proba, "examples_per_epoch": eval_every * batch,
                               "curve": lambda: _curve(ref, eval_every), "notes_after_fit": after_fit})
    return build


_WHAT = ("on the authors' public MNIST code path at its own settings (batch 1,800, Adam 3e-4, 80,001 steps or "
         "--steps, the code's 55,000 / 5,000 split, accuracy every 500 steps; resumes at any step)")
register_mechanism("adlm_reference_authors", authors_reference("adlm"), f"AdLM {_WHAT}: claimed, none proven",
                   mode="reference", paper="adlm", uses_public=True, options=_OPTIONS)
register_mechanism("ilm_reference_authors", authors_reference("ilm"), f"ILM (uniform noise) {_WHAT}: claimed, none "
                   "proven", mode="reference", paper="ilm", options=_OPTIONS)
register_mechanism("afrrs_reference_authors", authors_reference("afrrs"), f"AFRRS's region budgets (no public code) "
                   f"{_WHAT}: claimed, none proven", mode="reference", paper="afrrs", uses_public=True,
                   options=_OPTIONS)
