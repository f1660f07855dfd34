"""One subpackage per paper: the once-only private steps, the recipe around them, and every piece
that belongs to that paper alone (its layers, losses, models, relevance, polynomial surrogates).

* :mod:`.dpsgd`: DP-SGD (Abadi et al., CCS 2016), Poisson-sampled by default.
* :mod:`.adlm`: AdLM and ILM (Phan et al., ICDM'17).
* :mod:`.functional_head`: the functional-mechanism head on public features (Zhang et al. 2012).
* :mod:`.output_perturbation`: output perturbation with a convexified loss (Lu et al.) and the
  output-perturbation head (Chaudhuri et al. 2011).
* :mod:`.input_perturbation`: input perturbation for DP-ERM (Kang et al. 2020).
* :mod:`.pcdbn`: the private convolutional deep belief network (Phan, Wu, Dou 2017).
* :mod:`.afrrs`: AdLM with budgets per relevance region (Wang et al.).

The names below are resolved on first access (:mod:`tfdpmech._lazy`), so that a generic module
using one paper's piece (e.g. :mod:`tfdpmech.losses` and AdLM's Taylor loss) imports that paper only.
"""

from .._lazy import lazy_attributes

_OUTPUT = "tfdpmech.mechanisms.output_perturbation"
__getattr__, __dir__ = lazy_attributes(__name__, {
    "AdLM": "tfdpmech.mechanisms.adlm", "ILM": "tfdpmech.mechanisms.adlm", "PrivateData": "tfdpmech.mechanisms.adlm",
    "AdLMReference": "tfdpmech.mechanisms.adlm", "ILMReference": "tfdpmech.mechanisms.adlm",
    "AFRRS": "tfdpmech.mechanisms.afrrs", "AFRRSReference": "tfdpmech.mechanisms.afrrs",
    "InputPerturbation": "tfdpmech.mechanisms.input_perturbation",
    "InputPerturbationAssumptions": "tfdpmech.mechanisms.input_perturbation",
    "FunctionalHead": "tfdpmech.mechanisms.functional_head", "OutputPerturbationHead": _OUTPUT,
    "DPPredictor": _OUTPUT, "OutputPerturbationBounds": _OUTPUT, "bounds_from_architecture": _OUTPUT,
    "compute_bounds": _OUTPUT,
    "ChebyshevEnergy": "tfdpmech.mechanisms.pcdbn", "PCDBNReference": "tfdpmech.mechanisms.pcdbn",
    "PrivateCDBN": "tfdpmech.mechanisms.pcdbn",
}, ("adlm", "afrrs", "dpsgd", "functional_head", "input_perturbation", "output_perturbation", "pcdbn"))

__all__ = [
    "AdLM", "ILM", "AFRRS", "AdLMReference", "ILMReference", "AFRRSReference", "PCDBNReference", "PrivateData", "FunctionalHead", "OutputPerturbationHead", "DPPredictor", "OutputPerturbationBounds", "bounds_from_architecture",
    "compute_bounds", "InputPerturbation", "InputPerturbationAssumptions", "PrivateCDBN", "ChebyshevEnergy",
]
