"""The layer table of ``test_layer_catalogue.py``: a tiny model around each Keras layer class, and the outcome.

Keyed by class name (aliases such as ``Convolution2D`` are the same class). Entries for classes that
exist on one stack only are simply unused on the other.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import keras
import numpy as np
import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Spec:
    """``build() -> (model, the layer)``; ``expect``: "exact", "refused" or "none"; ``random``: draws in training."""

    build: Callable
    expect: str
    random: bool = False


def _head(h):
    """Dense logits over the layer's output (ids go through an Embedding first)."""
    h = tf.nest.flatten(h)[0]
    if "int" in str(getattr(h.dtype, "name", h.dtype)):
        h = keras.layers.Embedding(64, 2)(h)
    if len(h.shape) == 4:  # images: any size (a random crop's output differs in training and inference)
        h = keras.layers.GlobalAveragePooling2D()(h)
    if len(h.shape) > 2:
        h = keras.layers.Flatten()(h)
    return keras.layers.Dense(2)(h)


def one(make, shape, dtype="float32"):
    """``Input(shape) → make() → Dense(2)``."""
    def build():
        layer = make()
        inputs = keras.Input(shape, dtype=dtype)
        return keras.Model(inputs, _head(layer(inputs))), layer
    return build


def pair(make, shape, call=lambda layer, x: layer([x, x])):
    """``Input(shape)`` used twice (merge layers, attention): ``call(layer, x) → Dense(2)``."""
    def build():
        layer = make()
        inputs = keras.Input(shape)
        return keras.Model(inputs, _head(call(layer, inputs))), layer
    return build


def inner(wrap, make_inner, shape, dtype="float32"):
    """A wrapper or RNN around an inner layer; the spec's layer is the inner one (a cell) or the wrapper."""
    def build():
        part = make_inner()
        outer = wrap(part)
        inputs = keras.Input(shape, dtype=dtype)
        return keras.Model(inputs, _head(outer(inputs))), part
    return build


L = keras.layers
IMAGE = (6, 6, 3)
SEQ = (4, 3)


def _exact(make, shape, dtype="float32"):
    return Spec(one(make, shape, dtype), "exact")


def _random(make, shape=IMAGE, expect="exact"):
    return Spec(one(make, shape), expect, random=True)


def _none(make, shape, dtype="float32"):
    return Spec(one(make, shape, dtype), "none")


def _adapted(layer):
    layer.adapt(np.random.default_rng(0).random((20, 4)).astype("float32"))  # state from public data
    return layer


def _attention(cls, **kw):
    return Spec(pair(lambda: getattr(L, cls)(**kw), SEQ, lambda layer, x: layer(x, x)), "exact")


SPECS = {
    # -- weights: per-example clipping must be exact -------------------------------------------------
    "Dense": _exact(lambda: L.Dense(3), (4,)),
    "EinsumDense": _exact(lambda: L.EinsumDense("ab,bc->ac", output_shape=3, bias_axes="c"), (4,)),
    "Embedding": _exact(lambda: L.Embedding(8, 3), (5,), "int32"),
    "ReversibleEmbedding": _exact(lambda: L.ReversibleEmbedding(8, 3), (5,), "int32"),
    "Conv1D": _exact(lambda: L.Conv1D(2, 2), (6, 2)),
    "Conv2D": _exact(lambda: L.Conv2D(2, 2), (5, 5, 2)),
    "Conv3D": _exact(lambda: L.Conv3D(2, 2), (3, 3, 3, 1)),
    "Conv1DTranspose": _exact(lambda: L.Conv1DTranspose(2, 2), (4, 2)),
    "Conv2DTranspose": _exact(lambda: L.Conv2DTranspose(2, 2), (3, 3, 2)),
    "Conv3DTranspose": _exact(lambda: L.Conv3DTranspose(2, 2), (2, 2, 2, 1)),
    "DepthwiseConv1D": _exact(lambda: L.DepthwiseConv1D(2), (6, 2)),
    "DepthwiseConv2D": _exact(lambda: L.DepthwiseConv2D(2), (5, 5, 2)),
    "SeparableConv1D": _exact(lambda: L.SeparableConv1D(2, 2), (6, 2)),
    "SeparableConv2D": _exact(lambda: L.SeparableConv2D(2, 2), (5, 5, 2)),
    "LocallyConnected1D": _exact(lambda: L.LocallyConnected1D(2, 2), (5, 2)),
    "LocallyConnected2D": _exact(lambda: L.LocallyConnected2D(2, 2), (4, 4, 1)),
    "ConvLSTM1D": _exact(lambda: L.ConvLSTM1D(2, 2), (3, 4, 1)),
    "ConvLSTM2D": _exact(lambda: L.ConvLSTM2D(2, 2), (2, 3, 3, 1)),
    "ConvLSTM3D": _exact(lambda: L.ConvLSTM3D(1, 2), (2, 2, 2, 2, 1)),
    "SimpleRNN": _exact(lambda: L.SimpleRNN(3), SEQ),
    "LSTM": _exact(lambda: L.LSTM(3), SEQ),
    "GRU": _exact(lambda: L.GRU(3), SEQ),
    "RNN": Spec(inner(lambda cell: cell, lambda: L.RNN(L.GRUCell(2)), SEQ), "exact"),
    "SimpleRNNCell": Spec(inner(L.RNN, lambda: L.SimpleRNNCell(2), SEQ), "exact"),
    "LSTMCell": Spec(inner(L.RNN, lambda: L.LSTMCell(2), SEQ), "exact"),
    "GRUCell": Spec(inner(L.RNN, lambda: L.GRUCell(2), SEQ), "exact"),
    "StackedRNNCells": Spec(inner(L.RNN, lambda: L.StackedRNNCells([L.SimpleRNNCell(2), L.GRUCell(2)]), SEQ),
                            "exact"),
    "Bidirectional": _exact(lambda: L.Bidirectional(L.LSTM(2)), SEQ),
    "TimeDistributed": _exact(lambda: L.TimeDistributed(L.Dense(2)), SEQ),
    "MultiHeadAttention": _attention("MultiHeadAttention", num_heads=2, key_dim=2),
    "GroupedQueryAttention": _attention("GroupQueryAttention", head_dim=2, num_query_heads=2, num_key_value_heads=1),
    "Attention": Spec(pair(lambda: L.Attention(use_scale=True), SEQ), "exact"),
    "AdditiveAttention": Spec(pair(lambda: L.AdditiveAttention(use_scale=True), SEQ), "exact"),
    "PReLU": _exact(lambda: L.PReLU(), (4,)),
    "LayerNormalization": _exact(lambda: L.LayerNormalization(), (4,)),
    "GroupNormalization": _exact(lambda: L.GroupNormalization(groups=2), (4,)),
    "RMSNormalization": _exact(lambda: L.RMSNormalization(), (4,)),
    "Normalization": _exact(lambda: _adapted(L.Normalization()), (4,)),
    "STFTSpectrogram": _exact(lambda: L.STFTSpectrogram(frame_length=8, frame_step=4, fft_length=8), (32, 1)),
    # -- refused before the release ------------------------------------------------------------------
    "BatchNormalization": Spec(one(lambda: L.BatchNormalization(), (4,)), "refused"),  # batch statistics
    "SpectralNormalization": Spec(one(lambda: L.SpectralNormalization(L.Dense(3)), (4,)), "refused"),  # assigns its kernel
    "ActivityRegularization": Spec(one(lambda: L.ActivityRegularization(l2=0.01), (4,)), "refused"),  # a batch loss
    "CutMix": _random(lambda: L.CutMix(), expect="refused"),  # mixes the records of a batch
    "MixUp": _random(lambda: L.MixUp(), expect="refused"),
    "StringLookup": Spec(one(lambda: L.StringLookup(vocabulary=["a", "b"]), (2,), "string"), "refused"),
    "TextVectorization": Spec(one(lambda: L.TextVectorization(vocabulary=["a", "b"], output_sequence_length=3), (1,),
                                  "string"), "refused"),
    # -- random in training, state independent of the data ------------------------------------------
    "Dropout": _random(lambda: L.Dropout(0.3), (4,)),
    "SpatialDropout1D": _random(lambda: L.SpatialDropout1D(0.3), SEQ),
    "SpatialDropout2D": _random(lambda: L.SpatialDropout2D(0.3)),
    "SpatialDropout3D": _random(lambda: L.SpatialDropout3D(0.3), (2, 2, 2, 2)),
    "GaussianDropout": _random(lambda: L.GaussianDropout(0.3), (4,)),
    "GaussianNoise": _random(lambda: L.GaussianNoise(0.1), (4,)),
    "AlphaDropout": _random(lambda: L.AlphaDropout(0.3), (4,)),
    "RandomFlip": _random(lambda: L.RandomFlip()),
    "RandomRotation": _random(lambda: L.RandomRotation(0.1)),
    "RandomTranslation": _random(lambda: L.RandomTranslation(0.1, 0.1)),
    "RandomZoom": _random(lambda: L.RandomZoom(0.1)),
    "RandomCrop": _random(lambda: L.RandomCrop(4, 4)),
    "RandomHeight": _random(lambda: L.RandomHeight(0.2)),
    "RandomWidth": _random(lambda: L.RandomWidth(0.2)),
    "RandomContrast": _random(lambda: L.RandomContrast(0.2)),
    "RandomBrightness": _random(lambda: L.RandomBrightness(0.2, value_range=(0, 1))),
    "RandomShear": _random(lambda: L.RandomShear(0.1)),
    "RandomErasing": _random(lambda: L.RandomErasing(value_range=(0, 1))),
    "RandomGrayscale": _random(lambda: L.RandomGrayscale()),
    "RandomInvert": _random(lambda: L.RandomInvert(value_range=(0, 1))),
    "RandomPerspective": _random(lambda: L.RandomPerspective()),
    "RandomGaussianBlur": _random(lambda: L.RandomGaussianBlur(value_range=(0, 1))),
    "RandomElasticTransform": _random(lambda: L.RandomElasticTransform(value_range=(0, 1))),
    "RandomColorJitter": _random(lambda: L.RandomColorJitter(value_range=(0, 1), brightness_factor=0.1)),
    "RandomColorDegeneration": _random(lambda: L.RandomColorDegeneration(0.2)),
    "RandomHue": _random(lambda: L.RandomHue(0.2, value_range=(0, 1))),
    "RandomSaturation": _random(lambda: L.RandomSaturation(0.2, value_range=(0, 1))),
    "RandomSharpness": _random(lambda: L.RandomSharpness(0.2, value_range=(0, 1))),
    "RandomPosterization": _random(lambda: L.RandomPosterization(factor=(2, 4), value_range=(0, 1))),
    "AugMix": _random(lambda: L.AugMix(value_range=(0, 1)), expect="refused"),  # draws more or fewer numbers by the data
    "RandAugment": _random(lambda: L.RandAugment(value_range=(0, 1))),
    "Solarization": _random(lambda: L.Solarization(addition_factor=0.1, value_range=(0, 1))),
    # -- no variable, nothing the engine could update ------------------------------------------------
    "Activation": _none(lambda: L.Activation("relu"), (4,)),
    "ELU": _none(lambda: L.ELU(), (4,)),
    "LeakyReLU": _none(lambda: L.LeakyReLU(), (4,)),
    "ReLU": _none(lambda: L.ReLU(), (4,)),
    "Softmax": _none(lambda: L.Softmax(), (4,)),
    "ThresholdedReLU": _none(lambda: L.ThresholdedReLU(), (4,)),
    "Identity": _none(lambda: L.Identity(), (4,)),
    "Lambda": _none(lambda: L.Lambda(lambda t: 2.0 * t), (4,)),
    "Masking": _none(lambda: L.Masking(), SEQ),
    "Flatten": _none(lambda: L.Flatten(), SEQ),
    "Permute": _none(lambda: L.Permute((2, 1)), SEQ),
    "RepeatVector": _none(lambda: L.RepeatVector(2), (4,)),
    "Reshape": _none(lambda: L.Reshape((2, 2)), (4,)),
    "UnitNormalization": _none(lambda: L.UnitNormalization(), (4,)),
    "Rescaling": _none(lambda: L.Rescaling(0.5), (4,)),
    "Resizing": _none(lambda: L.Resizing(4, 4), IMAGE),
    "CenterCrop": _none(lambda: L.CenterCrop(4, 4), IMAGE),
    "AutoContrast": _none(lambda: L.AutoContrast(value_range=(0, 1)), IMAGE),
    "Equalization": _none(lambda: L.Equalization(value_range=(0, 1)), IMAGE),
    "Pipeline": _none(lambda: L.Pipeline([L.Rescaling(0.5)]), (4,)),
    "MelSpectrogram": _none(lambda: L.MelSpectrogram(fft_length=16, sequence_stride=8, sequence_length=16,
                                                      num_mel_bins=4, sampling_rate=800), (64,)),
    "Discretization": _none(lambda: L.Discretization(bin_boundaries=[0.3, 0.6]), (4,)),
    "CategoryEncoding": _none(lambda: L.CategoryEncoding(num_tokens=8, output_mode="multi_hot"), (3,), "int32"),
    "Hashing": _none(lambda: L.Hashing(num_bins=4), (3,), "int32"),
    "HashedCrossing": Spec(pair(lambda: L.HashedCrossing(num_bins=4), (1,),
                                lambda layer, x: layer((L.Lambda(lambda t: tf.cast(t, "int64"))(x),) * 2)), "none"),
    "IntegerLookup": _none(lambda: L.IntegerLookup(vocabulary=[1, 2, 3]), (3,), "int64"),
    "Add": Spec(pair(lambda: L.Add(), (4,)), "none"),
    "Subtract": Spec(pair(lambda: L.Subtract(), (4,)), "none"),
    "Multiply": Spec(pair(lambda: L.Multiply(), (4,)), "none"),
    "Average": Spec(pair(lambda: L.Average(), (4,)), "none"),
    "Maximum": Spec(pair(lambda: L.Maximum(), (4,)), "none"),
    "Minimum": Spec(pair(lambda: L.Minimum(), (4,)), "none"),
    "Concatenate": Spec(pair(lambda: L.Concatenate(), (4,)), "none"),
    "Dot": Spec(pair(lambda: L.Dot(axes=1), (4,)), "none"),
    **{f"{kind}Pooling{d}D": _none(lambda kind=kind, d=d: getattr(L, f"{kind}Pooling{d}D")(2), (4,) * d + (2,))
       for kind in ("Average", "Max") for d in (1, 2, 3)},
    **{f"{kind}Pooling{d}D": _none(lambda kind=kind, d=d: getattr(L, f"{kind}Pooling{d}D")(), (4,) * d + (2,))
       for kind in ("GlobalAverage", "GlobalMax") for d in (1, 2, 3)},
    **{f"Adaptive{kind}Pooling{d}D": _none(lambda kind=kind, d=d: getattr(L, f"Adaptive{kind}Pooling{d}D")(2),
                                           (4,) * d + (2,))
       for kind in ("Average", "Max") for d in (1, 2, 3)},
    **{f"{kind}{d}D": _none(lambda kind=kind, d=d: getattr(L, f"{kind}{d}D")(), (4,) * d + (2,))
       for kind in ("Cropping", "ZeroPadding", "UpSampling") for d in (1, 2, 3)},
}

NOT_TESTABLE = {
    "Layer": "the base class: a layer of one's own is checked by the engine's probes, not by class",
    "Wrapper": "a base class (Bidirectional and TimeDistributed are in the table)",
    "AbstractRNNCell": "a base class (the cells are in the table)",
    "InputLayer": "the model's input itself, no computation",
    "TFSMLayer": "wraps a SavedModel from disk; its variables are the SavedModel's",
    "JaxLayer": "the JAX backend's wrapper; this stack runs TensorFlow",
    "FlaxLayer": "the JAX backend's wrapper; this stack runs TensorFlow",
    "TorchModuleWrapper": "the PyTorch backend's wrapper; this stack runs TensorFlow",
    "DenseFeatures": "takes a dict of tf.feature_column features (deprecated); DP-SGD's records are arrays",
    "MaxNumBoundingBoxes": "pads bounding-box annotations, not records of a model's input",
}

# the layers whose tiny models take seconds each (recurrent loops, chains of augmentations): run with the slow
# tests; SimpleRNN keeps the recurrent layers in the fast suite
SLOW = {"LSTM", "GRU", "SimpleRNNCell", "LSTMCell", "GRUCell", "StackedRNNCells", "RNN", "Bidirectional", "ConvLSTM1D",
        "ConvLSTM2D", "ConvLSTM3D", "AugMix", "RandAugment", "RandomElasticTransform", "RandomGaussianBlur"}
