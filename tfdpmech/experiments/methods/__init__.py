"""The built-in methods; each module registers its methods when imported."""

from . import adlm, baselines, dpsgd, input_perturbation, output_perturbation, pcdbn  # noqa: F401
