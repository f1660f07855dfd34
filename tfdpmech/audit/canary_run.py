"""The one-run canary audit of a comparison run (Steinke, Nasr & Jagielski 2023, Algorithm 1 and Theorem 3).

One extra training per run with m canaries (:data:`CANARY_COUNT` unless the comparison says
otherwise), each added to the private set with probability ½, and the method trained exactly as a
user would. The canaries are the same for every method (seeded by :data:`CANARY_SEED`); the
membership is drawn per run seed. Score: the log-probability of the canary's label in the method's
answers (:func:`~tfdpmech.audit.canary_scores.loss_scores`); guesses: k₊ = k₋ = m/4
(:data:`~tfdpmech.audit.canary.DEFAULT_K`); δ: the audited run's own δ (0 for pure-ε ledgers).
The runner (:mod:`tfdpmech.experiments.runner`) supplies the training.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .canaries import ball_canaries, noise_canaries
from .canary import audit_scores, draw_membership
from .canary_scores import loss_scores

__all__ = ["CANARY_COUNT", "CANARY_SEED", "canary_count", "run_canaries", "audit_one_run"]

CANARY_COUNT = 1000
CANARY_SEED = 2023  # the same canaries for every method; membership is drawn per run seed


def canary_count(config) -> int:
    """m: ``options["canaries"]`` of the comparison, else :data:`CANARY_COUNT`."""
    return int((getattr(config, "options", {}) or {}).get("canaries", CANARY_COUNT))


def run_canaries(kind: str, record_shape: tuple, num_classes: int, m: int, *,
                 radius: Callable[[], float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The m canaries of a comparison run: uniform-noise images with random labels, in the [0, 1] pixel
    domain (``kind="image"``), else random rows of the public feature ball ‖x‖ <= R of the DP-ERM
    datasets, with R given by ``radius()``."""
    if kind == "image":
        return noise_canaries(m, record_shape, num_classes=num_classes, seed=CANARY_SEED)
    return ball_canaries(m, record_shape[0], radius=radius(), num_classes=num_classes, seed=CANARY_SEED)


def audit_one_run(train: Callable, x_canary: np.ndarray, y_canary: np.ndarray, seed: int) -> dict | None:
    """Draw the canaries' membership for run ``seed``, train once with the included ones, score and bound ε.

    Args:
        train: ``train(x_in, y_in) -> (predict_proba, delta)``: trains the method on the private set
            plus the canaries ``x_in, y_in`` and returns its answers (x → class probabilities) and
            a function without arguments giving the trained run's δ.
        x_canary, y_canary: the m canaries (:func:`run_canaries`).
        seed: the run's seed.

    Returns:
        The ``canary`` field of the run's result (:meth:`~tfdpmech.audit.canary.CanaryAudit.as_record`),
        or None when that training diverged (non-finite answers).
    """
    member = draw_membership(len(x_canary), np.random.default_rng((seed, CANARY_SEED)))
    predict_proba, delta = train(x_canary[member], y_canary[member])
    probabilities = predict_proba(x_canary)
    if not np.isfinite(probabilities).all():
        return None
    return audit_scores(loss_scores(probabilities, y_canary), member, delta=delta()).as_record()
