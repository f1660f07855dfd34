"""DP-ERM (Kang et al.): input perturbation in both modes, and objective perturbation.

All train an L2-regularised linear model (logistic regression) with ``epochs`` full-batch gradient
steps (Kang et al. Algorithm 1, T = ``epochs``), on the same clipped features: a tabular data set's
own, or for images (``ip_reference_head``, ``ip_private_head``) the public model's features mapped
to the unit ball as the Gaussian heads map them (``[f, 1] / ‖[f, 1]‖``, the same map at test time).
"""

from __future__ import annotations

import math

import keras
import numpy as np

from ...accounting.ledger import PrivacyLedger, Release
from ...mechanisms.functional_head.feature_map import feature_map
from ...mechanisms.input_perturbation import InputPerturbation
from ..registry import Build, Prepared, register_mechanism, register_method
from .functional_head import public_head_features

# tensorflow-privacy's KiferRegularizer module imports the package and its DP Keras optimizers, which fail on
# Keras 3: objective perturbation runs on the TensorFlow 2.15 stack only (elsewhere results.md lists it as left out)
TF_PRIVACY = (("tensorflow_privacy", "its KiferRegularizer needs tensorflow-privacy, which installs on Python 3.11 "
               "with TensorFlow 2.15 only (pip install 'tfdpmech[tfprivacy]' there)"),)


def mechanism_seed(seed: int) -> int:
    """A noise seed independent of the data seed (the same stream for both would correlate noise and data)."""
    return int(np.random.SeedSequence([int(seed), 0x1D9]).generate_state(1)[0])


def _input_perturbation(mode: str):
    """``build`` of input perturbation: the linear DP-ERM model, T = ``epochs`` full-batch steps, δ = 1/n²."""
    def build(ctx, epsilon, seed) -> Build:
        ip = InputPerturbation(epsilon, 1.0 / ctx.n_private**2, ctx.config.epochs, num_classes=ctx.num_classes,
                               l2=ctx.config.l2, feature_norm_bound=1.0, mode=mode, seed=mechanism_seed(seed))
        return Build(ip, ip.make_linear_model(ctx.x_private.shape[1]), ctx.x_private, ctx.labels_private, compile={})
    return build


def _input_perturbation_on_public_features(mode: str):
    """``build`` of input perturbation on images: the public model's features (ε = 0 for the private set),
    each record's ``[f, 1]`` scaled to norm 1 (Kang et al. assume ‖x‖ <= 1), then the linear model."""
    def build(ctx, epsilon, seed) -> Build:
        feats = public_head_features(ctx, seed)
        q_private = feature_map(feats(ctx.x_private), clip_norm=True).astype(np.float32)
        ip = InputPerturbation(epsilon, 1.0 / ctx.n_private**2, ctx.config.epochs, num_classes=ctx.num_classes,
                               l2=ctx.config.l2, feature_norm_bound=1.0, mode=mode, seed=mechanism_seed(seed))
        model = ip.make_linear_model(q_private.shape[1])

        def predict_proba(x):
            q = feature_map(feats(x), clip_norm=True).astype(np.float32)
            return keras.activations.softmax(model(q, training=False)).numpy()

        return Build(ip, model=model, x=q_private, y=ctx.labels_private, compile={},
                     notes={"public": ctx.public_source, "features": f"{feats.name}, [f, 1] scaled to norm 1"},
                     prepared={"predict_proba": predict_proba})
    return build


def _kifer(ctx, epsilon, seed) -> Prepared:
    """tensorflow-privacy's objective perturbation (Kifer et al. 2012, Algorithm 1) on the same features."""
    from tensorflow_privacy.privacy.logistic_regression.multinomial_logistic import KiferRegularizer

    n, d = ctx.x_private.shape
    delta = 1.0 / n**2
    regularizer = KiferRegularizer(n, d, epsilon, delta, ctx.num_classes, 1.0)
    model = keras.Sequential([keras.Input((d,)), keras.layers.Dense(ctx.num_classes, kernel_regularizer=regularizer)])
    model.compile(keras.optimizers.SGD(), loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    steps = ctx.config.options.get("kifer_steps", 1500)
    epochs = int(min(100, max(1, math.ceil(steps / math.ceil(n / 32)))))  # the library's recipe: batch 32
    release = Release(
        component="objective", mechanism="gaussian", epsilon_claimed=epsilon, epsilon_provable=None,
        neighbours="replace_one", protects="record",
        basis=("none proven for the released model: Kifer et al. 2012 (Algorithm 1) prove (ε, δ) for the exact "
               "minimiser of the perturbed objective; it is minimised approximately (mini-batch SGD, "
               f"{epochs} epochs), with ζ = R although the softmax gradient norm reaches √2·R, and the Dense bias "
               "is unregularised and unperturbed"),
        delta=delta, details={"epochs": epochs, "library": "tensorflow_privacy.privacy.logistic_regression"})

    def fit(_epochs, callbacks):
        model.fit(ctx.x_private, ctx.y_private, batch_size=32, epochs=epochs, verbose=0, callbacks=callbacks)

    return Prepared(model, ledger=PrivacyLedger([release]), fit=fit, epochs=epochs)


register_mechanism("ip_reference", _input_perturbation("reference"),
                "input perturbation, Kang et al. Theorem 1 calibration (per-record Gaussian noise on the features "
                "once): ε claimed, none proven", mode="reference", paper="input_perturbation", data=("tabular",),
                requires=(("dp_accounting", "pip install dp-accounting"),))
register_mechanism("ip_private", _input_perturbation("private"),
                "input perturbation calibrated as a per-record Gaussian mechanism on the features (dp_accounting): "
                "proven for the features, labels public", mode="private", paper="input_perturbation",
                data=("tabular",), requires=(("dp_accounting", "pip install dp-accounting"),))
for _mode, _text in (("reference", "Kang et al. Theorem 1 calibration: ε claimed, none proven"),
                     ("private", "a per-record Gaussian mechanism on the features (dp_accounting): proven for the "
                                 "features, labels public")):
    register_mechanism(f"ip_{_mode}_head", _input_perturbation_on_public_features(_mode),
                       f"input perturbation (Kang et al.) and a linear model on the public model's features, each "
                       f"record's [f, 1] scaled to norm 1; {_text}", mode=_mode, paper="input_perturbation",
                       uses_public=True, requires=(("dp_accounting", "pip install dp-accounting"),), options=())
register_method("kifer", _kifer,
                "objective perturbation (Kifer et al. 2012) through tensorflow-privacy: ε claimed (approximate "
                "minimiser)", mode="reference", paper=None, data=("tabular",), requires=TF_PRIVACY)
