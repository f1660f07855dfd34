"""Today's architectures for DP-SGD on images and sequences: transformers, a ViT, Conv1D, normalised CNNs, RNNs.

Small versions of the models people train with DP-SGD beyond MNIST's MLPs and CNNs, each built from
stock Keras layers (plus :class:`PositionEmbedding`), sized for a CPU. The image models read 28×28×1
images (MNIST, Fashion-MNIST); the sequence models read rows of a 28×28 image as 28 steps of 28
features, or token ids. All end in logits.

* :func:`vit`: a Vision Transformer on 7×7 patches (16 tokens): patch projection, learned positions,
  pre-norm encoder blocks (LayerNormalization, MultiHeadAttention, feed-forward), mean pooling.
* :func:`transformer_classifier`: token and position embeddings, encoder blocks, mean pooling (ids).
* :func:`conv1d_rows`, :func:`conv1d_text`: Conv1D over an image's rows / over embedded tokens.
* :func:`lstm_rows`, :func:`gru_rows`: a recurrent layer reading the image row by row.
* :func:`groupnorm_cnn`, :func:`layernorm_cnn`: the tanh CNN's convolutions with a normalisation after each.
* :func:`depthwise_cnn`, :func:`transpose_cnn`, :func:`conv3d_net`: depthwise and separable convolutions,
  a transposed convolution, a 3-D convolution (on the image seen as a volume of 4 slices).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from ..validation import check_positive_int

__all__ = ["PositionEmbedding", "vit", "transformer_classifier", "conv1d_rows", "conv1d_text", "lstm_rows",
           "gru_rows", "groupnorm_cnn", "layernorm_cnn", "depthwise_cnn", "transpose_cnn", "conv3d_net",
           "ARCHITECTURES"]


@keras.saving.register_keras_serializable(package="tfdpmech")
class PositionEmbedding(keras.layers.Layer):
    """Adds a learned embedding of each position (0 … T−1) to a ``(batch, T, dim)`` input.

    The table is a ``keras.layers.Embedding`` looked up at ``arange(T)``: the same ids for every record,
    which DP-SGD's embedding rule broadcasts to one copy per record.
    """

    def __init__(self, max_length: int, dim: int, **kwargs):
        super().__init__(**kwargs)
        self.max_length, self.dim = check_positive_int(max_length, "max_length"), check_positive_int(dim, "dim")
        self.positions = keras.layers.Embedding(self.max_length, self.dim, name="positions")

    def build(self, input_shape):
        self.positions.build((input_shape[1],))
        super().build(input_shape)

    def call(self, inputs):  # TensorFlow ops: Keras 3 on TensorFlow and Keras 2.15 alike
        return inputs + tf.cast(self.positions(tf.range(tf.shape(inputs)[1])), inputs.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "max_length": self.max_length, "dim": self.dim}


def _encoder_block(x, dim: int, heads: int, hidden: int):
    """Pre-norm transformer block: ``x + MHA(LN(x))``, then ``+ FFN(LN(·))``."""
    h = keras.layers.LayerNormalization(epsilon=1e-6)(x)
    x = x + keras.layers.MultiHeadAttention(heads, dim // heads)(h, h)
    h = keras.layers.LayerNormalization(epsilon=1e-6)(x)
    h = keras.layers.Dense(hidden, activation="gelu")(h)
    return x + keras.layers.Dense(dim)(h)


def vit(num_classes: int = 10, *, input_shape=(28, 28, 1), patch: int = 7, dim: int = 64, depth: int = 2,
        heads: int = 4, hidden: int = 128, name: str = "vit") -> keras.Model:
    """A small Vision Transformer: non-overlapping ``patch``×``patch`` patches projected to ``dim``, learned
    position embeddings, ``depth`` pre-norm encoder blocks, a final LayerNormalization, mean pooling."""
    height, width, channels = input_shape
    if height % patch or width % patch:
        raise ValueError(f"patch={patch} must divide the image's height and width, got input_shape={input_shape}")
    rows, cols = height // patch, width // patch
    inputs = keras.Input(tuple(input_shape))
    x = keras.layers.Reshape((rows, patch, cols, patch * channels))(inputs)
    x = keras.layers.Permute((1, 3, 2, 4))(x)
    x = keras.layers.Reshape((rows * cols, patch * patch * channels))(x)
    x = PositionEmbedding(rows * cols, dim)(keras.layers.Dense(dim)(x))
    for _ in range(depth):
        x = _encoder_block(x, dim, heads, hidden)
    x = keras.layers.GlobalAveragePooling1D()(keras.layers.LayerNormalization(epsilon=1e-6)(x))
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x), name=name)


def transformer_classifier(num_classes: int = 2, *, vocabulary: int = 1000, length: int = 64, dim: int = 64,
                           depth: int = 1, heads: int = 2, hidden: int = 128,
                           name: str = "transformer_classifier") -> keras.Model:
    """A text classifier: token Embedding plus PositionEmbedding, ``depth`` encoder blocks, mean pooling."""
    ids = keras.Input((length,), dtype="int32")
    x = PositionEmbedding(length, dim)(keras.layers.Embedding(vocabulary, dim)(ids))
    for _ in range(depth):
        x = _encoder_block(x, dim, heads, hidden)
    x = keras.layers.GlobalAveragePooling1D()(keras.layers.LayerNormalization(epsilon=1e-6)(x))
    return keras.Model(ids, keras.layers.Dense(num_classes)(x), name=name)


def _rows(input_shape):
    return keras.Input(tuple(input_shape)), keras.layers.Reshape((input_shape[0], input_shape[1] * input_shape[2]))


def conv1d_rows(num_classes: int = 10, *, input_shape=(28, 28, 1), name: str = "conv1d_rows") -> keras.Model:
    """Conv1D over an image's rows (28 steps of 28 pixels): two tanh Conv1D, max pooling, a Dense head."""
    inputs, rows = _rows(input_shape)
    x = keras.layers.Conv1D(64, 5, padding="same", activation="tanh")(rows(inputs))
    x = keras.layers.MaxPool1D(2)(x)
    x = keras.layers.Conv1D(64, 3, padding="same", activation="tanh")(x)
    x = keras.layers.GlobalMaxPool1D()(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x), name=name)


def conv1d_text(num_classes: int = 2, *, vocabulary: int = 1000, length: int = 64, dim: int = 64,
                name: str = "conv1d_text") -> keras.Model:
    """Token Embedding, Conv1D, global max pooling, a Dense head."""
    ids = keras.Input((length,), dtype="int32")
    x = keras.layers.Conv1D(64, 5, activation="relu")(keras.layers.Embedding(vocabulary, dim)(ids))
    x = keras.layers.GlobalMaxPool1D()(x)
    return keras.Model(ids, keras.layers.Dense(num_classes)(x), name=name)


def _recurrent(layer_class, num_classes, input_shape, units, name):
    inputs, rows = _rows(input_shape)
    x = layer_class(units)(rows(inputs))
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x), name=name)


def lstm_rows(num_classes: int = 10, *, input_shape=(28, 28, 1), units: int = 64, name: str = "lstm_rows"):
    """An LSTM reading the image row by row, its last state to a Dense head."""
    return _recurrent(keras.layers.LSTM, num_classes, input_shape, units, name)


def gru_rows(num_classes: int = 10, *, input_shape=(28, 28, 1), units: int = 64, name: str = "gru_rows"):
    """A GRU reading the image row by row, its last state to a Dense head."""
    return _recurrent(keras.layers.GRU, num_classes, input_shape, units, name)


def _normalised_cnn(norm, num_classes, input_shape, name):
    inputs = keras.Input(tuple(input_shape))
    x = keras.layers.Conv2D(16, 8, strides=2, padding="same")(inputs)
    x = keras.layers.Activation("tanh")(norm()(x))
    x = keras.layers.MaxPool2D(2, strides=1)(x)
    x = keras.layers.Conv2D(32, 4, strides=2, padding="valid")(x)
    x = keras.layers.Activation("tanh")(norm()(x))
    x = keras.layers.MaxPool2D(2, strides=1)(x)
    x = keras.layers.Dense(32, activation="tanh")(keras.layers.Flatten()(x))
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x), name=name)


def groupnorm_cnn(num_classes: int = 10, *, input_shape=(28, 28, 1), groups: int = 4, name: str = "groupnorm_cnn"):
    """The tanh CNN with a GroupNormalization after each convolution (the usual DP replacement of BatchNorm)."""
    return _normalised_cnn(lambda: keras.layers.GroupNormalization(groups), num_classes, input_shape, name)


def layernorm_cnn(num_classes: int = 10, *, input_shape=(28, 28, 1), name: str = "layernorm_cnn"):
    """The tanh CNN with a LayerNormalization (over channels) after each convolution."""
    return _normalised_cnn(keras.layers.LayerNormalization, num_classes, input_shape, name)


def depthwise_cnn(num_classes: int = 10, *, input_shape=(28, 28, 1), name: str = "depthwise_cnn"):
    """A Conv2D stem, a DepthwiseConv2D and a SeparableConv2D block (MobileNet style), a Dense head."""
    inputs = keras.Input(tuple(input_shape))
    x = keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="relu")(inputs)
    x = keras.layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
    x = keras.layers.SeparableConv2D(32, 3, strides=2, padding="same", activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x), name=name)


def transpose_cnn(num_classes: int = 10, *, input_shape=(28, 28, 1), name: str = "transpose_cnn"):
    """A strided Conv2D down, a Conv2DTranspose back up, a Conv2D, a Dense head."""
    inputs = keras.Input(tuple(input_shape))
    x = keras.layers.Conv2D(16, 4, strides=2, padding="same", activation="relu")(inputs)
    x = keras.layers.Conv2DTranspose(8, 4, strides=2, padding="same", activation="relu")(x)
    x = keras.layers.Conv2D(16, 4, strides=4, padding="same", activation="relu")(x)
    x = keras.layers.Flatten()(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x), name=name)


def conv3d_net(num_classes: int = 10, *, input_shape=(28, 28, 1), name: str = "conv3d_net"):
    """The image as a volume of 4 slices of 7×28, two Conv3D, a Dense head."""
    height, width, channels = input_shape
    inputs = keras.Input(tuple(input_shape))
    x = keras.layers.Reshape((4, height // 4, width, channels))(inputs)
    x = keras.layers.Conv3D(8, 3, padding="same", activation="relu")(x)
    x = keras.layers.Conv3D(16, 3, strides=2, padding="same", activation="relu")(x)
    x = keras.layers.Flatten()(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x), name=name)


# name -> (builder, input kind): "image" (28x28x1 floats) or "tokens" (64 ids below 1000)
ARCHITECTURES = {
    "vit": (vit, "image"), "transformer": (transformer_classifier, "tokens"), "conv1d_rows": (conv1d_rows, "image"),
    "conv1d_text": (conv1d_text, "tokens"), "lstm_rows": (lstm_rows, "image"), "gru_rows": (gru_rows, "image"),
    "groupnorm_cnn": (groupnorm_cnn, "image"), "layernorm_cnn": (layernorm_cnn, "image"),
    "depthwise_cnn": (depthwise_cnn, "image"), "transpose_cnn": (transpose_cnn, "image"),
    "conv3d_net": (conv3d_net, "image"),
}
