"""Output perturbation (Lu et al.) in the runner: a convexified MLP trained without noise, noisy answers.

Its ε is spent on every answered query (``per="query"``); the runner's accuracy is an evaluation
harness in which every test row is one query at ε (not charged to a budget).
"""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf

from ...accounting.ledger import PrivacyLedger
from ...accounting.query_budget import QueryBudgetAccountant
from ...mechanisms.output_perturbation import DPPredictor, compute_bounds
from ...models import convexified_mlp
from ..registry import Prepared, register_method

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
register_method("outpert_private", _output_perturbation("private"),
                "output perturbation with Laplace noise on every logit: ε per query, proven given the Δz_T "
                "sensitivity bound (Lu et al. Eq. 18)", mode="private", paper="output_perturbation",
                data=("image", "tabular"))
