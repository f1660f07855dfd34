"""Input perturbation (Kang et al. 2020): Gaussian noise on the features, drawn once, before training.

* :mod:`.mechanism`: :class:`InputPerturbation`.
* :mod:`.assumptions`: :class:`InputPerturbationAssumptions` (theorem, constants, conventions, strictness).
* :mod:`.calibration`: the paper's σ of Theorems 1 / 3 and its accountant (claimed).
* :mod:`.feature_release`: the ledger entry of the one feature release (claimed or proven).
* :mod:`.constants`: constants of L2-regularised logistic regression from public quantities.
* :mod:`.records`: clipping to the public bound, client-side noise, randomized labels.
* :mod:`.training`: the T-step full-batch recipe (:class:`InputPerturbationBudget`, :func:`fit_dp_erm`).
* :mod:`.models`: the DP-ERM models (:func:`linear_model`, :func:`paper_mlp`, :class:`L2BallConstraint`).
"""

from .assumptions import InputPerturbationAssumptions
from .calibration import (
    CONDITIONS,
    epsilon_paper_accountant,
    paper_constant,
    sigma_input_perturbation,
)
from .constants import G_CONVENTIONS, L2_CONVENTIONS, LogisticConstants, logistic_constants
from .models import L2BallConstraint, linear_model, paper_mlp
from .mechanism import MODES, NOISE_STRUCTURES, InputPerturbation
from .records import check_labels_in_classes, clip_rows, perturb_record, randomized_response
from .training import InputPerturbationBudget, erm_objective, erm_optimum, fit_dp_erm, unregularized_biases

__all__ = [
    "InputPerturbation", "InputPerturbationAssumptions", "MODES", "NOISE_STRUCTURES", "CONDITIONS", "G_CONVENTIONS", "L2_CONVENTIONS",
    "paper_constant", "sigma_input_perturbation", "epsilon_paper_accountant",
    "LogisticConstants", "logistic_constants",
    "clip_rows", "perturb_record", "randomized_response", "check_labels_in_classes",
    "InputPerturbationBudget", "fit_dp_erm", "erm_objective", "erm_optimum", "unregularized_biases",
    "linear_model", "paper_mlp", "L2BallConstraint",
]
