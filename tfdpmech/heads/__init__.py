"""Private heads on features that never saw the private data, each released once.

:class:`FunctionalHead` (statistics aggregated over the private set, ``docs/mechanisms/functional_head.md``)
and :class:`OutputPerturbationHead` (a regularised logistic regression, noise on its weights;
``docs/mechanisms/output_perturbation.md``). Their noise is calibrated by
:mod:`tfdpmech.accounting.gaussian` (``gaussian_sigma``, ``laplace_scale``, offered here too). pCDBN's head, :class:`FunctionalSoftmaxHead`
(:mod:`tfdpmech.mechanisms.pcdbn.softmax_head`), is offered here too (resolved on first access,
:mod:`tfdpmech._lazy`).
"""

from .._lazy import lazy_attributes
from ..accounting.gaussian import gaussian_sigma, laplace_scale
from .feature_map import FeatureMap, feature_map
from .functional import (
    MECHANISMS, FunctionalHead, StatisticsReleasedError, default_ridge, functional_statistics, project_psd,
)
from .output_perturbation import OUTPUT_HEAD_MECHANISMS, OutputPerturbationHead, erm_sensitivity
from .sensitivity import gaussian_sensitivity, laplace_sensitivity, num_released

_SOFTMAX_HEAD = "tfdpmech.mechanisms.pcdbn.softmax_head"
__getattr__, __dir__ = lazy_attributes(
    __name__, {"FunctionalSoftmaxHead": _SOFTMAX_HEAD, "head_sensitivity": _SOFTMAX_HEAD})

__all__ = [
    "FunctionalHead", "FeatureMap", "feature_map", "MECHANISMS", "StatisticsReleasedError", "default_ridge",
    "functional_statistics", "project_psd", "gaussian_sensitivity", "laplace_sensitivity", "num_released",
    "gaussian_sigma", "laplace_scale", "FunctionalSoftmaxHead", "head_sensitivity",
    "OutputPerturbationHead", "OUTPUT_HEAD_MECHANISMS", "erm_sensitivity",
]
