"""Bias of the private first affine layer, multiplied by a frozen noisy constant."""

from __future__ import annotations

import keras
import numpy as np

from ...validation import check_array, check_positive_int
from ...layers.shape_preserving import ShapePreservingLayer

__all__ = ["PerturbedBias"]


@keras.saving.register_keras_serializable(package="tfdpmech")
class PerturbedBias(ShapePreservingLayer):
    """Add a trainable bias ``W_b`` times a frozen noisy constant ``b̄`` (AdLM Alg. 1 line 14).

    In the proof of Lemma 4 the bias is a constant input ``1`` with trainable weight ``W_b``;
    line 14 perturbs it once: ``b̄ = 1 + (1/|L|)·Lap(Δ_h0/ε2)``. The bias input does not depend
    on the data, so this noise buys no privacy; it is kept for fidelity and is the
    same at training and inference (``b̄`` is part of the function the model learned).

    Put it after a ``Dense``/``Conv2D`` built with ``use_bias=False``.

    Args:
        b_bar: the frozen constants, one per unit/filter (last axis). None means no noise (ones).
        units: number of units; needed only when ``b_bar`` is None and for deserialisation.

    Input shape: ``(batch, ..., units)``. Output shape: same.
    """

    CONFIG_KEYS = ("units",)  # b̄ itself travels with the weights

    lrp_passthrough = True

    def __init__(self, b_bar=None, units: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if units is not None:
            units = check_positive_int(units, "units")
        if b_bar is not None:
            b_bar = np.asarray(b_bar)
            if b_bar.dtype == object or not np.issubdtype(b_bar.dtype, np.number) or np.iscomplexobj(b_bar):
                check_array(b_bar, "b_bar", ndim_min=0)  # the TypeError naming b_bar and the fix
            b_bar = b_bar.astype(np.float32).reshape(-1)
            if not np.all(np.isfinite(b_bar)):
                raise ValueError("b_bar must be finite")
            if units is not None and units != b_bar.size:
                raise ValueError(f"units={units} does not match b_bar of size {b_bar.size}")
            units = b_bar.size
        self._b_bar_init = b_bar
        self.units = units

    def build(self, input_shape):
        units = int(input_shape[-1])
        if self.units is not None and self.units != units:
            raise ValueError(f"PerturbedBias has {self.units} units but its input has {units} channels")
        self.units = units
        init = self._b_bar_init
        b_init = keras.initializers.Constant(init) if init is not None else "ones"
        self.bias = self.add_weight(name="bias", shape=(units,), initializer="zeros", trainable=True)
        self.b_bar = self.add_weight(name="b_bar", shape=(units,), initializer=b_init, trainable=False)
        super().build(input_shape)

    def call(self, inputs):
        return inputs + self.bias * self.b_bar
