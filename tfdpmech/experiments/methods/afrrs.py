"""AFRRS (Wang et al.) in the runner: the reference mode (AdLM's code path with AFRRS's allocation) and
the per-record private mode. The provable head mode (``afrrs_private``) perturbs no input features, so
no allocation applies there; it belongs to the functional-mechanism head."""

from __future__ import annotations

import time

from ...mechanisms.afrrs import AFRRS, DEFAULT_GAMMA
from ..registry import Prepared, register_method
from .adlm import reference_prepare


def _per_record(ctx, epsilon, seed) -> Prepared:
    start = time.perf_counter()
    gamma = float(ctx.config.options.get("gamma", DEFAULT_GAMMA))
    mech = AFRRS.from_total(epsilon, ctx.config.batch_size, gamma=gamma, seed=seed)
    ctx.require_public("afrrs_per_record")
    mech.fit_relevance(ctx.public_model(seed), ctx.x_private, ctx.y_private)  # relevance model: public data only
    model = ctx.build("private")
    data = mech.perturb(ctx.x_private, ctx.y_private, model)
    model.compile(ctx.optimizer(), loss=mech.loss())
    seg = mech.allocation().summary()
    return Prepared(model, data.to_dataset(seed=seed), mech.ledger, [mech.callback(model, verbose=0)],
                    preprocessing_seconds=time.perf_counter() - start,
                    examples_per_epoch=data.n // ctx.config.batch_size * ctx.config.batch_size,
                    notes={"gamma": gamma, "regions": seg["n_regions"]})


register_method("afrrs_reference", reference_prepare("afrrs"),
                "AFRRS (Wang et al., Algorithm 2, Table 3) on the AdLM authors' code path with AFRRS's region "
                "budgets (AFRRS has no public code): claimed, none proven", mode="reference", paper="afrrs",
                uses_public=True)
register_method("afrrs_per_record", _per_record,
                "AFRRS's region budgets (Algorithm 1, Eqs. 14-15) in AdLM's Algorithm 1 with the noise drawn once "
                "per record: proven per record", mode="private", paper="afrrs", uses_public=True)
