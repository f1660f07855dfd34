"""Methods without privacy: the reference points every private row is read against."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from ...losses import TaylorCrossEntropy, taylor_coefficients
from ...mechanisms.input_perturbation import logistic_constants
from ...models import linear_model as erm_linear_model
from ..registry import Prepared, register_method
from ..options import option_at
from .mnist_recipes import NONPRIVATE_CNN, augmentation_kind, image_augmentation


def full_batch(x, y) -> tf.data.Dataset:
    """The whole set as one batch (the DP-ERM recipe's full-batch gradient steps)."""
    return tf.data.Dataset.from_tensors((np.asarray(x, np.float32), np.asarray(y, np.float32)))


def tabular_labels(ctx, y_one_hot) -> np.ndarray:
    """Binary tasks train one logit on 0/1 labels; multi-class tasks keep one-hot labels."""
    return np.argmax(y_one_hot, 1)[:, None].astype(np.float32) if ctx.num_classes == 2 else y_one_hot


def tabular_loss(num_classes: int):
    return (keras.losses.BinaryCrossentropy(from_logits=True) if num_classes == 2
            else keras.losses.CategoricalCrossentropy(from_logits=True))


def _nonprivate(ctx, epsilon, seed) -> Prepared:
    if ctx.kind == "tabular":  # L2-regularised logistic regression, full-batch GD (Kang et al. §6's baseline)
        k = logistic_constants(ctx.config.l2, 1.0, num_classes=ctx.num_classes)
        model = erm_linear_model(ctx.x_private.shape[1], ctx.num_classes, l2=ctx.config.l2,
                                 theta_bound=k.theta_bound)
        x = ctx.x_private.astype(np.float64)
        lr = 1.0 / (k.phi2 * np.linalg.eigvalsh(x.T @ x / len(x))[-1] + k.l2)
        model.compile(keras.optimizers.SGD(lr), loss=tabular_loss(ctx.num_classes))
        return Prepared(model, full_batch(ctx.x_private, tabular_labels(ctx, ctx.y_private)))
    if ctx.config.model == "tanh_cnn":  # DP-SGD's network, cross-entropy, plain SGD with momentum
        return _nonprivate_cnn(ctx, seed)
    # the AdLM network and Taylor loss with the noise off: the same code path as the mechanisms
    model = ctx.build("private")
    model.compile(ctx.optimizer(), loss=TaylorCrossEntropy(batch_size=ctx.config.batch_size))
    train = (tf.data.Dataset.from_tensor_slices((ctx.x_private, taylor_coefficients(ctx.y_private)))
             .shuffle(ctx.n_private, seed=seed).batch(ctx.config.batch_size, drop_remainder=True))
    # options["nonprivate_epochs"]: the quick presets train the reference to convergence on their few records
    epochs = (ctx.config.options or {}).get("nonprivate_epochs")
    return Prepared(model, train, epochs=None if epochs is None else int(epochs),
                    examples_per_epoch=ctx.n_private // ctx.config.batch_size * ctx.config.batch_size,
                    notes={"records_per_epoch": "full batches only (the Taylor loss is calibrated per batch size)"})


def _nonprivate_cnn(ctx, seed, augmentation=None) -> Prepared:
    recipe = NONPRIVATE_CNN
    model = ctx.build("standard")
    model.compile(keras.optimizers.SGD(recipe.learning_rate, momentum=recipe.momentum),
                  loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    batch = min(recipe.batch_size, ctx.n_private)
    records = tf.data.Dataset.from_tensor_slices((ctx.x_private, ctx.y_private)).shuffle(ctx.n_private, seed=seed)
    notes = {"recipe": "tfdpmech.experiments.methods.mnist_recipes.NONPRIVATE_CNN", "network": model.name}
    if augmentation is not None:  # one fresh view of every record each epoch, from a seeded stream
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
        records = tf.data.Dataset.zip((records, seeds)).map(lambda xy, s: (augmentation(xy[0], s), xy[1]))
    epochs = (ctx.config.options or {}).get("nonprivate_epochs", recipe.epochs)
    return Prepared(model, records.batch(batch), epochs=epochs, notes=notes)


def _nonprivate_augmented(ctx, epsilon, seed) -> Prepared:
    """``nonprivate`` on the tanh CNN with ``dpsgd_augmult``'s augmentation: what the views do without privacy."""
    if ctx.kind != "image" or ctx.x_private.ndim != 4 or ctx.config.model != "tanh_cnn":
        raise ValueError("nonprivate_augmented augments images (height, width, channels) for the tanh CNN: run it "
                         "on an image dataset with --model tanh_cnn")
    kind = augmentation_kind(ctx.dataset, option_at(ctx.config.options, None, "augmentation", None))
    prepared = _nonprivate_cnn(ctx, seed, augmentation=image_augmentation(ctx.dataset, kind))
    prepared.notes["augmentation"] = f"{kind}, one view per record and epoch"
    return prepared


register_method("nonprivate", _nonprivate,
                "no privacy: images: the AdLM network and Taylor loss with the noise off (model tanh_cnn: that CNN "
                "with cross-entropy and SGD); tabular: L2-regularised "
                "logistic regression by full-batch gradient descent", mode="none", data=("image", "tabular"),
                options=("nonprivate_epochs",))
register_method("nonprivate_augmented", _nonprivate_augmented,
                "no privacy: the tanh CNN as nonprivate, each epoch on one fresh view of every record drawn by "
                "dpsgd_augmult's augmentation (options['augmentation']: a 2-pixel shift, with or without a "
                "left-right flip)",
                mode="none", data=("image",), options=("nonprivate_epochs", "augmentation"))
