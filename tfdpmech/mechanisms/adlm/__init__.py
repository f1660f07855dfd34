"""AdLM and ILM (Phan et al., ICDM'17): adaptive (or uniform) Laplace noise drawn once, before training.

* :mod:`.mechanism`: :class:`AdLM`, :class:`ILM`.
* :mod:`.private_data`: :class:`PrivateData` (the released data), ``AdLMBudget`` (the callback).
* :mod:`.sensitivity`: Δ_h0 policies, the per-record ε, and the model checks they rest on.
* :mod:`.reference`: :class:`AdLMReference`, :class:`ILMReference`, the authors' public code path
  (``mode="reference"``; claimed, none proven); :mod:`.reference_steps`: its steps, one function each.
"""

from .mechanism import ILM, MODES, NOISE_MODES, AdLM
from .private_data import PrivateData
from .reference import AdLMReference, ILMReference
from .sensitivity import (
    DELTA_H0_POLICIES,
    check_bounded_last_hidden,
    first_affine_layer,
    first_layer_geometry,
    first_layer_sensitivity,
    provable_epsilon_per_record,
)

__all__ = [
    "AdLM", "ILM", "PrivateData", "MODES", "NOISE_MODES", "AdLMReference", "ILMReference", "DELTA_H0_POLICIES", "first_affine_layer",
    "check_bounded_last_hidden", "first_layer_geometry", "first_layer_sensitivity", "provable_epsilon_per_record",
]
