"""AdLM and ILM (Phan et al., Algorithm 1) in the runner: the per-record private mode and the
authors'-code reference mode."""

from __future__ import annotations

import time

from ...mechanisms import AdLM, ILM
from ...mechanisms.adlm.reference import CODE_PATH
from ...mechanisms.adlm.reference_steps import train_relevance_model
from ...mechanisms.afrrs import AFRRS, DEFAULT_GAMMA
from ..registry import Prepared, register_method

_CLASSES = {"adlm": AdLM, "ilm": ILM, "afrrs": AFRRS}


def _relevance_model(ctx, seed):
    """The LeNet-5 relevance model of the authors' code, trained on the public records only (cached per seed)."""
    key = ("lenet5_relevance", seed)
    if key not in ctx._public_models:
        ctx.require_public("the reference mode's relevance model")
        ctx._public_models[key] = train_relevance_model(ctx.x_public, ctx.y_public, seed=seed)
    return ctx._public_models[key]


def reference_prepare(kind: str):
    """``prepare`` of ``<kind>_reference``: the authors' MNIST code path (AdLM.py), claimed, none proven.

    One run trains ``epochs`` passes of ``n // batch_size`` steps at the comparison's batch size.
    """
    def prepare(ctx, epsilon, seed) -> Prepared:
        if tuple(ctx.x_private.shape[1:]) != (28, 28, 1):
            raise ValueError(f"{kind}_reference runs the authors' MNIST code path, which needs 28x28x1 images; "
                             f"{ctx.dataset} has {tuple(ctx.x_private.shape[1:])}")
        start = time.perf_counter()
        batch = min(ctx.config.batch_size, ctx.n_private)
        kwargs = {"gamma": float(ctx.config.options.get("gamma", DEFAULT_GAMMA))} if kind == "afrrs" else {}
        ref = _CLASSES[kind].from_total(epsilon, batch, mode="reference", seed=seed, **kwargs)
        run = ref.prepare(x=ctx.x_private, y=ctx.y_private,
                          relevance_model=None if kind == "ilm" else _relevance_model(ctx, seed))
        per_epoch = ctx.n_private // batch

        def fit(epochs, callbacks):  # epochs · (n // batch) steps of the authors' loop
            run.fit(epochs, callbacks)
            return run.model

        notes = {"code_path": CODE_PATH, "batch_size": batch, "steps_per_epoch": per_epoch}
        notes.update({k: v for k, v in ref.relevance_details.items() if isinstance(v, (int, float, str))})
        return Prepared(None, ledger=ref.ledger, fit=fit, predict_proba=ref.predict_proba,
                        preprocessing_seconds=time.perf_counter() - start, examples_per_epoch=per_epoch * batch,
                        notes=notes)
    return prepare


def _per_record(cls, noise_mode: str):
    def prepare(ctx, epsilon, seed) -> Prepared:
        start = time.perf_counter()
        mech = cls.from_total(epsilon, ctx.config.batch_size, seed=seed, noise_mode=noise_mode)
        relevance_model = None
        if mech.allocation_name == "relevance":  # Algorithm 1 Step 1 on public data only
            ctx.require_public(cls.__name__)
            relevance_model = ctx.public_model(seed)
        # the mechanism contract; batches of exactly |L|: the n mod |L| records left over by each shuffle sit
        # out (recorded in the ledger)
        run = mech.prepare(ctx.build("private", input_noise=noise_mode == "shared_per_step"), ctx.x_private,
                           ctx.y_private, relevance_model=relevance_model, optimizer=ctx.optimizer(), metrics=(),
                           drop_remainder=True, shuffle_seed=seed, verbose=0)
        n = len(ctx.x_private)
        return Prepared(run.model, run.data, mech.ledger, run.callbacks,
                        preprocessing_seconds=time.perf_counter() - start,
                        examples_per_epoch=n // ctx.config.batch_size * ctx.config.batch_size,
                        notes={"noise_mode": noise_mode})
    return prepare


register_method("adlm_per_record", _per_record(AdLM, "per_example_frozen"),
                "AdLM (Phan et al. Algorithm 1) with the noise drawn once per record: proven per record, "
                "needs Laplace scales of hundreds of pixel ranges", mode="private", paper="adlm", uses_public=True)
register_method("ilm_per_record", _per_record(ILM, "per_example_frozen"),
                "ILM (Phan et al. §5, uniform allocation) with the noise drawn once per record: proven per record",
                mode="private", paper="ilm")
register_method("adlm_shared", _per_record(AdLM, "shared_frozen"),
                "AdLM with one noise draw shared by all records, on this package's network (an ablation of the noise "
                "schedule; the authors' code path is adlm_reference): claimed, none proven", mode="reference",
                paper="adlm", uses_public=True)
register_method("adlm_reference", reference_prepare("adlm"),
                "AdLM as the authors' public MNIST code trains it (one noise map per step shared by the batch, clean "
                "labels, batch-statistics batch norm; Phan et al. Fig. 4): claimed, none proven", mode="reference",
                paper="adlm", uses_public=True)
register_method("ilm_reference", reference_prepare("ilm"),
                "ILM (uniform noise) on the authors' public MNIST code path: claimed, none proven", mode="reference",
                paper="ilm")
