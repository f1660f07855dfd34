"""The hyper-parameters of the whole-MNIST preset's DP-SGD rows, stated before any run.

- :data:`TANH_CNN_RECIPE`: Tramèr & Boneh's published MNIST setting for the tanh CNN
  (``tfdpmech.models.tanh_cnn``; ICLR 2021, their repository's ``cnns.py --dataset=mnist
  --batch_size=512 --lr=0.5``): expected batch 512, clipping norm C = 0.1, SGD with momentum
  0.9 and step 0.5 on the mean clipped gradient (noisy sum / expected batch, as here), 40 epochs.
- :data:`SCATTER_LINEAR_RECIPE`: their linear model on ScatterNet features (``baselines.py
  --dataset=mnist --batch_size=4096 --lr=8``), with the features normalised per record (a fixed,
  data-independent map) instead of their privately estimated batch norm (whose clipping thresholds are
  medians of the private data); ``options["scatter_norm"] = "private_bn"`` takes a proven private
  normalisation instead (:mod:`tfdpmech.features.scatter_norm`).
- :data:`NONPRIVATE_CNN`: the same CNN without privacy: cross-entropy, SGD with momentum 0.9 and
  step 0.1, batch 512.

``reference_n`` is the 60,000 training images: a quick run on a few hundred records keeps the
sampling probability q = 512 / 60,000. The number of epochs of a run can be set per ε through the
comparison's ``options["dpsgd_epochs"]`` (``options["scatter_epochs"]`` for ``dpsgd_scatter``; an
int, or ``{ε: epochs}``), any other recipe field through ``options["dpsgd_recipe"]``
(``options["scatter_recipe"]``): ``{field: value}`` or ``{ε: {field: value}}`` (see :func:`recipe_for`).
"""

from __future__ import annotations

import dataclasses

from ...mechanisms.dpsgd import Recipe
from ...mechanisms.dpsgd.sampling import augmentation
from ..options import CHOICE_OPTIONS, at_epsilon, option_at

__all__ = ["TANH_CNN_RECIPE", "SCATTER_LINEAR_RECIPE", "NONPRIVATE_CNN", "NonPrivateRecipe", "epochs_for",
           "recipe_for", "augmentation_kind", "image_augmentation"]

TANH_CNN_RECIPE = Recipe(expected_batch_size=512, epochs=40, l2_norm_clip=0.1, learning_rate=0.5, optimizer="sgd",
                         momentum=0.9, accountant="pld", reference_n=60_000)
SCATTER_LINEAR_RECIPE = Recipe(expected_batch_size=4096, epochs=40, l2_norm_clip=0.1, learning_rate=8.0,
                               optimizer="sgd", momentum=0.9, accountant="pld", reference_n=60_000)


@dataclasses.dataclass(frozen=True)
class NonPrivateRecipe:
    batch_size: int = 512
    learning_rate: float = 0.1
    momentum: float = 0.9
    epochs: int = 20


NONPRIVATE_CNN = NonPrivateRecipe()


def epochs_for(options: dict, epsilon, default: int, option: str = "dpsgd_epochs") -> int:
    """The epochs of a run at ``epsilon``: ``options[option]`` as an int or ``{ε: epochs}``, else ``default``
    (the values are checked by :func:`~tfdpmech.experiments.options.check_options`)."""
    return option_at(options, epsilon, option, default)


def recipe_for(options: dict, epsilon, recipe: Recipe, prefix: str = "dpsgd") -> Recipe:
    """``recipe`` with the run's overrides at ``epsilon``: epochs from ``options[prefix + "_epochs"]``
    (:func:`epochs_for`), any other field from ``options[prefix + "_recipe"]``, given as
    ``{field: value}`` for every ε or ``{ε: {field: value}}`` per ε.

    Raises:
        ValueError: an override names no field of :class:`~tfdpmech.mechanisms.dpsgd.Recipe`.
    """
    recipe = recipe.replace(epochs=epochs_for(options, epsilon, recipe.epochs, prefix + "_epochs"))
    changes = dict((options or {}).get(prefix + "_recipe") or {})
    changes = at_epsilon(changes, epsilon, {})
    fields = {f.name for f in dataclasses.fields(Recipe)}
    unknown = sorted(set(changes) - fields)
    if unknown:
        raise ValueError(f"options[{prefix + '_recipe'!r}] names {unknown}, which are not Recipe fields; use any of "
                         f"{sorted(fields)}")
    return recipe.replace(**changes)


def augmentation_kind(dataset: str, kind: str | None = None) -> str:
    """The views of ``dpsgd_augmult`` and ``nonprivate_augmented`` on ``dataset`` (``options["augmentation"]``):
    ``"crop"``, a crop after 2-pixel reflect padding (a shift of up to 2 pixels), or ``"crop_flip"``, that crop and a
    left-right flip; None: ``"crop_flip"`` on Fashion-MNIST (a mirrored garment is the same class), ``"crop"``
    elsewhere (a mirrored digit is not)."""
    if kind is None:
        kind = "crop_flip" if dataset.startswith("fashion_mnist") else "crop"
    if kind not in CHOICE_OPTIONS["augmentation"]:
        raise ValueError(f"augmentation={kind!r}; use one of {CHOICE_OPTIONS['augmentation']}")
    return kind


def image_augmentation(dataset: str, kind: str | None = None):
    """``fn(record, seed)`` drawing one view of :func:`augmentation_kind`."""
    crop = augmentation.random_crop(2)
    if augmentation_kind(dataset, kind) == "crop_flip":
        return augmentation.compose(crop, augmentation.random_flip())
    return crop
