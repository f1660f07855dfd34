"""One module per paper: the once-only private steps and the recipe around them."""

from .adlm import AdLM, ILM, PrivateData
from .dp_erm import InputPerturbationBudget, L2BallConstraint, linear_model, paper_mlp
from .input_perturbation import (
    InputPerturbation,
    epsilon_paper_accountant,
    local_gaussian_epsilon,
    logistic_constants,
    sigma_input_perturbation,
    sigma_local_gaussian,
)
from .output_perturbation import (
    DPPredictor,
    OutputPerturbationBounds,
    bounds_from_architecture,
    compute_bounds,
    convexified_mlp,
    logits_model_from,
)
from .pcdbn import PrivateCDBN

__all__ = [
    "AdLM", "ILM", "PrivateData", "DPPredictor", "OutputPerturbationBounds", "bounds_from_architecture",
    "compute_bounds", "convexified_mlp", "logits_model_from", "InputPerturbation", "InputPerturbationBudget",
    "L2BallConstraint", "linear_model", "paper_mlp", "epsilon_paper_accountant", "local_gaussian_epsilon",
    "logistic_constants", "sigma_input_perturbation", "sigma_local_gaussian", "PrivateCDBN",
]
