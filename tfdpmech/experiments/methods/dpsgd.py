"""DP-SGD (Abadi et al., CCS 2016) through tensorflow-privacy, on the comparison's standard model."""

from __future__ import annotations

import time

import keras
import numpy as np

from ...dpsgd import DPSGD
from ...models import linear_model as erm_linear_model
from ..registry import Prepared, register_method
from .baselines import tabular_labels, tabular_loss

TF_PRIVACY = (("tensorflow_privacy", "pip install 'tfdpmech[dpsgd]' (needs TensorFlow 2.15)"),)


def _dpsgd(ctx, epsilon, seed) -> Prepared:
    start = time.perf_counter()
    cfg = ctx.config
    if ctx.kind == "tabular":  # the same bias-free linear model as the DP-ERM methods, δ = 1/n² as theirs
        n = ctx.n_private
        batch = min(256, max(16, n // 4))
        dp = DPSGD(epsilon, 1.0 / n**2, batch, 20, n, learning_rate=0.05, drop_remainder=True)
        base = erm_linear_model(ctx.x_private.shape[1], ctx.num_classes, l2=0.0)
        model = dp.compile(base, loss=tabular_loss(ctx.num_classes), metrics=())
        train = dp.dataset(ctx.x_private, tabular_labels(ctx, ctx.y_private), seed=seed)
    else:
        dp = DPSGD(epsilon, cfg.delta, cfg.batch_size, cfg.epochs, ctx.n_private, learning_rate=cfg.learning_rate,
                   drop_remainder=True)  # full batches only; the remainder is recorded in the ledger
        model = dp.compile(ctx.build("standard"))
        train = dp.dataset(ctx.x_private, ctx.y_private, seed=seed)
    return Prepared(model, train, dp.ledger, [dp.callback(verbose=0)], epochs=dp.epochs,
                    preprocessing_seconds=time.perf_counter() - start,
                    examples_per_epoch=dp.steps // dp.epochs * dp.batch_size, notes={"path": dp.path})


register_method("dpsgd", _dpsgd, "DP-SGD through tensorflow-privacy (Abadi et al. 2016), σ calibrated to (ε, δ) "
                "with dp_accounting", mode="private", paper="dpsgd", data=("image", "tabular"), requires=TF_PRIVACY)
