"""AdLM, ILM and AFRRS (Phan et al., Algorithm 1; Wang et al.) in the runner: the per-record private
mode, the shared-noise ablation and the authors'-code reference mode.

The proven mode on public features (Algorithm 1's loss-coefficient release done once over the
private set) is the Laplace functional head: ``fm_head``.
"""

from __future__ import annotations

from ...mechanisms.adlm import AdLM, AdLMReference, ILM, ILMReference
from ...mechanisms.adlm.reference_steps import train_relevance_model
from ...mechanisms.afrrs import AFRRS, AFRRSReference, DEFAULT_GAMMA
from ..registry import Build, register_mechanism

_OPTIONS = ("gamma", "per_record_batch", "per_record_epochs")  # the options these rows read (run_store keys)
_CLASSES = {"adlm": AdLM, "ilm": ILM, "afrrs": AFRRS}
_REFERENCE_CLASSES = {"adlm": AdLMReference, "ilm": ILMReference, "afrrs": AFRRSReference}


def _gamma(ctx) -> dict:
    return {"gamma": ctx.config.options.get("gamma", DEFAULT_GAMMA)}


def _per_kind(ctx, option: str, kind: str, default):
    """``options[option]`` for this paper: an int for every kind, or ``{kind: int}`` (``default`` when absent)."""
    value = ctx.config.options.get(option, default)
    if isinstance(value, dict):
        value = value.get(kind, default)
    return value


def _relevance_model(ctx, seed):
    """The LeNet-5 relevance model of the authors' code, trained on the public records only (cached per seed)."""
    key = ("lenet5_relevance", seed)
    if key not in ctx._public_models:
        ctx.require_public("the reference mode's relevance model")
        ctx._public_models[key] = train_relevance_model(ctx.x_public, ctx.y_public, seed=seed)
    return ctx._public_models[key]


def reference(kind: str):
    """``build`` of ``<kind>_reference``: the authors' MNIST code path (AdLM.py), claimed, none proven.

    One run trains ``epochs`` passes of ``n // batch_size`` steps at the comparison's batch size.
    """
    def build(ctx, epsilon, seed) -> Build:
        if tuple(ctx.x_private.shape[1:]) != (28, 28, 1):
            raise ValueError(f"{kind}_reference runs the authors' MNIST code path, which needs 28x28x1 images; "
                             f"{ctx.dataset} has {tuple(ctx.x_private.shape[1:])}")
        batch = min(ctx.config.batch_size, ctx.n_private)
        ref = _REFERENCE_CLASSES[kind].from_total(epsilon, batch, seed=seed,
                                                  **(_gamma(ctx) if kind == "afrrs" else {}))
        relevance_model = None if kind == "ilm" else _relevance_model(ctx, seed)
        return Build(ref, None, ctx.x_private, ctx.y_private, {"relevance_model": relevance_model},
                     prepared={"predict_proba": ref.predict_proba,
                               "examples_per_epoch": ctx.n_private // batch * batch})
    return build


def per_record(kind: str, noise_mode: str = "per_example_frozen"):
    """``build`` of Algorithm 1 on this package's network; the relevance model (AdLM, AFRRS) is public only.

    Batch size and epochs are the comparison's unless ``options["per_record_batch"]`` /
    ``options["per_record_epochs"]`` set them (an int, or ``{"adlm" | "ilm" | "afrrs": int}``): the
    per-record ε grows with the batch size (:mod:`tfdpmech.mechanisms.adlm.per_record_budget`), so
    this mode needs smaller batches than the reference mode.
    """
    def build(ctx, epsilon, seed) -> Build:
        cls = _CLASSES[kind]
        batch = _per_kind(ctx, "per_record_batch", kind, ctx.config.batch_size)
        mech = cls.from_total(epsilon, batch, seed=seed, noise_mode=noise_mode,
                              **(_gamma(ctx) if kind == "afrrs" else {}))
        relevance_model = None
        if mech.allocation_name != "uniform":  # Algorithm 1 Step 1 on public data only
            ctx.require_public(cls.__name__)
            relevance_model = ctx.public_model(seed)
        # batches of exactly |L| (AdLM, ILM): the n mod |L| records left over by each shuffle sit out (in the ledger)
        options = dict(relevance_model=relevance_model, drop_remainder=kind != "afrrs", shuffle_seed=seed)
        model = ctx.build("private", input_noise=noise_mode == "shared_per_step")
        epochs = _per_kind(ctx, "per_record_epochs", kind, None)
        return Build(mech, model, ctx.x_private, ctx.y_private, options,
                     compile={"optimizer": ctx.optimizer(), "metrics": ()},
                     prepared={"examples_per_epoch": ctx.n_private // batch * batch,
                               **({"epochs": epochs} if epochs else {})})
    return build


register_mechanism("adlm_per_record", per_record("adlm"),
                   "AdLM (Phan et al. Algorithm 1) with the noise drawn once per record: proven per record, "
                   "needs Laplace scales of hundreds of pixel ranges", mode="private", paper="adlm", uses_public=True,
                   options=_OPTIONS)
register_mechanism("ilm_per_record", per_record("ilm"),
                   "ILM (Phan et al. §5, uniform allocation) with the noise drawn once per record: proven per record",
                   mode="private", paper="ilm", options=_OPTIONS)
register_mechanism("adlm_shared", per_record("adlm", "shared_frozen"),
                   "AdLM with one noise draw shared by all records, on this package's network (an ablation of the "
                   "noise schedule; the authors' code path is adlm_reference): claimed, none proven", mode="reference",
                   paper="adlm", uses_public=True, options=_OPTIONS)
register_mechanism("adlm_reference", reference("adlm"),
                   "AdLM as the authors' public MNIST code trains it (one noise map per step shared by the batch, "
                   "clean labels, batch-statistics batch norm; Phan et al. Fig. 4): claimed, none proven",
                   mode="reference", paper="adlm", uses_public=True, options=_OPTIONS)
register_mechanism("ilm_reference", reference("ilm"),
                   "ILM (uniform noise) on the authors' public MNIST code path: claimed, none proven", mode="reference",
                   paper="ilm", options=_OPTIONS)
register_mechanism("afrrs_reference", reference("afrrs"),
                   "AFRRS (Wang et al., Algorithm 2, Table 3) on the AdLM authors' code path with AFRRS's region "
                   "budgets (AFRRS has no public code): claimed, none proven", mode="reference", paper="afrrs",
                   uses_public=True, options=_OPTIONS)
register_mechanism("afrrs_per_record", per_record("afrrs"),
                   "AFRRS's region budgets (Algorithm 1, Eqs. 14-15) in AdLM's Algorithm 1 with the noise drawn once "
                   "per record: proven per record", mode="private", paper="afrrs", uses_public=True,
                   options=_OPTIONS)
