"""The models the DP-SGD speed benchmark times (:mod:`.dpsgd_speed`), and a batch of each.

The demo's tanh MLP, the standard MNIST CNN and DP-SGD's tanh CNN; on Keras 3 today's architectures
(:mod:`tfdpmech.models.architectures`), ``keras.applications`` networks at 32×32×3 with BatchNormalization
replaced, and with the text extra keras-hub language models (:mod:`.text_models`).
"""

from __future__ import annotations

import dataclasses

import keras
import numpy as np

from ..mechanisms.dpsgd import RECIPE, tanh_mlp
from ..mechanisms.dpsgd.runs.train_step import KERAS_3
from ..mechanisms.dpsgd.sampling.position_weights import with_position_weights
from ..models import standard_cnn, tanh_cnn
from .text_models import TEXT_MODELS, keras_hub_available, text_batch

__all__ = ["Model", "MODELS", "APPLICATIONS", "SCALED_APPLICATIONS", "APPLICATION_BATCHES", "batch"]


@dataclasses.dataclass(frozen=True)
class Model:
    """One benchmarked model: its builder, input kind ("image": 28×28×1, "image32": 32×32×3, "tokens": 64 ids
    below 1,000), expected batch L, private records n, timed steps, and dtype policy."""

    build: object
    kind: str
    expected: int
    n: int
    steps: int
    policy: str = "float32"
    chunked: bool = True  # an image32 network also timed in physical batches (dpsgd_speed.PHYSICAL_BATCH)

    @property
    def text(self) -> str | None:
        """``"causal_lm"`` or ``"classifier"`` for a keras-hub model (:mod:`.text_models`), else None."""
        return self.kind.split(":", 1)[1] if self.kind.startswith("text:") else None


def _models() -> dict:
    models = {
        "mlp": Model(tanh_mlp, "image", RECIPE.expected_batch_size, 7000, 30),
        "cnn": Model(standard_cnn, "image", 250, 7000, 12),
        "tanh_cnn": Model(tanh_cnn, "image", 512, 60_000, 30),
    }
    if KERAS_3:  # the architectures use keras.ops (Keras 3)
        from ..models import architectures as a  # noqa: PLC0415

        def position_dense():
            ids = keras.Input((64,), dtype="int32")
            x = a.PositionEmbedding(64, 32)(keras.layers.Embedding(1000, 32)(ids))
            return keras.Model(ids, keras.layers.Dense(2)(keras.layers.Flatten()(x)), name="position_dense")

        models.update({
            "transformer": Model(a.transformer_classifier, "tokens", 128, 1024, 16),
            "position_dense": Model(position_dense, "tokens", 128, 1024, 60),
            "conv1d_text": Model(a.conv1d_text, "tokens", 128, 1024, 30),
            "vit": Model(a.vit, "image", 128, 1024, 16),
            "conv1d_rows": Model(a.conv1d_rows, "image", 128, 1024, 60),
            "groupnorm_cnn": Model(a.groupnorm_cnn, "image", 128, 1024, 40),
            "layernorm_cnn": Model(a.layernorm_cnn, "image", 128, 1024, 40),
            "depthwise_cnn": Model(a.depthwise_cnn, "image", 128, 1024, 40),
            "transpose_cnn": Model(a.transpose_cnn, "image", 128, 1024, 30),
            "conv3d_net": Model(a.conv3d_net, "image", 128, 1024, 20),
            "lstm_rows": Model(a.lstm_rows, "image", 128, 1024, 20),
            "gru_rows": Model(a.gru_rows, "image", 128, 1024, 20),
            "tanh_cnn_bf16": Model(tanh_cnn, "image", 512, 60_000, 15, policy="mixed_bfloat16"),
        })
        models.update({name: Model(_application(cls, **options), "image32", 64, 1024, 4)
                       for name, cls, options in APPLICATIONS})
        models.update({f"{name}_b{rows}": Model(_application(cls, **options), "image32", rows, 1024,
                                                4 if rows <= 32 else 2, chunked=False)
                       for rows in APPLICATION_BATCHES for name, cls, options in SCALED_APPLICATIONS})
    if keras_hub_available():  # the text extra: keras-hub language models, sequence 128, expected batch 32
        models.update({name: Model(build, f"text:{task}", 32, 1024, 4) for name, (build, task) in TEXT_MODELS.items()})
    return models


# keras.applications networks as fine-tuned under DP-SGD: 32×32×3, 10 classes, BatchNormalization replaced
APPLICATIONS = (("mobilenet_v2", "MobileNetV2", {"alpha": 0.35}), ("efficientnet_b0", "EfficientNetB0", {}),
                ("resnet50", "ResNet50", {}))
# the same and two more at the expected batches users fine-tune with, in a plain process (``<name>_b32``,
# ``<name>_b128``: a timed fit of 4 steps of 32 records or 2 of 128; DP-SGD and non-private only)
SCALED_APPLICATIONS = APPLICATIONS + (("mobilenet_v3_small", "MobileNetV3Small", {}),
                                      ("convnext_tiny", "ConvNeXtTiny", {}))
APPLICATION_BATCHES = (32, 128)


def _application(cls: str, **options):
    def build():
        from ..mechanisms.dpsgd.clipping.batch_norm import replace_batch_norm  # noqa: PLC0415

        model = getattr(keras.applications, cls)(weights=None, input_shape=(32, 32, 3), classes=10,
                                                 classifier_activation=None, **options)
        return replace_batch_norm(model, verbose=False)
    build.__name__ = cls
    return build


MODELS = _models()


def batch(spec: Model, rows: int, seed: int = 0):
    """``(x, y, mask)``: ``rows`` random records of ``spec``'s input kind, the first ``spec.expected`` real."""
    if spec.text:  # token ids and a padding mask; a causal LM's labels carry their per-position weights
        x, y, weights = text_batch(spec.text, rows, seed, spec.build.sequence)
        return x, (y if weights is None else with_position_weights(y, weights)), \
            (np.arange(rows) < spec.expected).astype(np.float32)
    rng = np.random.default_rng(seed)
    if spec.kind == "tokens":
        x, classes = rng.integers(0, 1000, (rows, 64)).astype(np.int32), 2
    elif spec.kind == "image32":
        x, classes = rng.random((rows, 32, 32, 3), dtype=np.float32), 10
    else:
        x, classes = rng.random((rows, 28, 28, 1), dtype=np.float32), 10
    y = keras.utils.to_categorical(rng.integers(0, classes, rows), classes).astype(np.float32)
    return x, y, (np.arange(rows) < spec.expected).astype(np.float32)
