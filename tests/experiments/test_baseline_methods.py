"""The methods without privacy: ``nonprivate_augmented`` trains on fresh views of the records, each epoch."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.experiments.context import build_context
from tfdpmech.experiments.methods.mnist_recipes import image_augmentation
from tfdpmech.experiments.registry import METHODS
from tfdpmech.experiments.runner import CompareConfig


def _context(model="tanh_cnn", **options):
    config = CompareConfig(datasets=("mnist_sample",), methods=("nonprivate_augmented",), model=model, public=0,
                           options={"max_private": 32, "max_test": 8, **options})
    return build_context(config, "mnist_sample")


def _epoch(prepared):
    x, y = zip(*((xb.numpy(), yb.numpy()) for xb, yb in prepared.train))
    return np.concatenate(x), np.concatenate(y)


def _shifts(images, padding=2):
    """Every crop of each reflect-padded image: what dpsgd_augmult's crop can give, as (records, crops, h, w, c)."""
    h, w = images.shape[1:3]
    padded = np.pad(images, [(0, 0), (padding, padding), (padding, padding), (0, 0)], mode="reflect")
    return np.stack([padded[:, i:i + h, j:j + w] for i in range(2 * padding + 1) for j in range(2 * padding + 1)], 1)


def test_nonprivate_augmented_draws_a_fresh_view_of_every_record_each_epoch():
    ctx = _context()
    method = METHODS["nonprivate_augmented"]
    assert method.mode == "none" and not method.takes_epsilon
    prepared = method.prepare(ctx, None, 0)
    first, labels = _epoch(prepared)
    second, _ = _epoch(prepared)
    assert first.shape == ctx.x_private.shape and first.dtype == np.float32
    # the labels are the records' (shuffled), and every view is a 2-pixel shift of a record with that label
    np.testing.assert_array_equal(np.sort(labels.argmax(1)), np.sort(ctx.y_private.argmax(1)))
    crops = _shifts(ctx.x_private)
    for view, label in zip(first, labels):
        same = np.abs(crops - view).reshape(len(crops), crops.shape[1], -1).max(-1) < 1e-6
        assert same.any() and (ctx.y_private[same.any(1)].argmax(1) == label.argmax()).all()
    raw = ctx.x_private.reshape(len(first), -1)
    shifted = [not (np.abs(raw - view.reshape(-1)).max(-1) < 1e-6).any() for view in first]
    assert np.mean(shifted) > 0.5  # most views are shifted (1 crop in 25 is the record itself)
    rows = [np.sort(epoch.reshape(len(epoch), -1), 0) for epoch in (first, second)]
    assert not np.array_equal(*rows)  # other views in the next epoch, not the same ones reshuffled
    again, _ = _epoch(method.prepare(_context(), None, 0))
    np.testing.assert_array_equal(again, first)  # the same seed draws the same views
    assert prepared.notes["augmentation"] == "crop, one view per record and epoch"  # the digits' default


def test_the_augmentation_option_adds_the_flip():
    ctx = _context(augmentation="crop_flip")
    views, _ = _epoch(METHODS["nonprivate_augmented"].prepare(ctx, None, 0))
    crops = _shifts(ctx.x_private).reshape(len(ctx.x_private) * 25, -1)
    mirrored = _shifts(ctx.x_private[:, :, ::-1]).reshape(len(crops), -1)
    flat = views.reshape(len(views), -1)
    shifted = np.array([(np.abs(crops - v).max(-1) < 1e-6).any() for v in flat])
    flipped = np.array([(np.abs(mirrored - v).max(-1) < 1e-6).any() for v in flat])
    assert (shifted | flipped).all()  # every view a shift of its record, mirrored or not
    assert (flipped & ~shifted).any()  # and some are mirrored
    # the default: the flip on Fashion-MNIST and its validation split, the crop alone on digits
    assert image_augmentation("fashion_mnist_validation").__name__ == "composed"
    assert image_augmentation("mnist").__name__ == image_augmentation("fashion_mnist", "crop").__name__ == "crop"
    with pytest.raises(ValueError, match="augmentation='flip'; use one of"):
        image_augmentation("mnist", "flip")


def test_nonprivate_augmented_needs_the_tanh_cnn():
    with pytest.raises(ValueError, match="--model tanh_cnn"):
        METHODS["nonprivate_augmented"].prepare(_context(model="cnn"), None, 0)


def test_nonprivate_keeps_the_records_as_they_are():
    prepared = METHODS["nonprivate"].prepare(_context(), None, 0)
    x, _ = _epoch(prepared)
    np.testing.assert_array_equal(np.sort(x.reshape(len(x), -1), 0),
                                  np.sort(tf.reshape(_context().x_private, (len(x), -1)).numpy(), 0))
    assert "augmentation" not in prepared.notes
