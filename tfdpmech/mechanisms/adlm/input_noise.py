"""Fresh Laplace noise on the inputs at every training step (AdLM reproduction mode)."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from ...noise import tf_laplace
from ...validation import check_array, check_interval, check_positive_int
from ...layers.shape_preserving import ShapePreservingLayer

__all__ = ["InputNoise"]


@keras.saving.register_keras_serializable(package="tfdpmech")
class InputNoise(ShapePreservingLayer):
    """Add one Laplace draw per feature, shared by the batch and redrawn every training step.

    This is the ``shared_per_step`` mode of AdLM: what the authors' MNIST code does, used only to
    reproduce their numbers. The model then reads the raw training data at every step, so no
    per-record guarantee follows from the paper's lemmas (Lemmas 3–6 bound neighbouring batches,
    Lemma 4 a batch sum with one shared draw); the ledger records the
    release as *claimed*. At inference the layer is the identity.

    Args:
        scales: per-feature Laplace scales ``b_j = Δ_h0 / (|L|·β_j·ε2)``, shape = input shape
            without the batch axis.
        seed: seed of the ``tf.random.Generator``; None draws from OS entropy.
        clip: optional ``(low, high)`` applied to the noisy inputs (the authors' MNIST code clips
            to [-10, 10]); post-processing of the noisy values, so it costs no privacy.

    Input shape: ``(batch, *scales.shape)``. Output shape: same.
    """

    lrp_passthrough = True

    def __init__(self, scales=None, seed: int | None = None, feature_shape=None, clip=None, **kwargs):
        super().__init__(**kwargs)
        if clip is not None:
            clip = check_interval(clip, "clip")
        self.clip = clip
        if scales is not None:
            scales = np.asarray(scales)
            if scales.dtype == object or not np.issubdtype(scales.dtype, np.number) or np.iscomplexobj(scales):
                check_array(scales, "scales", ndim_min=0)  # the TypeError naming scales and the fix
            scales = scales.astype(np.float32)
            if not np.all(np.isfinite(scales)) or np.any(scales < 0):
                raise ValueError("scales must be finite and >= 0 (Laplace scales are sensitivity / ε)")
            feature_shape = scales.shape
        if feature_shape is None:
            raise ValueError("pass scales (or feature_shape when deserialising)")
        if isinstance(feature_shape, (str, bytes)) or not hasattr(feature_shape, "__iter__"):
            raise TypeError(f"feature_shape must be a tuple of positive ints such as (28, 28, 1), got {feature_shape!r}")
        self.feature_shape = tuple(check_positive_int(s, f"feature_shape[{i}]") for i, s in enumerate(feature_shape))
        if seed is not None:
            check_positive_int(seed, "seed", minimum=0)
        self._scales_init = scales
        self.seed = seed
        self._generator = (
            tf.random.Generator.from_seed(seed) if seed is not None else tf.random.Generator.from_non_deterministic_state()
        )

    def build(self, input_shape):
        if tuple(input_shape[1:]) != self.feature_shape:
            raise ValueError(f"InputNoise scales have shape {self.feature_shape}, inputs {tuple(input_shape[1:])}")
        init = keras.initializers.Constant(self._scales_init) if self._scales_init is not None else "zeros"
        self.scales = self.add_weight(name="scales", shape=self.feature_shape, initializer=init, trainable=False)
        super().build(input_shape)

    def call(self, inputs, training=None):
        if not training:
            return inputs
        noisy = inputs + tf_laplace(self.feature_shape, self.scales, self._generator, inputs.dtype)
        return noisy if self.clip is None else tf.clip_by_value(noisy, *self.clip)

    def get_config(self):
        config = super().get_config()
        config.update(seed=self.seed, feature_shape=list(self.feature_shape),
                      clip=None if self.clip is None else list(self.clip))
        return config
