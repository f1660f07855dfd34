"""AFRRS (Wang et al.): AdLM with budgets per feature-relevance region.

* :class:`RegionAllocation` — Algorithm 1 and Eqs. 14–15, the third budget strategy.
* :class:`AFRRS` — the per-record private mode (``mode="private"``).
* :class:`AFRRSReference` — the reference mode: AFRRS has no public code, so this is the AdLM
  authors' code path with AFRRS's allocation (claimed, none proven).
* :func:`plot_segmentation` — a figure like the paper's Figs. 2–3.

The paper's models (Tables 1 and 2) are in :mod:`.models`.
"""

from .allocation import DEFAULT_GAMMA, RegionAllocation, global_minmax, region_budgets, segment_regions
from .mechanism import AFRRS, afrrs_sensitivities
from .models import afrrs_cifar_model, afrrs_mnist_model
from .plots import plot_segmentation
from .reference import AFRRSReference

__all__ = ["AFRRS", "AFRRSReference", "RegionAllocation", "DEFAULT_GAMMA", "global_minmax", "region_budgets",
           "segment_regions", "afrrs_sensitivities", "plot_segmentation", "afrrs_mnist_model", "afrrs_cifar_model"]
