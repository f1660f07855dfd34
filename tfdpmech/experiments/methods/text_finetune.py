"""Fine-tuning a public text model on private text: ``nonprivate_text`` and ``dpsgd_text_<part>``.

The model family ``bert_tiny`` (:func:`tfdpmech.models.text_classifier.bert_text_classifier`: keras-hub's
``BertBackbone``, 2 layers, hidden 128) is trained on the public texts without privacy (``ctx.public_model(seed)``;
the ``public_only`` row scores it). Every row below starts from a copy of it and trains on the private texts:

* ``nonprivate_text``: every weight, without privacy (the ceiling the private rows are read against);
* ``dpsgd_text_head``: Poisson DP-SGD on the ``logits`` head only, the backbone frozen;
* ``dpsgd_text_lora``: the same on rank-4 LoRA adapters of the backbone and the head;
* ``dpsgd_text_all``: the same on every weight.

The recipes (:data:`TEXT_DPSGD_RECIPE`, :data:`TEXT_LEARNING_RATES`, :data:`NONPRIVATE_TEXT_RECIPE`) were stated
before any private run: Li et al. (ICLR 2022) fine-tune with large batches, Adam and a step that shrinks as more
weights train; with 8,454 private texts an expected batch of 512 (q ≈ 0.06) leaves about 100 steps in 6 epochs.
Those 6 epochs moved no DP row more than 1.6 points from the public model at any ε, so each DP part's epochs and
step are chosen on a validation split of the private training texts (:data:`TEXT_CHOSEN`, ``tools/text_tuning.py``);
the batch, C and the optimizer stay as stated. ``options["text_epochs"]`` replaces the epochs (the quick run's),
``options["text_recipe"]`` any other recipe field (``{field: value}`` or ``{ε: {...}}``).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from ...contract import release
from ...mechanisms.dpsgd import Recipe, make_dpsgd
from ..options import option_at
from ..registry import Prepared, register_mechanism, register_method
from .dpsgd import _build, _public_release
from .mnist_recipes import recipe_for

__all__ = ["TEXT_DPSGD_RECIPE", "TEXT_LEARNING_RATES", "TEXT_CHOSEN", "NONPRIVATE_TEXT_RECIPE"]

TEXT_DPSGD_RECIPE = Recipe(expected_batch_size=512, epochs=6, l2_norm_clip=1.0, learning_rate=5e-4,
                           optimizer="adam", accountant="pld", reference_n=8454)
# the step of each part: the fewer weights train, the larger the step (the head alone: 258 weights)
TEXT_LEARNING_RATES = {"head": 5e-3, "lora": 2e-3, "all": 5e-4}
# each part's epochs and step chosen on sentiment_snippets_validation at ε = 3 (tools/text_tuning.py,
# docs/results/text/tuning: 18 epochs at 1, 4 and 16 times the stated step; the best validation accuracy)
TEXT_CHOSEN: dict = {"head": {"epochs": 18, "learning_rate": 5e-3}, "lora": {"epochs": 18, "learning_rate": 2e-3},
                     "all": {"epochs": 18, "learning_rate": 2e-3}}
NONPRIVATE_TEXT_RECIPE = {"epochs": 4, "learning_rate": 2e-4, "batch_size": 32}
_OPTIONS = ("text_epochs", "text_recipe")


def public_copy(ctx, seed) -> keras.Model:
    """A fresh model of the comparison's text family holding the public model's weights."""
    public = ctx.public_model(seed)  # its training is reported beside, not in the private time
    model = ctx.build("standard")
    model.set_weights(public.get_weights())
    return model


def _trainable(model) -> int:
    return int(sum(np.prod(v.shape) for v in model.trainable_variables))


def _nonprivate_text(ctx, epsilon, seed) -> Prepared:
    ctx.require_public("nonprivate_text")
    recipe = NONPRIVATE_TEXT_RECIPE
    model = public_copy(ctx, seed)
    model.compile(keras.optimizers.Adam(recipe["learning_rate"]),
                  loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    records = (tf.data.Dataset.from_tensor_slices((ctx.x_private, ctx.y_private)).shuffle(ctx.n_private, seed=seed)
               .batch(recipe["batch_size"]))
    epochs = option_at(ctx.config.options, None, "text_epochs", recipe["epochs"])
    return Prepared(model, records, epochs=epochs,
                    notes={"initialised_from": "the public model", "public": ctx.public_source, "trains": "all",
                           "recipe": "tfdpmech.experiments.methods.text_finetune.NONPRIVATE_TEXT_RECIPE"})


def _dpsgd_text(part: str):
    def build(ctx, epsilon, seed):
        from ...models.text_classifier import set_text_trainable_part  # the text extra (keras-hub)

        ctx.require_public(f"dpsgd_text_{part}")
        model = set_text_trainable_part(public_copy(ctx, seed), part)
        stated = TEXT_DPSGD_RECIPE.replace(**{"learning_rate": TEXT_LEARNING_RATES[part], **TEXT_CHOSEN.get(part, {})})
        recipe = recipe_for(ctx.config.options, epsilon, stated, "text")
        dp = make_dpsgd(epsilon, ctx.config.delta, ctx.n_private, recipe=recipe, seed=seed, engine="tfdpmech")
        release(dp.ledger, _public_release(ctx))
        notes = {"initialised_from": "the public model", "public": ctx.public_source, "trains": part,
                 "trainable_weights": _trainable(model), "epochs": recipe.epochs,
                 "recipe": "tfdpmech.experiments.methods.text_finetune.TEXT_DPSGD_RECIPE, learning rate "
                           f"TEXT_LEARNING_RATES[{part!r}]" + (f", TEXT_CHOSEN[{part!r}]" if part in TEXT_CHOSEN else "")}
        return _build(dp, model, ctx.x_private, ctx.y_private, notes, seed=seed,
                      loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    return build


_TEXT_EXTRA = (("keras_hub", "pip install 'tfdpmech[text]' (keras-hub and tensorflow-text)"),)
register_method("nonprivate_text", _nonprivate_text,
                "no privacy: the public text model fine-tuned on the private texts, every weight (Adam 2e-4, "
                "batch 32, 4 epochs)", mode="none", data=("text",), uses_public=True, options=("text_epochs",),
                requires=_TEXT_EXTRA)
# the parts of models.text_classifier.TEXT_PARTS
_WHAT = {"head": "the head only (backbone frozen)", "lora": "rank-4 LoRA adapters of the backbone and the head",
         "all": "every weight"}
for _part in _WHAT:
    register_mechanism(f"dpsgd_text_{_part}", _dpsgd_text(_part),
                       f"DP-SGD (Poisson) fine-tuning of the public text model (trained on public texts only): "
                       f"{_WHAT[_part]}; proven", mode="private", paper="dpsgd", data=("text",), uses_public=True,
                       options=_OPTIONS, requires=_TEXT_EXTRA)
