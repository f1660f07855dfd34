"""DP-SGD and the non-private baseline on today's architectures: ``dpsgd_<model>`` and ``nonprivate_<model>``.

The models (:data:`ARCHITECTURE_MODELS`, built by :mod:`tfdpmech.models.architectures` and
:func:`tfdpmech.models.tanh_cnn`): the tanh CNN, a ViT on 7×7 patches, an LSTM reading the image row by
row, a Conv1D over the rows, a GroupNorm CNN. Each ``dpsgd_<model>`` row is Poisson DP-SGD on tfdpmech's
engine (``make_private``, ``compile``, ``fit``: the ghost-norm path with the layer registry), its ε proven;
each ``nonprivate_<model>`` row trains the same network without privacy. The recipes
(:data:`ARCHITECTURE_RECIPES`) are stated before any run; ``options["architecture_recipes"]``
(``{model: {Recipe field: value}}``, or ``{ε: {model: {...}}}``) replaces any field, for runs on a
validation split (``mnist_validation``, ``fashion_mnist_validation``) that choose them; the ``architectures``
preset passes the learning rates so chosen where they differ (``presets.ARCHITECTURES_CHOSEN``). Each
``dpsgd_<model>`` reads its own model's entry only, so choosing one model's recipe leaves the others' runs valid.
"""

from __future__ import annotations

import dataclasses

import keras
import tensorflow as tf

from ...mechanisms.dpsgd import DPSGD, Recipe
from ...models import tanh_cnn
from ...models.architectures import conv1d_rows, groupnorm_cnn, lstm_rows, vit
from ..options import at_epsilon
from ..registry import Prepared, register_mechanism, register_method
from .dpsgd import _build
from .mnist_recipes import TANH_CNN_RECIPE

__all__ = ["ARCHITECTURE_MODELS", "ARCHITECTURE_RECIPES", "NONPRIVATE_RECIPES", "architecture_recipe"]

ARCHITECTURE_MODELS = {"tanh_cnn": tanh_cnn, "vit": vit, "lstm": lstm_rows, "conv1d": conv1d_rows,
                       "groupnorm_cnn": groupnorm_cnn}

_ADAM = dict(optimizer="adam", momentum=0.0, accountant="pld", reference_n=60_000)
# DP-SGD, stated in advance: the tanh CNN and the GroupNorm CNN (the same convolutions) at Tramèr & Boneh's
# MNIST recipe; the ViT, LSTM and Conv1D with Adam at a large expected batch (De et al. 2022; Li et al. 2022)
ARCHITECTURE_RECIPES = {
    "tanh_cnn": TANH_CNN_RECIPE,
    "groupnorm_cnn": TANH_CNN_RECIPE,
    "vit": Recipe(expected_batch_size=1024, epochs=30, l2_norm_clip=1.0, learning_rate=2e-3, **_ADAM),
    "lstm": Recipe(expected_batch_size=1024, epochs=30, l2_norm_clip=1.0, learning_rate=4e-3, **_ADAM),
    "conv1d": Recipe(expected_batch_size=1024, epochs=30, l2_norm_clip=1.0, learning_rate=4e-3, **_ADAM),
}


@dataclasses.dataclass(frozen=True)
class NonPrivateArchitectureRecipe:
    batch_size: int = 256
    learning_rate: float = 1e-3
    epochs: int = 20


NONPRIVATE_RECIPES = {name: NonPrivateArchitectureRecipe() for name in ARCHITECTURE_MODELS}


def architecture_recipe(options: dict, epsilon, name: str) -> Recipe:
    """The DP-SGD recipe of model ``name`` at ``epsilon``: :data:`ARCHITECTURE_RECIPES`, with the fields
    ``options["architecture_recipes"]`` gives for it.

    Raises:
        ValueError: an override that names no :class:`~tfdpmech.mechanisms.dpsgd.Recipe` field.
    """
    overrides = at_epsilon((options or {}).get("architecture_recipes") or {}, epsilon, {}) or {}
    changes = dict(overrides.get(name) or {})
    fields = {f.name for f in dataclasses.fields(Recipe)}
    unknown = sorted(set(changes) - fields)
    if unknown:
        raise ValueError(f"options['architecture_recipes'][{name!r}] names {unknown}, which are not Recipe fields; "
                         f"use any of {sorted(fields)}")
    return ARCHITECTURE_RECIPES[name].replace(**changes)


def _network(ctx, name: str):
    return ARCHITECTURE_MODELS[name](ctx.num_classes, input_shape=ctx.x_private.shape[1:])


def _dpsgd(name: str):
    def build(ctx, epsilon, seed):
        recipe = architecture_recipe(ctx.config.options, epsilon, name)
        dp = DPSGD(epsilon, ctx.config.delta, expected_batch_size=recipe.batch_for(ctx.n_private), epochs=recipe.epochs,
                   n=ctx.n_private, l2_norm_clip=recipe.l2_norm_clip, optimizer=recipe.optimizer_settings,
                   accountant=recipe.accountant, seed=seed, engine="tfdpmech")
        model = _network(ctx, name)
        return _build(dp, model, ctx.x_private, ctx.y_private,
                      {"network": model.name, "recipe": dataclasses.asdict(recipe)}, seed=seed)
    return build


def _nonprivate(name: str):
    def prepare(ctx, epsilon, seed) -> Prepared:
        recipe = NONPRIVATE_RECIPES[name]
        keras.utils.set_random_seed(seed)
        model = _network(ctx, name)
        model.compile(keras.optimizers.Adam(recipe.learning_rate),
                      loss=keras.losses.CategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
        train = (tf.data.Dataset.from_tensor_slices((ctx.x_private, ctx.y_private))
                 .shuffle(ctx.n_private, seed=seed).batch(recipe.batch_size))
        epochs = (ctx.config.options or {}).get("nonprivate_epochs", recipe.epochs)
        return Prepared(model, train, epochs=epochs, notes={"network": model.name, "recipe": dataclasses.asdict(recipe)})
    return prepare


for _name in ARCHITECTURE_MODELS:
    register_mechanism(f"dpsgd_{_name}", _dpsgd(_name),
                       f"DP-SGD (Poisson, tfdpmech's engine: the layer registry's ghost norms) on the {_name} "
                       "architecture (tfdpmech.models.architectures), its recipe stated in advance (a learning "
                       "rate chosen on a validation split where the preset gives one): proven",
                       mode="private", paper="dpsgd", options=(f"architecture_recipes[{_name}]",))
    register_method(f"nonprivate_{_name}", _nonprivate(_name),
                    f"no privacy: the {_name} architecture, cross-entropy, Adam", mode="none",
                    options=("nonprivate_epochs",))
