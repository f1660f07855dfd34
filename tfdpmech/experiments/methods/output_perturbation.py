"""Output perturbation in the runner: Lu et al.'s per-query modes, and the proven head.

``outpert_reference`` / ``outpert_paper_bound``: a convexified MLP trained without noise, noisy
answers (Lu et al.). Their ε is spent on every answered query (``per="query"``); the runner's
accuracy is an evaluation harness in which every test row is one query at ε (not charged to a
budget). Neither is proven: the sensitivity Δz_T they are calibrated with is not a bound for an MLP.

``outpert_head``: output perturbation that is proven (Chaudhuri, Monteleoni & Sarwate 2011): a
one-vs-rest L2-regularised logistic regression on the public model's bounded features, noise on its
weights once, then any number of queries (:class:`~tfdpmech.heads.OutputPerturbationHead`).
"""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf

from ...accounting.ledger import PrivacyLedger
from ...heads import OutputPerturbationHead
from ...accounting.query_budget import QueryBudgetAccountant
from ...mechanisms.output_perturbation import DPPredictor, compute_bounds
from ...models import convexified_mlp
from ..registry import Prepared, register_alias, register_method
from .functional_head import _features

L2 = 0.001  # Lu et al. Table 4


def _output_perturbation(mode: str):
    def prepare(ctx, epsilon, seed) -> Prepared:
        start = time.perf_counter()
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
        return Prepared(model, train, PrivacyLedger([predictor.release(1)]), predict_proba=predict_proba,
                        per="query", preprocessing_seconds=time.perf_counter() - start,
                        notes={"noise": "laplace", "queries_per_answer": 1})
    return prepare


register_method("outpert_reference", _output_perturbation("reference"),
                "Lu et al. Algorithm 1 (one noisy output neuron per query, Laplace): ε per query, claimed only "
                "(its sensitivity argument does not cover three or more classes: docs/mechanisms/output_perturbation.md)", mode="reference",
                paper="output_perturbation", data=("image", "tabular"))
register_method("outpert_paper_bound", _output_perturbation("private"),
                "output perturbation with Laplace noise on every logit, calibrated with Lu et al.'s Δz_T (Eq. 18–19): "
                "ε per query, claimed only — Δz_T is not a bound for an MLP, so none proven "
                "(docs/mechanisms/output_perturbation.md); the proven variant is outpert_head", mode="reference",
                paper="output_perturbation", data=("image", "tabular"))
register_alias("outpert_private", "outpert_paper_bound",
               "its old name; renamed because its proof rested on Lu et al.'s unproven sensitivity bound (Eq. 18)")


def _outpert_head(ctx, epsilon, seed) -> Prepared:
    feats = _features(ctx, seed)  # the public model is trained (and cached) here, outside the private timing
    start = time.perf_counter()
    head = OutputPerturbationHead(feats, ctx.num_classes, epsilon=epsilon, delta=ctx.config.delta, seed=seed)
    head.prepare(x=ctx.x_private, y=ctx.y_private)  # the one release; the model is trained
    seconds = time.perf_counter() - start
    return Prepared(head.model, ledger=head.ledger, preprocessing_seconds=seconds, epochs=1,
                    notes={"public": ctx.public_source, "features": feats.name, "noise_scale": head.noise_scale,
                           "sensitivity": head.sensitivity, "l2": head.l2, "private_seconds": seconds,
                           "features_seconds": head.seconds["features"],
                           "solve_release_seconds": head.seconds["solve_release"],
                           "training": "L-BFGS + Newton to the exact minimiser, noise on the weights once (no epochs)"})


register_method("outpert_head", _outpert_head,
                "output perturbation that is proven (Chaudhuri, Monteleoni & Sarwate 2011, Corollary 8): one-vs-rest "
                "L2-regularised logistic regression on the public model's bounded features mapped to the unit sphere, "
                "solved to the minimiser, Gaussian noise on the weights once (σ from dp_accounting for the K classes "
                "together); then any number of queries: (ε, δ) proven", mode="private", paper="output_perturbation",
                uses_public=True)
