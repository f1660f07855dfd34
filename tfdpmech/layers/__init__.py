"""Generic Keras layers, one per module (batch min/max, batch statistics, bounded LRN, unit clip), and the
papers' layers offered here too.

The generic layers are defined here; the papers' layers live in their paper's subpackage and are
offered here too (resolved on first access, see :mod:`tfdpmech._lazy`):
:class:`ConvRBM` and :class:`BoxConstraint` (:mod:`tfdpmech.mechanisms.pcdbn.conv_rbm`),
:class:`InputNoise` and :class:`PerturbedBias` (:mod:`tfdpmech.mechanisms.adlm`),
:class:`NoisyOutputNeuron` (:mod:`tfdpmech.mechanisms.output_perturbation.noisy_output_neuron`).
"""

from .._lazy import lazy_attributes
from .batch_min_max import BatchMinMax
from .batch_statistics import BatchStatisticsNormalization
from .bounded_lrn import BoundedLRN
from .unit_clip import UnitClip

_PAPER_LAYERS = {
    "BoxConstraint": "tfdpmech.mechanisms.pcdbn.conv_rbm",
    "ConvRBM": "tfdpmech.mechanisms.pcdbn.conv_rbm",
    "InputNoise": "tfdpmech.mechanisms.adlm.input_noise",
    "NoisyOutputNeuron": "tfdpmech.mechanisms.output_perturbation.noisy_output_neuron",
    "PerturbedBias": "tfdpmech.mechanisms.adlm.perturbed_bias",
}
__getattr__, __dir__ = lazy_attributes(__name__, _PAPER_LAYERS)

__all__ = ["BatchMinMax", "BatchStatisticsNormalization", "BoundedLRN", "BoxConstraint", "ConvRBM", "InputNoise", "NoisyOutputNeuron", "PerturbedBias", "UnitClip"]
