"""The functional-mechanism head in the runner, and the public model alone.

Every head here takes its features from ``ctx.public_model(seed)`` — the comparison's
private-family network trained on the public records only — cut at its bounded last hidden
layer (``hidden_clip``: a ``UnitClip`` in [0, 1]), and touches the private records once, through
the head's one release (Zhang et al., PVLDB 2012; docs/mechanisms/functional_head.md).
``fm_head_scatter`` takes data-independent scattering features instead (no public data).
"""

from __future__ import annotations

from ...features import public_features, scatter_features
from ...mechanisms.functional_head import FunctionalHead
from ..registry import Build, Prepared, register_mechanism, register_method
from ..options import option_at

FEATURE_LAYER = "hidden_clip"  # the bounded last hidden layer of every private-family model

CLOSED_FORM = {"training": "closed form on the released statistics (no epochs)"}


def public_head_features(ctx, seed):
    """The public model's bounded features (the heads' input), trained once per seed on the public records."""
    ctx.require_public("the functional head")
    return public_features(ctx.public_model(seed), FEATURE_LAYER, trained_on=ctx.x_public,
                           description=f"public data: {ctx.public_source}")


def public_head(head_class, training: dict = CLOSED_FORM, **options):
    """``build`` of a closed-form head on the public model's features (``options`` go to the head; a callable
    one is read from the context)."""
    def build(ctx, epsilon, seed) -> Build:
        feats = public_head_features(ctx, seed)
        kwargs = {key: value(ctx) if callable(value) else value for key, value in options.items()}
        head = head_class(feats, ctx.num_classes, epsilon=epsilon, seed=seed, **kwargs)
        notes = {"public": ctx.public_source, "features": feats.name, **training}
        return Build(head, x=ctx.x_private, y=ctx.y_private, notes=notes)
    return build


SCATTER_UNITS = 512  # the projection's dimension unless the option ``scatter_units`` ({ε: units} or units) says


def scatter_head(head_class, training: dict = CLOSED_FORM, units_option: str | None = None, **options):
    """``build`` of a closed-form Gaussian head on data-independent scattering features: no public data at all.
    ``units_option`` names the option that sets the projection's dimension (None: always ``SCATTER_UNITS``)."""
    def build(ctx, epsilon, seed) -> Build:
        units = SCATTER_UNITS if units_option is None else option_at(ctx.config.options, epsilon, units_option,
                                                                      SCATTER_UNITS)
        # ε = 0: fixed filters, a seeded projection whose dimension is a setting, not a statistic of the data
        feats = scatter_features(tuple(ctx.x_private.shape[1:]), units=units, seed=seed)
        head = head_class(feats, ctx.num_classes, epsilon=epsilon, delta=ctx.config.delta, seed=seed, **options)
        return Build(head, x=ctx.x_private, y=ctx.y_private, notes={"features": feats.name, **training})
    return build


def _public_only(ctx, epsilon, seed) -> Prepared:
    model = ctx.public_model(seed)  # trained once per seed, as for every public method: reported beside, not here
    # no mechanism runs (mode "none", no ledger); the private records are never used, so nothing about them
    # is released: the row is read as "what the public data alone give"
    return Prepared(model, preprocessing_seconds=0.0, epochs=1,
                    notes={"public": ctx.public_source, "public_records": len(ctx.x_public),
                           "private_records_used": 0})


register_method("public_only", _public_only,
                "the public model alone (trained on the public records only; ε = 0 for the private set): what the "
                "private data add is read against it", mode="none", takes_epsilon=False, uses_public=True, options=(),
                data=("image", "text"))
register_mechanism(
    "fm_head", public_head(FunctionalHead, mechanism="laplace"),
    "functional-mechanism head (Zhang et al. PVLDB 2012) on the public model's bounded features: (S1, S2) summed "
    "over the private set, Laplace noise once (pure ε), closed form: proven", mode="private", uses_public=True)
register_mechanism(
    "fm_head_gauss", public_head(FunctionalHead, mechanism="gaussian", delta=lambda ctx: ctx.config.delta),
    "functional-mechanism head with Gaussian noise once (features clipped to unit norm, σ from dp_accounting): "
    "(ε, δ) proven", mode="private", uses_public=True)
register_mechanism(
    "fm_head_scatter", scatter_head(FunctionalHead, units_option="scatter_units", mechanism="gaussian"),
    "functional-mechanism head (Gaussian) on data-independent features: the 2-D scattering transform (Tramèr & "
    "Boneh 2021, kymatio, J = 2) and a fixed random projection (512 dimensions unless the option scatter_units "
    "says); no public data; (ε, δ) proven",
    mode="private", requires=(("tfdpmech.features.kymatio_compat", "pip install 'tfdpmech[scatter]'"),),
    options=("scatter_units",))

__all__ = ["FEATURE_LAYER", "SCATTER_UNITS", "public_head", "scatter_head"]
