"""Output perturbation: Lu et al.'s noisy answers (query time) and Chaudhuri et al.'s noisy head (once).

* :mod:`.mechanism`: :class:`DPPredictor` (answers under a query budget, ledger per batch).
* :mod:`.head`: :class:`OutputPerturbationHead` (a regularised logistic regression on public features,
  noise on its weights once; an estimator like :class:`~tfdpmech.mechanisms.functional_head.FunctionalHead`).
* :mod:`.sensitivity`: ρ, Δ₂W, Δω, Δz_T, Δp and the OARO bound read from a Keras model.
* :mod:`.noisy_output_neuron`: :class:`NoisyOutputNeuron`, the per-query noise layer.
* :mod:`.convexified_cross_entropy`: :class:`ConvexifiedCrossEntropy`, the risk-averting loss (Eq. 22).
* :mod:`.convexified_mlp`: :func:`convexified_mlp`, the model builder, and :func:`logits_model_from`.
"""

from .convexified_cross_entropy import ConvexifiedCrossEntropy
from .convexified_mlp import convexified_mlp, logits_model_from
from .head import OUTPUT_HEAD_MECHANISMS, OutputPerturbationHead, erm_sensitivity
from .mechanism import EXPORT_WARNING, DPPredictor
from .noisy_output_neuron import NoisyOutputNeuron, noise_calibration
from .sensitivity import (
    BOUNDED_ACTIVATIONS,
    LAMBDA_CONVENTIONS,
    SENSITIVITY_MODES,
    OutputPerturbationBounds,
    bounds_from_architecture,
    compute_bounds,
    describe_mlp,
)

__all__ = [
    "DPPredictor", "OutputPerturbationHead", "OUTPUT_HEAD_MECHANISMS", "erm_sensitivity", "EXPORT_WARNING", "OutputPerturbationBounds", "bounds_from_architecture", "compute_bounds",
    "describe_mlp", "LAMBDA_CONVENTIONS", "SENSITIVITY_MODES", "BOUNDED_ACTIVATIONS",
    "NoisyOutputNeuron", "noise_calibration", "ConvexifiedCrossEntropy", "convexified_mlp", "logits_model_from",
]
