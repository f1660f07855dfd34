"""The functional-mechanism head: statistics aggregated over the private set, released once.

See :class:`FunctionalHead` and ``docs/mechanisms/functional_head.md``.
"""

from .calibration import gaussian_epsilon, gaussian_sigma, laplace_scale
from .feature_map import FeatureMap, feature_map
from .functional import (
    MECHANISMS, FunctionalHead, StatisticsReleasedError, default_ridge, functional_statistics, project_psd,
)
from .sensitivity import gaussian_sensitivity, laplace_sensitivity, num_released
from .softmax_head import FunctionalSoftmaxHead, head_sensitivity

__all__ = [
    "FunctionalHead", "FeatureMap", "feature_map", "MECHANISMS", "StatisticsReleasedError", "default_ridge",
    "functional_statistics", "project_psd", "gaussian_sensitivity", "laplace_sensitivity", "num_released",
    "gaussian_sigma", "gaussian_epsilon", "laplace_scale", "FunctionalSoftmaxHead", "head_sensitivity",
]
