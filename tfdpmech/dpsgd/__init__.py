"""DP-SGD through tensorflow-privacy: the :class:`DPSGD` run and its training paths.

Importing this package does not import tensorflow-privacy; using the DP-SGD API without it raises
an ImportError that says ``pip install tfdpmech[dpsgd] (needs TensorFlow 2.15)``. The accounting
(ε ↔ noise multiplier) lives in :mod:`tfdpmech.accounting.dpsgd`.
"""

from .dpsgd import DPSGD, OPTIMIZERS, DPSGDBudget
from .paths import PATHS, fast_clipping_layers, supports_fast_clipping

__all__ = ["DPSGD", "DPSGDBudget", "OPTIMIZERS", "PATHS", "fast_clipping_layers", "supports_fast_clipping"]
