"""A ``keras.applications`` backbone for MNIST-sized images, its BatchNormalization replaced by GroupNormalization.

:func:`mobilenet_v2_gn` is Keras's own ``MobileNetV2`` (``weights=None``: nothing is downloaded) at width
``alpha``, reading a 28×28×1 image zero-padded to 32×32 (the smallest input MobileNetV2 takes) and repeated to three
channels, global average pooling, then a ``Dense`` head named ``"head"``. Every trainable BatchNormalization is
replaced by :func:`tfdpmech.replace_batch_norm` (GroupNormalization: no statistic mixes the records of a batch, so
DP-SGD clips each record's gradient exactly), the same network a user fine-tuning a ``keras.applications`` model
under DP gets.

:data:`FINETUNE_PARTS` names what a fine-tuning run trains (:func:`set_trainable_part`): the head only, the top
blocks (MobileNetV2's last stage, blocks 13–16, and its last 1×1 convolution) with the head, or every layer.
"""

from __future__ import annotations

import keras

from ..validation import check_positive_int

__all__ = ["mobilenet_v2_gn", "set_trainable_part", "FINETUNE_PARTS", "TOP_BLOCKS", "BACKBONE_GROUPS"]

FINETUNE_PARTS = ("head", "top", "all")
# MobileNetV2's last stage (blocks 13-16, at the 1/32 resolution) and its last 1×1 convolution with its norm
TOP_BLOCKS = ("block_13_", "block_14_", "block_15_", "block_16_", "Conv_1")
_SIDE = 32  # MobileNetV2's smallest input side
# the GroupNormalization groups chosen on public validation images (tools/finetune_backbone_groups.py,
# docs/results/finetune/backbone/tuning.md)
BACKBONE_GROUPS = 1


def mobilenet_v2_gn(num_classes: int = 10, input_shape=(28, 28, 1), *, alpha: float = 0.35,
                    groups: int | None = BACKBONE_GROUPS) -> keras.Model:
    """Keras's ``MobileNetV2`` (``weights=None``, width ``alpha``) with GroupNormalization, on small images.

    Args:
        num_classes: logits of the ``Dense`` head (named ``"head"``).
        input_shape: ``(height, width, channels)`` with height and width at most 32 and 1 or 3 channels; a
            smaller image is zero-padded to 32×32, one channel is repeated to three.
        alpha: MobileNetV2's width multiplier (one of Keras's: 0.35, 0.5, 0.75, 1.0, 1.3, 1.4).
        groups: the groups of every GroupNormalization (:func:`tfdpmech.replace_batch_norm`'s ``groups``; None
            for its default, the largest divisor of each layer's channels up to 32). The default,
            :data:`BACKBONE_GROUPS` = 1, normalises each record's whole feature map, as the public model trained
            far better with it on a validation part of the public images (``tools/finetune_backbone_groups.py``):
            at 32×32 the last stage's feature maps are 1×1, where 32 groups normalise a handful of values each.

    Raises:
        ValueError: an input that is not an image of at most 32×32 with 1 or 3 channels.
    """
    from ..mechanisms.dpsgd.clipping.batch_norm import replace_batch_norm

    check_positive_int(num_classes, "num_classes")
    shape = tuple(input_shape)
    if len(shape) != 3 or shape[0] > _SIDE or shape[1] > _SIDE or shape[2] not in (1, 3):
        raise ValueError(f"input_shape={shape!r}: mobilenet_v2_gn reads images of at most {_SIDE}×{_SIDE} with 1 or 3 "
                         "channels (height, width, channels); resize larger images first")
    inputs = keras.Input(shape, name="image")
    x = inputs
    pad_h, pad_w = _SIDE - shape[0], _SIDE - shape[1]
    if pad_h or pad_w:
        x = keras.layers.ZeroPadding2D(((pad_h // 2, pad_h - pad_h // 2), (pad_w // 2, pad_w - pad_w // 2)),
                                       name="pad_to_32")(x)
    if shape[2] == 1:
        x = keras.layers.Concatenate(name="gray_to_rgb")([x, x, x])
    backbone = keras.applications.MobileNetV2(input_tensor=x, include_top=False, weights=None, alpha=alpha,
                                              pooling="avg")
    outputs = keras.layers.Dense(num_classes, name="head")(backbone.output)
    model = keras.Model(inputs, outputs, name=f"mobilenet_v2_{alpha:g}_gn")
    return replace_batch_norm(model, groups=groups, verbose=False)


def set_trainable_part(model: keras.Model, part: str) -> keras.Model:
    """Make ``part`` of a :func:`mobilenet_v2_gn` model trainable and freeze the rest (in place; returns it).

    ``"head"``: the ``Dense`` head only; ``"top"``: the head and :data:`TOP_BLOCKS`; ``"all"``: every layer.
    """
    if part not in FINETUNE_PARTS:
        raise ValueError(f"part={part!r}; choose one of {FINETUNE_PARTS} (what a fine-tuning run trains)")
    for layer in model.layers:
        if part == "all":
            layer.trainable = True
        elif part == "head":
            layer.trainable = layer.name == "head"
        else:
            layer.trainable = layer.name == "head" or layer.name.startswith(TOP_BLOCKS)
    return model
