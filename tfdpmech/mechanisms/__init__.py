"""One module per paper: the once-only private steps and the recipe around them."""

from .adlm import AdLM, ILM, PrivateData
from .output_perturbation import (
    DPPredictor,
    OutputPerturbationBounds,
    bounds_from_architecture,
    compute_bounds,
    convexified_mlp,
    logits_model_from,
)

__all__ = [
    "AdLM", "ILM", "PrivateData", "DPPredictor", "OutputPerturbationBounds", "bounds_from_architecture",
    "compute_bounds", "convexified_mlp", "logits_model_from",
]
