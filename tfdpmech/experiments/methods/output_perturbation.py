"""Output perturbation in the runner: Lu et al.'s per-query modes, and the proven head.

``outpert_reference`` / ``outpert_paper_bound``: a convexified MLP trained without noise, noisy
answers (Lu et al.). Their ε is spent on every answered query (``per="query"``); the runner's
accuracy is an evaluation harness in which every test row is one query at ε (not charged to a
budget). Neither is proven: the sensitivity Δz_T they are calibrated with is not a bound for an MLP.

``outpert_head``: output perturbation that is proven (Chaudhuri, Monteleoni & Sarwate 2011): a
one-vs-rest L2-regularised logistic regression on the public model's bounded features, noise on its
weights once, then any number of queries (:class:`~tfdpmech.mechanisms.output_perturbation.OutputPerturbationHead`).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from ...accounting.ledger import PrivacyLedger
from ...mechanisms.output_perturbation import OutputPerturbationHead
from ...accounting.query_budget import QueryBudgetAccountant
from ...mechanisms.output_perturbation import DPPredictor, compute_bounds
from ...models import convexified_mlp
from ..registry import Build, register_mechanism
from .functional_head import public_head, scatter_head

L2 = 0.001  # Lu et al. Table 4


def _query_time(mode: str):
    """``build`` of Lu et al.'s query-time mechanism: the convexified MLP (trained by the runner, no noise)
    answers through :class:`DPPredictor`; the ledger is one answered query (every test row is one)."""
    def build(ctx, epsilon, seed) -> Build:
        flat = ctx.x_private.reshape(ctx.n_private, -1)
        model = convexified_mlp(flat.shape[1], ctx.num_classes, l2=L2, learning_rate=ctx.config.learning_rate)
        # the bounds read the architecture, the L2 coefficient and n, not the weights (Lu et al. Eq. 15, 18–21)
        bounds = compute_bounds(model, n_train=len(flat))
        predictor = DPPredictor(model, bounds, QueryBudgetAccountant(epsilon, max_queries=1), noise="laplace",
                                mode=mode, seed=seed + 1)

        def predict_proba(x):
            with predictor.evaluation_mode():
                return predictor.predict_proba(np.reshape(x, (len(x), -1)))

        train = (tf.data.Dataset.from_tensor_slices((flat, ctx.y_private))
                 .shuffle(len(flat), seed=seed).batch(ctx.config.batch_size))
        return Build(predictor, notes={"queries_per_answer": 1},
                     prepared={"model": model, "train": train, "epochs": None, "predict_proba": predict_proba,
                               "ledger": PrivacyLedger([predictor.release(1)])})
    return build


register_mechanism("outpert_reference", _query_time("reference"),
                   "Lu et al. Algorithm 1 (one noisy output neuron per query, Laplace): ε per query, claimed only "
                   "(its sensitivity argument does not cover three or more classes: "
                   "docs/mechanisms/output_perturbation.md)",
                   mode="reference", paper="output_perturbation", data=("image", "tabular"), options=())
register_mechanism("outpert_paper_bound", _query_time("private"),
                   "output perturbation with Laplace noise on every logit, calibrated with Lu et al.'s Δz_T "
                   "(Eq. 18–19): ε per query, claimed only — Δz_T is not a bound for an MLP, so none proven "
                   "(docs/mechanisms/output_perturbation.md); the proven variant is outpert_head",
                   mode="reference", paper="output_perturbation", data=("image", "tabular"), options=())
_SOLVED = {"training": "L-BFGS + Newton to the exact minimiser, noise on the weights once (no epochs)"}
register_mechanism("outpert_head",
                   public_head(OutputPerturbationHead, delta=lambda ctx: ctx.config.delta, training=_SOLVED),
                   "output perturbation that is proven (Chaudhuri, Monteleoni & Sarwate 2011, Corollary 8): "
                   "one-vs-rest L2-regularised logistic regression on the public model's bounded features mapped to "
                   "the unit sphere, solved to the minimiser, Gaussian noise on the weights once (σ from "
                   "dp_accounting for the K classes together); then any number of queries: (ε, δ) proven",
                   mode="private", paper="output_perturbation", uses_public=True, options=())
register_mechanism("outpert_head_scatter", scatter_head(OutputPerturbationHead, training=_SOLVED),
                   "outpert_head (Chaudhuri et al. 2011, proven) on data-independent scattering features (those "
                   "of fm_head_scatter, projected to 512 dimensions) instead of a public model's: no public data; "
                   "(ε, δ) proven",
                   mode="private", paper="output_perturbation",
                   requires=(("tfdpmech.features.kymatio_compat", "pip install 'tfdpmech[scatter]'"),), options=())
