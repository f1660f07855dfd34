"""The built-in methods; each module registers its methods when imported."""

from . import adlm, baselines, dpsgd, functional_head, input_perturbation, output_perturbation, pcdbn  # noqa: F401
