"""pCDBN (Phan et al., convolutional deep belief networks) in the runner.

A small CDBN (ConvRBM 8×5×5 + pool 2, ConvRBM 8×3×3 + pool 2, FC-25, Taylor head) pre-trained
``pretrain_epochs`` per layer: small enough for a 2-core CPU; the paper's network (32/64 maps,
2,400 epochs) is far larger (docs/mechanisms/pcdbn.md lists the differences).
"""

from __future__ import annotations

from ...layers.conv_rbm import ConvRBM
from ...mechanisms.pcdbn import PrivateCDBN
from ..registry import Prepared, register_method


def _layers(mode: str):
    if mode == "private":  # constant Z; Chebyshev sigmoid with small Σ|α| (smaller Δ)
        return [ConvRBM(8, 5, approx="chebyshev_sigmoid", degree=3), ConvRBM(8, 3, approx="chebyshev_sigmoid", degree=1)]
    if mode == "reference":  # the paper's polynomial, L = 7, Z = the batch maximum
        return [ConvRBM(8, 5, degree=7, normalizer="batch_max"), ConvRBM(8, 3, degree=7, normalizer="batch_max")]
    return [ConvRBM(8, 5, degree=3, normalizer="lrn"), ConvRBM(8, 3, degree=3, normalizer="lrn")]


def _pcdbn(mode: str):
    def prepare(ctx, epsilon, seed) -> Prepared:
        pretrain = int(ctx.config.options.get("pretrain_epochs", 3))
        kwargs = dict(num_classes=ctx.num_classes, mode=mode, fc_units=25, fc_scale=16.0, pretrain_epochs=pretrain,
                      batch_size=ctx.config.batch_size, learning_rate=0.01, head_epochs=int(ctx.config.options.get("head_epochs", ctx.config.epochs)),
                      head_learning_rate=0.05, head_ridge=1e-2, seed=seed)
        if mode == "private":
            kwargs.update(epsilon=epsilon, split=(0.125, 0.125, 0.75))  # most of the budget to the head (our choice)
        elif mode == "reference":  # the authors' code: the same ε for every component, batch 3,600
            kwargs.update(epsilon=epsilon, split="same", batch_size=min(3600, ctx.n_private // 2),
                          head_epochs=20 * int(ctx.config.options.get("head_epochs", ctx.config.epochs)))
        cdbn = PrivateCDBN(_layers(mode), **kwargs)
        def fit(epochs, callbacks):
            return cdbn.fit(ctx.x_private, ctx.y_private)

        return Prepared(None, ledger=cdbn.ledger if mode != "exact" else None, fit=fit, epochs=1,
                        notes={"pretrain_epochs": pretrain})
    return prepare


register_method("cdbn", _pcdbn("exact"), "CDBN without privacy (exact ConvRBM energy), the pCDBN reference point",
                mode="none")
register_method("pcdbn_private", _pcdbn("private"),
                "pCDBN with the functional mechanism on the aggregated Chebyshev coefficients (Phan et al. §4, "
                "Algorithm 1) and a private head: proven", mode="private", paper="pcdbn")
register_method("pcdbn_reference", _pcdbn("reference"),
                "pCDBN as in the authors' code (same ε for every component): claimed, none proven", mode="reference",
                paper="pcdbn")
