"""AdLM's once-only noise draws (Algorithm 1, lines 13-19): the features, the bias constant, the loss coefficients.

Each function takes the :class:`~tfdpmech.mechanisms.adlm.AdLM` whose budget, batch size, noise
mode and generator it uses; the draws happen once, in :meth:`~tfdpmech.mechanisms.adlm.AdLM.perturb`.
"""

from __future__ import annotations

import numpy as np

from ...noise import laplace
from .input_noise import InputNoise
from .perturbed_bias import PerturbedBias
from .taylor_cross_entropy import taylor_coefficients

__all__ = ["PHI2_FLOOR", "perturb_features", "perturb_bias", "perturb_coefficients"]

PHI2_FLOOR = 1e-3  # a negative ϕ̄^(2) makes Eq. 25's quadratic unbounded below; the clamp is post-processing


def perturb_features(mech, x, scales, model) -> np.ndarray:
    """Line 13: ``x̄ = x + Lap(scales)`` once per record (or one shared draw, or the model's InputNoise layer per step)."""
    if mech.noise_mode == "shared_per_step":
        noise_layers = [layer for layer in model.layers if isinstance(layer, InputNoise)]
        if not noise_layers:
            raise ValueError(
                "noise_mode='shared_per_step' needs an InputNoise layer in the model; "
                "build it with tfdpmech.models.mnist_cnn(input_noise=True)"
            )
        noise_layers[0].scales.assign(scales.reshape(noise_layers[0].feature_shape).astype(np.float32))
        noise_layers[0].clip = mech.clip_noisy_inputs
        return x.astype(np.float32, copy=True)
    shape = x.shape if mech.noise_mode == "per_example_frozen" else x.shape[1:]
    x_bar = x + laplace(scales, shape, mech._rng)  # line 13
    if mech.clip_noisy_inputs is not None:
        x_bar = np.clip(x_bar, *mech.clip_noisy_inputs)
    return x_bar.astype(np.float32)

def perturb_bias(mech, model, delta_h0) -> None:
    """Line 14: the noisy bias constant ``b̄ = 1 + Lap(Δ_h0/(|L|·ε2))`` into the model's PerturbedBias layer."""
    layers = [layer for layer in model.layers if isinstance(layer, PerturbedBias)]
    if not layers:
        if mech.bias_noise:
            raise ValueError(
                "bias_noise=True needs a PerturbedBias layer after the first affine layer "
                "(Conv2D/Dense with use_bias=False); use tfdpmech.models.mnist_cnn or pass bias_noise=False"
            )
        return
    layer = layers[0]
    b_bar = np.ones(layer.units)
    if mech.bias_noise:
        b_bar += laplace(delta_h0 / (mech.batch_size * mech.eps2), layer.units, mech._rng)  # line 14
    layer.b_bar.assign(b_bar.astype(np.float32))

def perturb_coefficients(mech, y, delta_f) -> np.ndarray:
    """Lines 18-19: the Taylor coefficients ``ϕ̄ = ϕ + Lap(Δ_F/(|L|·ε3))`` of the chosen orders."""
    phi = taylor_coefficients(y).astype(np.float64)
    orders = list(mech.perturb_orders)
    scale = delta_f / (mech.batch_size * mech.eps3)  # lines 18-19
    shape = (phi.shape[0], phi.shape[1], len(orders))
    if mech.noise_mode != "per_example_frozen":
        shape = shape[1:]  # one draw per class and order, shared by all records
    phi[..., orders] += laplace(scale, shape, mech._rng)
    if 2 in orders:
        phi[..., 2] = np.maximum(phi[..., 2], PHI2_FLOOR)  # post-processing, keeps the loss bounded below
    return phi.astype(np.float32)
