"""Output perturbation with a convexified loss (Lu et al.): train normally, add noise to every answer.

* :mod:`.mechanism`: :class:`DPPredictor` (answers under a query budget, ledger per batch).
* :mod:`.sensitivity`: ρ, Δ₂W, Δω, Δz_T, Δp and the OARO bound read from a Keras model.

The model builder is :func:`tfdpmech.models.convexified.convexified_mlp`; the per-query noise layer
is :class:`tfdpmech.layers.NoisyOutputNeuron`.
"""

from .mechanism import EXPORT_WARNING, DPPredictor
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
    "DPPredictor", "EXPORT_WARNING", "OutputPerturbationBounds", "bounds_from_architecture", "compute_bounds",
    "describe_mlp", "LAMBDA_CONVENTIONS", "SENSITIVITY_MODES", "BOUNDED_ACTIVATIONS",
]
