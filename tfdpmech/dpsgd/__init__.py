"""Baselines the mechanisms are compared with: DP-SGD through tensorflow-privacy.

Importing this package does not import tensorflow-privacy; using the DP-SGD API without it raises
an ImportError that says ``pip install tfdpmech[dpsgd] (needs TensorFlow 2.15)``.
"""

from .dpsgd import (
    DPSGD,
    DPSGDBudget,
    OPTIMIZERS,
    PATHS,
    dpsgd_steps,
    epsilon_for_noise_multiplier,
    fast_clipping_layers,
    noise_multiplier_for_epsilon,
    supports_fast_clipping,
)

__all__ = [
    "DPSGD",
    "DPSGDBudget",
    "OPTIMIZERS",
    "PATHS",
    "dpsgd_steps",
    "epsilon_for_noise_multiplier",
    "fast_clipping_layers",
    "noise_multiplier_for_epsilon",
    "supports_fast_clipping",
]
