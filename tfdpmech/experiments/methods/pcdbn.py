"""pCDBN (Phan et al., convolutional deep belief networks) in the runner.

``cdbn`` and ``pcdbn_private``: a small CDBN (ConvRBM 8×5×5 + pool 2, ConvRBM 8×3×3 + pool 2, FC-25,
Taylor head) pre-trained ``pretrain_epochs`` per layer: small enough for a 2-core CPU; the paper's
network (32/64 maps, 2,400 epochs) is far larger (docs/mechanisms/pcdbn.md lists the differences).
``pcdbn_reference``: the authors' public code path (:class:`PCDBNReference`) with its own network.
"""

from __future__ import annotations

from ...mechanisms.pcdbn.conv_rbm import ConvRBM
from ...mechanisms.pcdbn import PCDBNReference, PrivateCDBN, cdbn_network
from ..registry import Build, register_mechanism


def _layers(mode: str):
    if mode == "private":  # constant Z; Chebyshev sigmoid with small Σ|α| (smaller Δ)
        return [ConvRBM(8, 5, approx="chebyshev_sigmoid", degree=3), ConvRBM(8, 3, approx="chebyshev_sigmoid", degree=1)]
    return [ConvRBM(8, 5, degree=3, normalizer="lrn"), ConvRBM(8, 3, degree=3, normalizer="lrn")]


def _pcdbn(mode: str, head_mechanism: str = "laplace"):
    """``build`` of the CDBN above in ``mode`` (``exact``: no privacy): ``make_private``, ``compile``, ``fit``; the
    layer-wise training is one epoch of ``fit``."""
    def build(ctx, epsilon, seed) -> Build:
        options = ctx.config.options
        kwargs = dict(num_classes=ctx.num_classes, mode=mode, fc_scale=16.0,
                      pretrain_epochs=options.get("pretrain_epochs", 3), batch_size=ctx.config.batch_size,
                      learning_rate=0.01, head_epochs=options.get("head_epochs", ctx.config.epochs),
                      head_learning_rate=0.05, head_ridge=1e-2, seed=seed)
        if mode == "private":
            kwargs.update(epsilon=epsilon, split=(0.125, 0.125, 0.75))  # most of the budget to the head (our choice)
            if head_mechanism == "gaussian":  # the head's one release with Gaussian noise: (ε, δ) in total
                kwargs.update(head_mechanism="gaussian", head_delta=ctx.config.delta)
        model = cdbn_network(_layers(mode), ctx.x_private.shape[1:], ctx.num_classes, fc_units=25,
                             head_mechanism=head_mechanism)
        return Build(PrivateCDBN(**kwargs), model=model, x=ctx.x_private, y=ctx.y_private, compile={},
                     prepared={"epochs": 1})
    return build


_OPTIONS = ("pretrain_epochs", "head_epochs", "reference_epochs")  # the options these rows read (run_store keys)
register_mechanism("cdbn", _pcdbn("exact"), "CDBN without privacy (exact ConvRBM energy), the pCDBN reference point",
                mode="none", options=_OPTIONS)
register_mechanism("pcdbn_private", _pcdbn("private"),
                "pCDBN with the functional mechanism on the aggregated Chebyshev coefficients (Phan et al. §4, "
                "Algorithm 1) and a private head: proven", mode="private", paper="pcdbn", options=_OPTIONS)
register_mechanism("pcdbn_private_gauss", _pcdbn("private", "gaussian"),
                "pcdbn_private with the Gaussian calibration of the head's one release (features normalised to unit "
                "norm, σ from dp_accounting): (ε, δ) proven", mode="private", paper="pcdbn", options=_OPTIONS)


def _reference(ctx, epsilon, seed) -> Build:
    """The authors' code path: batch min(3,600, n/2), ``pretrain_epochs`` per encoder (code: 10) and
    ``pcdbn_reference_epochs`` fine-tuning epochs (code: 2,400), else ``reference_epochs`` (the option the
    other reference rows read), else 20 × head_epochs."""
    options = ctx.config.options
    batch = min(3600, max(ctx.n_private // 2, 1))
    epochs = options.get("pcdbn_reference_epochs") or options.get(
        "reference_epochs", 20 * options.get("head_epochs", ctx.config.epochs))
    ref = PCDBNReference(epsilon, batch_size=batch, pretrain_epochs=options.get("pretrain_epochs", 10), seed=seed)
    return Build(ref, x=ctx.x_private, y=ctx.y_private, prepared={"epochs": epochs, "predict_proba": ref.predict_proba})


register_mechanism("pcdbn_reference", _reference,
                "pCDBN as the authors' public code trains it (noisy Chebyshev coefficients in pre-training only, "
                "per-batch shared output noise, clean labels; Phan et al. Fig. 5b): claimed, none proven",
                mode="reference", paper="pcdbn", options=(*_OPTIONS, "pcdbn_reference_epochs"))
