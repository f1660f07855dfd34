"""DP-SGD (Abadi et al., CCS 2016), with Poisson sampling by default.

Every method runs with ``engine="auto"``: tensorflow-privacy where it imports (the TensorFlow 2.15
stack), tfdpmech's own DP-SGD train step elsewhere (Keras 3, e.g. Colab); the run's notes record the
engine (``notes["engine"]``) and the report states it.

- ``dpsgd``: Poisson-sampled DP-SGD (:mod:`tfdpmech.mechanisms.dpsgd.runs.poisson`), its ε **proven**; on the MLP
  family with the stated recipe (:data:`tfdpmech.mechanisms.dpsgd.runs.recipe.RECIPE`: tanh MLP, L = q·n with
  q = 0.25, 40 epochs, Adam 6e-3, C = 1, PLD accountant), on the CNN family with the comparison's
  shared settings (batch size as the expected batch, epochs, learning rate) and the standard CNN.
- ``dpsgd_shuffled``: the same hyper-parameters with shuffled fixed-size batches: the Poisson ε
  is only *claimed*; the *provable* ε is the any-order bound.
- ``dpsgd_head``: DP-SGD (Poisson) on a linear head over the public feature extractor — the
  comparison's public model (``ctx.public_model(seed)``, trained on public records only) cut at
  its bounded last hidden layer ``hidden_clip``, the same features as the functional head; the
  head starts from the public model's own output layer.
- ``dpsgd_finetune``: DP-SGD (Poisson) on the whole public model, initialised from its public
  weights (its batch min-max frozen at the public estimates, so every layer is per-example).
- ``dpsgd_augmult``: ``dpsgd`` with augmentation multiplicity (De et al. 2022): each sampled record's K views
  (``options["augmult_k"]``, default 4; ``options["augmentation"]``: a random crop after 2-pixel reflect padding,
  with or without a left-right flip: :func:`.mnist_recipes.augmentation_kind`) averaged, then clipped once; the
  same ε.

``dpsgd_bandmf``, ``dpsgd_ema`` and ``dpsgd_augmult_combined`` (the ``dpsgd`` / ``dpsgd_augmult`` rows with BandMF's
correlated noise or De et al.'s warmed-up weight average) are in :mod:`.dpsgd_variants`.

Tabular data: the bias-free linear model of the DP-ERM methods, δ = 1/n² as theirs.

``options`` of the comparison: ``dpsgd_epochs`` overrides the number of epochs of the image
methods, as an int or ``{ε: epochs}`` (the quick presets and the benchmark use it to keep runs short);
``scatter_epochs`` those of ``dpsgd_scatter``; ``dpsgd_recipe`` / ``scatter_recipe`` any other field of the
``tanh_cnn`` / ScatterNet recipes (:func:`.mnist_recipes.recipe_for`); ``scatter_norm`` the normalisation of
``dpsgd_scatter``'s features (``"group"``, the default, or ``"private_bn"``: :mod:`.scatter_bn`) and
``scatter_bn_noise`` the latter's noise multiplier (default 8).

Model ``tanh_cnn`` (the whole-MNIST preset): ``dpsgd`` runs tfdpmech's own engine with Tramèr &
Boneh's recipe (:mod:`.mnist_recipes`); ``dpsgd_tfprivacy`` is the same run through
tensorflow-privacy; ``dpsgd_scatter`` is DP-SGD on a linear model over ScatterNet features.
"""

from __future__ import annotations

import functools

import keras
import numpy as np

from ...accounting.ledger import Release
from ...contract import release
from ...mechanisms.dpsgd import ShuffledDPSGD, RECIPE, FINETUNE_RECIPE, HEAD_RECIPE, OptimizerSettings, DPSGD, make_dpsgd, tanh_mlp
from ...mechanisms.dpsgd.runs.paths import resolve_engine
from ...features import scattering_coefficients
from ...features.scatter import scattering_channels
from ...features.scatter_norm import BN_NOISE_MULTIPLIER, check_normalisation, normalise_channels
from ...layers import BatchMinMax, PerturbedBias
from ...models import linear_model as erm_linear_model
from ..registry import Build, register_mechanism
from .baselines import tabular_labels, tabular_loss
from .scatter_bn import private_bn_run
from ..options import option_at
from .mnist_recipes import (SCATTER_LINEAR_RECIPE, TANH_CNN_RECIPE, augmentation_kind, epochs_for,
                            image_augmentation, recipe_for)

_DPSGD_OPTIONS = ("dpsgd_epochs", "dpsgd_recipe")  # the options the DP-SGD rows read (run_store keys)
AUGMULT_K = 4  # the views per record of dpsgd_augmult, unless options["augmult_k"] says otherwise
FEATURE_LAYER = "hidden_clip"  # the bounded last hidden layer of every private-family model (as the functional head)


def _epochs(ctx, default: int, epsilon=None, option: str = "dpsgd_epochs") -> int:
    return epochs_for(ctx.config.options, epsilon, default, option)


def _changed(recipe, published) -> dict:
    """The fields (other than epochs) in which a run's recipe differs from the published one, for its notes."""
    changed = {f: getattr(recipe, f) for f in vars(published)
               if f != "epochs" and getattr(recipe, f) != getattr(published, f)}
    return {"recipe_changes": changed} if changed else {}


def _build(dp, model, x, y, notes=None, *, seed, loss=None, metrics=("accuracy",)) -> Build:
    """The DP-SGD run ``dp`` on ``model`` and ``(x, y)``; records per epoch from its steps and batch size.

    A Poisson run on tfdpmech's engine trains as a user's model does (``make_private``, ``compile``,
    ``fit(x, y)``: the batches of the run's own seed); tensorflow-privacy's model and the shuffled run
    are compiled by the run itself (``prepare``: ``compile`` and the batches of ``seed``).
    """
    per_epoch = getattr(dp, "steps_per_epoch", dp.steps // dp.epochs) * dp.batch_size
    prepared = {"examples_per_epoch": per_epoch, "epochs": dp.epochs}
    if isinstance(dp, DPSGD) and dp.engine == "tfdpmech":
        return Build(dp, model, x, y, compile={"loss": loss, "metrics": metrics}, notes=notes or {}, prepared=prepared)
    return Build(dp, model, x, y, {"seed": seed, "verbose": 0, "loss": loss, "metrics": metrics}, notes=notes or {},
                 prepared=prepared)


def _tabular(ctx, epsilon, seed, sampling) -> Build:
    n = ctx.n_private
    batch = min(256, max(16, n // 4))
    adam = OptimizerSettings("adam", learning_rate=0.05)
    if sampling == "poisson":
        dp = DPSGD(epsilon, 1.0 / n**2, expected_batch_size=batch, epochs=20, n=n, optimizer=adam,
                          accountant="rdp", seed=seed)
    else:
        dp = ShuffledDPSGD(epsilon, 1.0 / n**2, batch, 20, n, optimizer=adam, drop_remainder=True)
    base = erm_linear_model(ctx.x_private.shape[1], ctx.num_classes, l2=0.0)
    return _build(dp, base, ctx.x_private, tabular_labels(ctx, ctx.y_private), loss=tabular_loss(ctx.num_classes),
                  metrics=(), seed=seed)


def _image(ctx, epsilon, seed, sampling, engine="auto", overrides=None) -> Build:
    """The ``dpsgd`` row on an image family; ``overrides``: further ``make_dpsgd`` arguments (the rows that add to
    it: :mod:`.dpsgd_variants`), each run then on tfdpmech's engine."""
    cfg = ctx.config
    extra = dict(overrides or {})
    if extra and engine == "auto":
        engine = "tfdpmech"
    if cfg.model == "tanh_cnn":  # DP-SGD's MNIST baseline with its published recipe (mnist_recipes)
        recipe = recipe_for(cfg.options, epsilon, TANH_CNN_RECIPE)
        model = ctx.build("standard")
        dp = make_dpsgd(epsilon, cfg.delta, ctx.n_private, recipe=recipe, seed=seed, sampling=sampling,
                        engine="tfdpmech" if engine == "auto" else engine, **extra)
        notes = {"recipe": "Tramèr & Boneh 2021 (tfdpmech.experiments.methods.mnist_recipes.TANH_CNN_RECIPE)",
                 "network": model.name, "epochs": recipe.epochs, **_changed(recipe, TANH_CNN_RECIPE)}
        return _build(dp, model, ctx.x_private, ctx.y_private, notes, seed=seed)
    if cfg.model == "mlp":  # the stated recipe
        recipe = RECIPE.replace(epochs=_epochs(ctx, RECIPE.epochs))
        model = tanh_mlp(ctx.num_classes, input_shape=ctx.x_private.shape[1:], activation=recipe.activation,
                         input_scaling=recipe.input_scaling)
        notes = {"recipe": "tfdpmech.mechanisms.dpsgd.runs.recipe.RECIPE", "network": model.name}
    else:  # CNN family: the comparison's shared settings on the standard CNN
        recipe = RECIPE.replace(expected_batch_size=min(cfg.batch_size, ctx.n_private), reference_n=ctx.n_private,
                                epochs=_epochs(ctx, cfg.epochs), learning_rate=cfg.learning_rate)
        model = ctx.build("standard")
        notes = {"recipe": "the comparison's batch size, epochs and learning rate", "network": model.name}
    chunked = cfg.model == "mobilenet_v2" and sampling == "poisson" and resolve_engine("auto") == "tfdpmech"
    # only the Poisson run on tfdpmech's engine clips in physical chunks (the shuffled run has no such argument)
    physical = {"physical_batch_size": APPLICATION_PHYSICAL_BATCH} if chunked else {}
    chosen = {"engine": engine} if extra else {}  # the rows with overrides train on tfdpmech's engine
    dp = make_dpsgd(epsilon, cfg.delta, ctx.n_private, recipe=recipe, seed=seed, sampling=sampling, **physical,
                    **chosen, **extra)
    return _build(dp, model, ctx.x_private, ctx.y_private, notes, seed=seed)


def _dpsgd(sampling):
    def build(ctx, epsilon, seed) -> Build:
        return (_tabular if ctx.kind == "tabular" else _image)(ctx, epsilon, seed, sampling)
    return build


def _augmult(ctx, epsilon, seed, overrides=None, name="dpsgd_augmult") -> Build:
    """``dpsgd`` on the tanh CNN with each sampled record's K views one clipping unit (De et al. 2022);
    ``overrides``: further ``make_dpsgd`` arguments (:mod:`.dpsgd_variants`)."""
    cfg = ctx.config
    if ctx.kind != "image" or ctx.x_private.ndim != 4:
        raise ValueError(f"{name} augments images (height, width, channels): run it on an image dataset with "
                         "a convolutional model (--model tanh_cnn)")
    recipe = recipe_for(cfg.options, epsilon, TANH_CNN_RECIPE)
    k = option_at(cfg.options, epsilon, "augmult_k", AUGMULT_K)
    kind = augmentation_kind(ctx.dataset, option_at(cfg.options, epsilon, "augmentation", None))
    model = ctx.build("standard")
    dp = make_dpsgd(epsilon, cfg.delta, ctx.n_private, recipe=recipe, seed=seed, engine="tfdpmech",
                    augmentation=image_augmentation(ctx.dataset, kind), augmentation_multiplicity=k,
                    **(overrides or {}))
    notes = {"recipe": "Tramèr & Boneh 2021 (mnist_recipes.TANH_CNN_RECIPE) with augmentation multiplicity",
             "network": model.name, "epochs": recipe.epochs, "augmentation_multiplicity": k, "augmentation": kind,
             **_changed(recipe, TANH_CNN_RECIPE)}
    return _build(dp, model, ctx.x_private, ctx.y_private, notes, seed=seed)


def _tf_privacy(ctx, epsilon, seed) -> Build:
    """The ``dpsgd`` run through tensorflow-privacy's DP Keras model: same network, data, σ and sampling."""
    return _image(ctx, epsilon, seed, "poisson", engine="tensorflow_privacy")


def _scatter(ctx, epsilon, seed) -> Build:
    """DP-SGD on a linear model over ScatterNet features: normalised per record (``options["scatter_norm"]``
    ``"group"``, the default: ε = 0 for the features) or by the private per-channel statistics (``"private_bn"``:
    :mod:`.scatter_bn`, a proven release composed with DP-SGD's)."""
    options = ctx.config.options
    norm = check_normalisation(option_at(options, epsilon, "scatter_norm", "group"))
    recipe = recipe_for(options, epsilon, SCATTER_LINEAR_RECIPE, "scatter")
    notes = {"recipe": "tfdpmech.experiments.methods.mnist_recipes.SCATTER_LINEAR_RECIPE", "epochs": recipe.epochs,
             **_changed(recipe, SCATTER_LINEAR_RECIPE)}
    if norm == "group":
        features = scattering_coefficients(ctx.x_private)
        dp = make_dpsgd(epsilon, ctx.config.delta, ctx.n_private, recipe=recipe, seed=seed, engine="tfdpmech")
        notes = {"features": "ScatterNet (kymatio J = 2, 81 channels, per-record group norm, 27 groups)", **notes}
        transform = scattering_coefficients
    else:
        bn_noise = option_at(options, epsilon, "scatter_bn_noise", BN_NOISE_MULTIPLIER)
        dp, features, statistics = private_bn_run(ctx.x_private, epsilon, ctx.config.delta, seed, recipe,
                                                  bn_noise=bn_noise)
        notes = {"features": "ScatterNet (kymatio J = 2, 81 channels, private per-channel mean and variance: "
                             f"Gaussian noise multiplier {bn_noise:g}, data-independent clipping; "
                             f"DP-SGD noise multiplier {dp.noise_multiplier:.4g} for the rest of the budget)",
                 "scatter_norm": norm, "scatter_bn_noise": bn_noise, **notes}
        transform = functools.partial(_normalised, statistics=statistics)
    head = keras.Sequential([keras.Input((features.shape[1],)), keras.layers.Dense(ctx.num_classes)],
                            name="scatter_linear")
    built = _build(dp, head, features, ctx.y_private, notes, seed=seed)
    built.prepared["model"] = _ScatterModel(head, transform)
    return built


def _normalised(x, statistics):
    return normalise_channels(scattering_channels(x), statistics)


class _ScatterModel:
    """The evaluated model: ScatterNet features (the run's normalisation), then the DP-trained linear head."""

    def __init__(self, head, transform=scattering_coefficients):
        self.head = head
        self.transform = transform

    def __call__(self, x, training=False):
        return self.head(self.transform(np.asarray(x)), training=training)


# --- public pre-training ------------------------------------------------------------------------
def _public_release(ctx) -> Release:
    return Release(
        component="public_pretraining", mechanism="none", epsilon_claimed=0.0, epsilon_provable=0.0,
        basis=(f"the public model was trained on the public records only ({ctx.public_source}), disjoint from the "
               "private set: using it on private records is post-processing of public data"),
        details={"public_records": len(ctx.x_public)}, neighbours="add_remove", protects="record",  # ε = 0, as DP-SGD
    )


def _head(ctx, epsilon, seed) -> Build:
    ctx.require_public("dpsgd_head")
    public = ctx.public_model(seed)  # its training is reported beside, not in the private time
    inputs = public.inputs[0] if len(public.inputs) == 1 else public.inputs  # one input: no list (Keras 3 warns)
    extractor = keras.Model(inputs, public.get_layer(FEATURE_LAYER).output, name="public_features")
    # Features of each private record alone (inference mode: the batch min-max uses its public estimates).
    features = np.concatenate([np.asarray(extractor(ctx.x_private[i:i + 2000], training=False))
                               for i in range(0, ctx.n_private, 2000)]).astype(np.float32)
    recipe = HEAD_RECIPE.replace(epochs=_epochs(ctx, HEAD_RECIPE.epochs))
    dp = make_dpsgd(epsilon, ctx.config.delta, ctx.n_private, recipe=recipe, seed=seed)
    release(dp.ledger, _public_release(ctx))
    head = keras.Sequential([keras.Input((features.shape[1],)), keras.layers.Dense(ctx.num_classes)],
                            name="dpsgd_head")
    public_head = _layer_after(public, FEATURE_LAYER)
    if isinstance(public_head, keras.layers.Dense) and public_head.kernel.shape == head.layers[-1].kernel.shape:
        # start from the public model's own head (public weights: ε = 0); DP-SGD refines it on the private records
        head.layers[-1].kernel.assign(public_head.kernel)
    built = _build(dp, head, features, ctx.y_private, {"features": f"{public.name}/{FEATURE_LAYER}",
                                                       "public": ctx.public_source}, seed=seed)
    # the evaluated model: public extractor (frozen) → the DP-trained head (shared weights)
    built.prepared["model"] = keras.Model(inputs, head(extractor.outputs[0]),
                                          name="public_features_dpsgd_head")
    return built


def _layer_after(model: keras.Model, name: str):
    layers = list(model.layers)
    index = [layer.name for layer in layers].index(name)
    return layers[index + 1] if index + 1 < len(layers) else None


def _trainable_copy(public: keras.Model) -> keras.Model:
    """The public model with standard, per-example layers and its public weights.

    ``Dense``/``Conv2D`` without bias followed by ``PerturbedBias`` becomes one layer with bias
    ``bias · b̄`` (the same function); ``BatchMinMax`` becomes the fixed per-unit affine map of its
    inference mode (the public moving min/max), so no layer mixes the records of a batch.
    """
    if not isinstance(public, keras.Sequential):
        raise ValueError(f"dpsgd_finetune needs a Sequential public model, got {type(public).__name__}")
    layers, weights, src = [], [], list(public.layers)
    i = 0
    while i < len(src):
        layer = src[i]
        nxt = src[i + 1] if i + 1 < len(src) else None
        if (isinstance(layer, (keras.layers.Dense, keras.layers.Conv2D)) and not layer.use_bias
                and isinstance(nxt, PerturbedBias)):
            config = {**layer.get_config(), "use_bias": True, "name": layer.name}
            new = layer.__class__.from_config(config)
            bias = nxt.bias.numpy() * nxt.b_bar.numpy()
            weights.append((new, [layer.kernel.numpy(), bias]))
            layers.append(new)
            i += 2
            continue
        if isinstance(layer, BatchMinMax):
            lo, hi = layer.moving_min.numpy(), layer.moving_max.numpy()
            scale = 1.0 / np.maximum(hi - lo, layer.epsilon)  # BatchMinMax at inference
            layers.append(keras.layers.Rescaling(scale, offset=-lo * scale, name=f"{layer.name}_frozen"))
        else:
            new = layer.__class__.from_config(layer.get_config())
            layers.append(new)
            if layer.weights:
                weights.append((new, layer.get_weights()))
        i += 1
    model = keras.Sequential([keras.Input(public.input_shape[1:]), *layers], name=f"{public.name}_finetune")
    for new, w in weights:
        new.set_weights(w)
    return model


# the whole public model's Poisson batches (q = 1/4: about 14,750 records on the whole MNIST) are clipped this many
# records at a time on tfdpmech's engine: the same update and ε, memory bounded by one chunk
FINETUNE_PHYSICAL_BATCH = 1024
# the mobilenet_v2 family (dpsgd from scratch, dpsgd_finetune_<part>) is clipped 256 records at a time: the same sums,
# a step's memory bounded by one chunk (a whole batch of about 1,024 records takes about 11 GB)
APPLICATION_PHYSICAL_BATCH = 256


def _finetune(ctx, epsilon, seed) -> Build:
    ctx.require_public("dpsgd_finetune")
    public = ctx.public_model(seed)
    model = _trainable_copy(public)
    recipe = FINETUNE_RECIPE.replace(epochs=_epochs(ctx, FINETUNE_RECIPE.epochs))
    # tensorflow-privacy's engine (TensorFlow 2.15's "auto") takes the batch in one piece
    physical = FINETUNE_PHYSICAL_BATCH if resolve_engine("auto") == "tfdpmech" else None
    dp = make_dpsgd(epsilon, ctx.config.delta, ctx.n_private, recipe=recipe, seed=seed, physical_batch_size=physical)
    release(dp.ledger, _public_release(ctx))
    return _build(dp, model, ctx.x_private, ctx.y_private, {"initialised_from": public.name,
                                                             "public": ctx.public_source}, seed=seed)


register_mechanism("dpsgd", _dpsgd("poisson"),
                "DP-SGD (Abadi et al. 2016) with Poisson sampling (noisy sum / expected "
                "batch), σ from dp_accounting: proven; MLP family: the stated tanh recipe "
                "(tfdpmech.mechanisms.dpsgd.runs.recipe); tanh CNN: Tramèr & Boneh's recipe (mnist_recipes); CNN: "
                "the comparison's batch, epochs and rate",
                mode="private", paper="dpsgd", data=("image", "tabular"), options=_DPSGD_OPTIONS)
register_mechanism("dpsgd_augmult", _augmult,
                "dpsgd on the tanh CNN with augmentation multiplicity (De et al. 2022): each sampled record's K views "
                "(options['augmentation']: a 2-pixel random crop, with or without a left-right flip) averaged, then "
                "clipped once; same σ and ε, "
                "proven",
                mode="private", paper="dpsgd", data=("image",), options=(*_DPSGD_OPTIONS, "augmult_k", "augmentation"))
register_mechanism("dpsgd_tfprivacy", _tf_privacy,
                "the dpsgd run through tensorflow-privacy's DP Keras model (its Poisson train step and clipping; "
                "TensorFlow 2.15 stack): same network, data, σ and sampling as dpsgd, proven",
                mode="private", paper="dpsgd",
                requires=(("tensorflow_privacy", "tensorflow-privacy: pip install 'tfdpmech[dpsgd]' on Python 3.11 "
                                                 "(make test-tfprivacy's stack)"),), options=_DPSGD_OPTIONS)
register_mechanism("dpsgd_scatter", _scatter,
                "DP-SGD (Poisson) on a linear model over ScatterNet features normalised per record (Tramèr & Boneh "
                "2021; data-independent, no public data), or with options['scatter_norm'] = 'private_bn' by a "
                "private per-channel mean and variance (a Gaussian release composed with DP-SGD's): proven",
                mode="private", paper="dpsgd",
                requires=(("tfdpmech.features.kymatio_compat", "pip install 'tfdpmech[scatter]'"),),
                options=("scatter_epochs", "scatter_recipe", "scatter_norm", "scatter_bn_noise"))
register_mechanism("dpsgd_shuffled", _dpsgd("shuffled"),
                "DP-SGD with shuffled fixed-size batches, same hyper-parameters as dpsgd: the Poisson ε is claimed, "
                "the any-order ε (no amplification by sampling) is provable",
                mode="private", paper="dpsgd", data=("image", "tabular"))
register_mechanism("dpsgd_head", _head,
                "DP-SGD (Poisson) on a linear head over the public model's bounded features (the functional head's "
                "extractor, trained on public records only): proven",
                mode="private", paper="dpsgd", uses_public=True, options=("dpsgd_epochs",))
register_mechanism("dpsgd_finetune", _finetune,
                "DP-SGD (Poisson) on the whole public model, initialised from its public weights: proven",
                mode="private", paper="dpsgd", uses_public=True, options=("dpsgd_epochs",))
