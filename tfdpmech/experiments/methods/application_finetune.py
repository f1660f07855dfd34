"""DP fine-tuning of a ``keras.applications`` backbone pretrained on public data: ``dpsgd_finetune_<part>``.

The comparison's model family ``mobilenet_v2`` is Keras's ``MobileNetV2`` at width 0.35 with GroupNormalization
(:func:`tfdpmech.models.application.mobilenet_v2_gn`). Its public model (``ctx.public_model(seed)``: trained on
the public records only, without privacy; the ``public_only`` row evaluates it) is the starting point of three
Poisson DP-SGD runs on the private records, each proven at the run's ε:

* ``dpsgd_finetune_head``: the ``Dense`` head only, the backbone frozen;
* ``dpsgd_finetune_top``: the head and the last stage (blocks 13–16 and the last 1×1 convolution);
* ``dpsgd_finetune_all``: every layer.

``dpsgd`` with ``--model mobilenet_v2`` is the same network trained from scratch with DP-SGD. The recipe
(:data:`FINETUNE_APPLICATION_RECIPE`, stated before any run: expected batch 1,024, Adam, C = 1) is the same for the
three parts; ``options["finetune_recipe"]`` replaces any of its fields (``{field: value}`` or ``{ε: {...}}``). Every
run of the family clips 256 records at a time (``physical_batch_size``: the same clipped sums; a step's memory
bounded by one chunk).
"""

from __future__ import annotations

import keras
import numpy as np

from ...contract import release
from ...mechanisms.dpsgd import Recipe, make_dpsgd
from ...models.application import FINETUNE_PARTS, set_trainable_part
from ..registry import register_mechanism
from .dpsgd import APPLICATION_PHYSICAL_BATCH, _build, _public_release
from .mnist_recipes import recipe_for

__all__ = ["FINETUNE_APPLICATION_RECIPE"]

FINETUNE_APPLICATION_RECIPE = Recipe(expected_batch_size=1024, epochs=10, l2_norm_clip=1.0, learning_rate=1e-3,
                                     optimizer="adam", accountant="pld", reference_n=58_000)


def _public_copy(public: keras.Model) -> keras.Model:
    """A new model with the public model's architecture and weights (the public model itself stays as trained)."""
    model = keras.models.clone_model(public)
    model.set_weights(public.get_weights())
    return model


def _finetune(part: str):
    def build(ctx, epsilon, seed):
        ctx.require_public(f"dpsgd_finetune_{part}")
        if ctx.config.model != "mobilenet_v2":
            raise ValueError(f"dpsgd_finetune_{part} fine-tunes the mobilenet_v2 family, got model="
                             f"{ctx.config.model!r}: run it with --model mobilenet_v2")
        public = ctx.public_model(seed)
        model = set_trainable_part(_public_copy(public), part)
        recipe = recipe_for(ctx.config.options, epsilon, FINETUNE_APPLICATION_RECIPE, "finetune")
        dp = make_dpsgd(epsilon, ctx.config.delta, ctx.n_private, recipe=recipe, seed=seed, engine="tfdpmech",
                        physical_batch_size=APPLICATION_PHYSICAL_BATCH)
        release(dp.ledger, _public_release(ctx))
        trainable = int(sum(np.prod(v.shape) for v in model.trainable_variables))
        notes = {"initialised_from": public.name, "public": ctx.public_source, "trains": part,
                 "trainable_weights": trainable, "epochs": recipe.epochs,
                 "recipe": "tfdpmech.experiments.methods.application_finetune.FINETUNE_APPLICATION_RECIPE"}
        return _build(dp, model, ctx.x_private, ctx.y_private, notes, seed=seed)
    return build


_WHAT = {"head": "the Dense head only (backbone frozen)",
         "top": "the head and the last stage (blocks 13-16, the last 1x1 convolution)",
         "all": "every layer"}
for _part in FINETUNE_PARTS:
    register_mechanism(f"dpsgd_finetune_{_part}", _finetune(_part),
                       f"DP-SGD (Poisson) fine-tuning of the public mobilenet_v2 model (trained on public records "
                       f"only): {_WHAT[_part]}; proven",
                       mode="private", paper="dpsgd", uses_public=True,
                       options=("finetune_epochs", "finetune_recipe"))
