"""AdLM and ILM (Phan et al., Algorithm 1) in the runner: the per-record private mode."""

from __future__ import annotations

import time

from ...mechanisms import AdLM, ILM
from ..registry import Prepared, register_method


def _per_record(cls, noise_mode: str):
    def prepare(ctx, epsilon, seed) -> Prepared:
        start = time.perf_counter()
        mech = cls.from_total(epsilon, ctx.config.batch_size, seed=seed, noise_mode=noise_mode)
        if mech.allocation_name == "relevance":  # Algorithm 1 Step 1 on public data only
            ctx.require_public(cls.__name__)
            mech.fit_relevance(ctx.public_model(seed), ctx.x_private, ctx.y_private)
        model = ctx.build("private", input_noise=noise_mode == "shared_per_step")
        # batches of exactly |L|: the n mod |L| records left over by each shuffle sit out (recorded in the ledger)
        data = mech.perturb(ctx.x_private, ctx.y_private, model, drop_remainder=True)
        model.compile(ctx.optimizer(), loss=mech.loss())
        return Prepared(model, data.to_dataset(seed=seed), mech.ledger, [mech.callback(model, verbose=0)],
                        preprocessing_seconds=time.perf_counter() - start,
                        examples_per_epoch=data.n // ctx.config.batch_size * ctx.config.batch_size,
                        notes={"noise_mode": noise_mode})
    return prepare


register_method("adlm_per_record", _per_record(AdLM, "per_example_frozen"),
                "AdLM (Phan et al. Algorithm 1) with the noise drawn once per record: proven per record, "
                "needs Laplace scales of hundreds of pixel ranges", mode="private", paper="adlm", uses_public=True)
register_method("ilm_per_record", _per_record(ILM, "per_example_frozen"),
                "ILM (Phan et al. §5, uniform allocation) with the noise drawn once per record: proven per record",
                mode="private", paper="ilm")
register_method("adlm_shared", _per_record(AdLM, "shared_frozen"),
                "AdLM with one noise draw shared by all records (claimed; none proven: the shared draw gives no "
                "per-record guarantee)", mode="reference", paper="adlm", uses_public=True)
