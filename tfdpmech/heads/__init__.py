"""Private heads on features that never saw the private data, each released once.

:class:`FunctionalHead` (statistics aggregated over the private set, ``docs/mechanisms/functional_head.md``)
and :class:`OutputPerturbationHead` (a regularised logistic regression, noise on its weights;
``docs/mechanisms/output_perturbation.md``).
"""

from .calibration import gaussian_epsilon, gaussian_sigma, laplace_scale
from .feature_map import FeatureMap, feature_map
from .functional import (
    MECHANISMS, FunctionalHead, StatisticsReleasedError, default_ridge, functional_statistics, project_psd,
)
from .output_perturbation import OUTPUT_HEAD_MECHANISMS, OutputPerturbationHead, erm_sensitivity
from .sensitivity import gaussian_sensitivity, laplace_sensitivity, num_released
from .softmax_head import FunctionalSoftmaxHead, head_sensitivity

__all__ = [
    "FunctionalHead", "FeatureMap", "feature_map", "MECHANISMS", "StatisticsReleasedError", "default_ridge",
    "functional_statistics", "project_psd", "gaussian_sensitivity", "laplace_sensitivity", "num_released",
    "gaussian_sigma", "gaussian_epsilon", "laplace_scale", "FunctionalSoftmaxHead", "head_sensitivity",
    "OutputPerturbationHead", "OUTPUT_HEAD_MECHANISMS", "erm_sensitivity",
]
