"""One subpackage per paper: the once-only private steps and the recipe around them.

* :mod:`.adlm`: AdLM and ILM (Phan et al., ICDM'17).
* :mod:`.output_perturbation`: output perturbation with a convexified loss (Lu et al.).
* :mod:`.input_perturbation`: input perturbation for DP-ERM (Kang et al. 2020).
* :mod:`.pcdbn`: the private convolutional deep belief network (Phan, Wu, Dou 2017).
* :mod:`.afrrs`: AdLM with budgets per relevance region (Wang et al.).
"""

from .adlm import ILM, AdLM, PrivateData
from .afrrs import AFRRS
from .input_perturbation import InputPerturbation
from .output_perturbation import DPPredictor, OutputPerturbationBounds, bounds_from_architecture, compute_bounds
from .pcdbn import ChebyshevEnergy, PCDBNReference, PrivateCDBN

__all__ = [
    "AdLM", "ILM", "AFRRS", "PCDBNReference", "PrivateData", "DPPredictor", "OutputPerturbationBounds", "bounds_from_architecture",
    "compute_bounds", "InputPerturbation", "PrivateCDBN", "ChebyshevEnergy",
]
