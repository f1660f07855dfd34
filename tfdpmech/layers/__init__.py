"""Keras layers of tfdpmech."""

from .batch_min_max import BatchMinMax
from .batch_statistics import BatchStatisticsNormalization
from .bounded_lrn import BoundedLRN
from .conv_rbm import BoxConstraint, ConvRBM
from .input_noise import InputNoise
from .noisy_output_neuron import NoisyOutputNeuron
from .perturbed_bias import PerturbedBias
from .unit_clip import UnitClip

__all__ = ["BatchMinMax", "BatchStatisticsNormalization", "BoundedLRN", "BoxConstraint", "ConvRBM", "InputNoise", "NoisyOutputNeuron", "PerturbedBias", "UnitClip"]
