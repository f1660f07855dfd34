"""What one method's runs trained with (batch size, epochs, optimiser steps), as the report states it."""

from __future__ import annotations

__all__ = ["run_setting"]


def run_setting(results: dict, method: str, *, only_own: bool = False) -> str:
    """``"batch 1000, 20 epochs, 1180 steps"`` for the first run of ``method`` ("" when there is none).

    The epochs are those that ran (one recorded time per epoch, ``seconds_per_epoch``), not the
    last point of the accuracy curve, which long runs sample every few epochs; the steps are those
    epochs times the run's ``steps_per_epoch``. A closed form (no epoch recorded) states none. With
    ``only_own``, "" also where the run used the comparison's shared batch size and epochs and
    states no steps (the report's header says them).
    """
    cfg = results["config"]
    run = next((r for r in results["runs"] if r["method"] == method), None)
    if run is None:
        return ""
    notes = run.get("notes") or {}
    batch = notes.get("batch_size")
    epochs = len(run.get("seconds_per_epoch") or ()) or None
    steps = epochs * notes["steps_per_epoch"] if epochs and notes.get("steps_per_epoch") else None
    if only_own and batch in (None, cfg["batch_size"]) and epochs in (None, cfg["epochs"]) and steps is None:
        return ""
    parts = [f"batch {batch}" if batch is not None else None,
             (f"{epochs} epoch" + ("s" if epochs != 1 else "")) if epochs is not None else None,
             f"{steps} steps" if steps is not None else None,
             f"{notes['pretrain_epochs']} pre-training epochs per layer" if notes.get("pretrain_epochs") else None]
    return ", ".join(p for p in parts if p)
