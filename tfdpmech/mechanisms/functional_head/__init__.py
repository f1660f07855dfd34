"""The functional-mechanism head: the statistics of a polynomial loss over public features, released once.

:class:`FunctionalHead` (``docs/mechanisms/functional_head.md``) is an estimator: ``fit(x, y)`` releases the
statistics, solves on them and returns the trained Keras model. Its streaming aggregation, sensitivities
and feature map live beside it.
"""

from .feature_map import FeatureMap, feature_map
from .functional import (
    MECHANISMS, FunctionalHead, StatisticsReleasedError, default_ridge, functional_statistics, project_psd,
)
from .sensitivity import gaussian_sensitivity, laplace_sensitivity, num_released

__all__ = [
    "FunctionalHead", "FeatureMap", "feature_map", "MECHANISMS", "StatisticsReleasedError", "default_ridge",
    "functional_statistics", "project_psd", "gaussian_sensitivity", "laplace_sensitivity", "num_released",
]
