"""The functional-mechanism head in the runner, and the public model alone.

Every method here takes its features from ``ctx.public_model(seed)`` — the comparison's
private-family network trained on the public records only — cut at its bounded last hidden
layer (``hidden_clip``: a ``UnitClip`` in [0, 1]), and touches the private records once, through
the head's one release (Zhang et al., PVLDB 2012; docs/mechanisms/functional_head.md).
"""

from __future__ import annotations

import time

from ...features import public_features, scatter_features
from ...heads import FunctionalHead
from ..registry import Prepared, register_method

FEATURE_LAYER = "hidden_clip"  # the bounded last hidden layer of every private-family model


def _features(ctx, seed):
    ctx.require_public("the functional head")
    return public_features(ctx.public_model(seed), FEATURE_LAYER, trained_on=ctx.x_public,
                           description=f"public data: {ctx.public_source}")


def _public_only(ctx, epsilon, seed) -> Prepared:
    model = ctx.public_model(seed)  # trained once per seed, as for every public method: reported beside, not here
    # no mechanism runs (mode "none", no ledger); the private records are never used, so nothing about them
    # is released: the row is read as "what the public data alone give"
    return Prepared(model, preprocessing_seconds=0.0, epochs=1,
                    notes={"public": ctx.public_source, "public_records": len(ctx.x_public),
                           "private_records_used": 0})


def _head(mechanism: str):
    def prepare(ctx, epsilon, seed) -> Prepared:
        feats = _features(ctx, seed)  # the public model is trained (and cached) here, outside the private timing
        start = time.perf_counter()
        head = FunctionalHead(feats, ctx.num_classes, mechanism=mechanism, epsilon=epsilon,
                              delta=ctx.config.delta if mechanism == "gaussian" else None, seed=seed)
        head.prepare(x=ctx.x_private, y=ctx.y_private)  # the one release; the model is trained
        seconds = time.perf_counter() - start
        release = head.release
        return Prepared(head.model, ledger=head.ledger, preprocessing_seconds=seconds, epochs=1,
                        notes={"public": ctx.public_source, "features": feats.name,
                               "noise_scale": release.noise_scale, "sensitivity": release.sensitivity,
                               "ridge": head.ridge, "private_seconds": seconds,
                               "features_seconds": head.seconds["features"],
                               "statistics_release_solve_seconds": head.seconds["statistics_release_solve"],
                               "training": "closed form on the released statistics (no epochs)"})
    return prepare


def _scatter_head(ctx, epsilon, seed) -> Prepared:
    """The Gaussian head on data-independent scattering features: no public data at all."""
    feats = scatter_features(tuple(ctx.x_private.shape[1:]), seed=seed)  # ε = 0: fixed filters, seeded projection
    start = time.perf_counter()
    head = FunctionalHead(feats, ctx.num_classes, mechanism="gaussian", epsilon=epsilon, delta=ctx.config.delta,
                          seed=seed)
    head.prepare(x=ctx.x_private, y=ctx.y_private)
    seconds = time.perf_counter() - start  # the scattering of the private set included
    return Prepared(head.model, ledger=head.ledger, preprocessing_seconds=seconds, epochs=1,
                    notes={"features": feats.name, "noise_scale": head.release.noise_scale,
                           "sensitivity": head.release.sensitivity, "ridge": head.ridge, "private_seconds": seconds,
                           "features_seconds": head.seconds["features"],
                           "statistics_release_solve_seconds": head.seconds["statistics_release_solve"],
                           "training": "closed form on the released statistics (no epochs)"})


register_method("public_only", _public_only,
                "the public model alone (trained on the public records only; ε = 0 for the private set): what the "
                "private data add is read against it", mode="none", takes_epsilon=False, uses_public=True)
register_method("fm_head", _head("laplace"),
                "functional-mechanism head (Zhang et al. PVLDB 2012) on the public model's bounded features: "
                "(S1, S2) summed over the private set, Laplace noise once (pure ε), closed form: proven",
                mode="private", uses_public=True)
register_method("fm_head_gauss", _head("gaussian"),
                "functional-mechanism head with Gaussian noise once (features clipped to unit norm, σ from "
                "dp_accounting): (ε, δ) proven", mode="private", uses_public=True)
register_method("fm_head_scatter", _scatter_head,
                "functional-mechanism head (Gaussian) on data-independent features: the 2-D scattering transform "
                "(Tramèr & Boneh 2021, kymatio, J = 2) and a fixed 512-dim random projection; no public data; (ε, δ) "
                "proven", mode="private", requires=(("tfdpmech.features.kymatio_compat", "pip install 'tfdpmech[scatter]'"),))
register_method("adlm_private", _head("laplace"),
                "AdLM provable mode: Algorithm 1's loss-coefficient release (lines 16–19) done soundly — summed over "
                "the private set, once, on the public relevance model's bounded hidden layer; Steps 1–2 unused, so "
                "it coincides with ilm_private (and AFRRS's private head): proven", mode="private", paper="adlm",
                uses_public=True)
register_method("ilm_private", _head("laplace"),
                "ILM provable mode: the same head as adlm_private (allocation only matters for the unused "
                "first-layer release, so ILM, AdLM and AFRRS coincide here): proven", mode="private", paper="ilm",
                uses_public=True)

__all__ = ["FEATURE_LAYER"]
