"""The audits the runner can run after each training, by name: membership inference and the canary audit.

:data:`AUDITS` maps a name to an :class:`Audit`; :func:`register_audit` adds one. ``"mia"``: the
membership-inference attacks; ``"canary"``: the one-run canary audit (Steinke, Nasr & Jagielski 2023).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import keras
import numpy as np

from ..audit.canary_run import audit_one_run, canary_count, run_canaries
from ..data_tabular import TabularConfig
from .context import Context
from .registry import Method, Prepared

__all__ = ["Audit", "AUDITS", "register_audit"]


@dataclasses.dataclass(frozen=True)
class Audit:
    """An audit run after each training: ``run(ctx, method, epsilon, seed, prepared) -> dict | None``.

    ``field`` is the RunResult field it fills; ``status(config, ctx)`` says whether it can run
    (``"run"``) or why not; ``floor(ctx)`` optionally measures what it reads on signal-free data.
    """

    name: str
    field: str
    run: Callable
    status: Callable = lambda config, ctx: "run"
    floor: Callable | None = None


AUDITS: dict[str, Audit] = {}


def register_audit(audit: Audit) -> None:
    AUDITS[audit.name] = audit


def _mia_members(ctx: Context) -> int:
    return min(len(ctx.x_private), len(ctx.x_test))


def _mia_status(config, ctx) -> str:
    from ..audit.mia_run import mia_attacks_available

    return ("run" if mia_attacks_available() else
            "the membership-inference attacks need tensorflow-privacy or scikit-learn: pip install scikit-learn")


def _mia_run(ctx: Context, method: Method, epsilon, seed, prepared: Prepared) -> float:
    """The threshold and logistic-regression attacks (tensorflow-privacy's where it imports, else
    tfdpmech's scikit-learn ones): the larger advantage.

    Members: the first ``len(x_test)`` private records; non-members: the test set.
    """
    from ..audit.mia_run import run_mia_attacks

    m = _mia_members(ctx)
    attacks = run_mia_attacks(prepared.probabilities(ctx.x_private[:m]), prepared.probabilities(ctx.x_test),
                              ctx.y_private[:m], ctx.y_test, seed=seed)
    return max(a["advantage"] for a in attacks.values())


def _mia_floor(ctx: Context) -> dict:
    from ..audit.mia_run import mia_attack_floor

    return mia_attack_floor(_mia_members(ctx), len(ctx.x_test), ctx.num_classes)


register_audit(Audit("mia", "mia_advantage", _mia_run, _mia_status, _mia_floor))


# The one-run canary audit (Steinke, Nasr & Jagielski 2023; tfdpmech.audit.canary_run): one extra training
# per run with m canaries, each added to the private set with probability ½, exactly as a user would.
def _canaries(ctx: Context):
    def radius() -> float:  # R of the tabular feature ball
        return TabularConfig(**getattr(ctx.config, "tabular", {}) or {}).feature_norm_bound

    return run_canaries(ctx.kind, ctx.x_private.shape[1:], ctx.num_classes, canary_count(ctx.config), radius=radius)


def _canary_run(ctx: Context, method: Method, epsilon, seed, prepared: Prepared) -> dict | None:
    """Train ``method`` once more on the private set plus the included canaries; score; bound ε
    (:func:`~tfdpmech.audit.canary_run.audit_one_run`). None when that training diverged."""

    def train(x_in, y_in):
        audited = dataclasses.replace(ctx, x_private=np.concatenate([ctx.x_private, x_in]),
                                      y_private=np.concatenate([ctx.y_private, y_in]))
        keras.utils.set_random_seed(seed)
        run = method.prepare(audited, epsilon, seed)
        epochs = run.epochs or ctx.config.epochs
        run.train_for(epochs, list(run.callbacks))
        return run.probabilities, lambda: 0.0 if run.ledger is None else float(run.ledger.delta(epochs))

    return audit_one_run(train, *_canaries(ctx), seed)


register_audit(Audit("canary", "canary", _canary_run))
