"""Privacy accounting in one place: the ledger, the query budget and the ``dp_accounting`` calibrations.

* :mod:`~tfdpmech.accounting.ledger`: :class:`Release`, :class:`PrivacyLedger`, :class:`Guarantee`,
  :class:`NoneProven` (``NONE_PROVEN``): releases composed on ``dp_accounting`` events.
* :mod:`~tfdpmech.accounting.events`: the JSON form of ``dp_accounting`` events and their composition.
* :mod:`~tfdpmech.accounting.query_budget`: :class:`QueryBudgetAccountant` (per-query ε, GDP).
* :mod:`~tfdpmech.accounting.gaussian`: every noise calibration: Laplace scale, one Gaussian mechanism's ε ↔ σ
  (``dp_accounting``), μ-GDP.
* :mod:`~tfdpmech.accounting.dpsgd`: DP-SGD's ε ↔ noise multiplier (``dp_accounting`` RDP).
* :mod:`~tfdpmech.accounting.poisson_dpsgd`: Poisson-sampled DP-SGD's ε ↔ noise multiplier (PLD or RDP).
* :mod:`~tfdpmech.accounting.sigma_search`: :func:`smallest_sigma`, the one search for the noise of a target ε.
* :mod:`~tfdpmech.accounting.callbacks`: :class:`PrivacyBudget`, the Keras callback that logs ε.
* :mod:`~tfdpmech.accounting.atomic_file`: crash-safe, process-safe (file-locked) JSON state files.
"""

from .atomic_file import locked_state, write_json_atomically
from .callbacks import PrivacyBudget
from .dpsgd import dpsgd_epsilon, dpsgd_epsilon_after_steps, dpsgd_noise_multiplier, dpsgd_steps, epsilon_any_order
from .poisson_dpsgd import poisson_dpsgd_epsilon, poisson_dpsgd_noise_multiplier
from .sigma_search import NotCertifiableError, smallest_sigma
from .gaussian import (
    gaussian_epsilon, gaussian_sigma, gdp_delta, gdp_epsilon, laplace_scale, local_gaussian_epsilon, sigma_local_gaussian,
)
from .events import compose_events, event_from_json, event_to_json
from .ledger import NONE_PROVEN, Guarantee, NoneProven, PrivacyLedger, Release, check_epochs, format_epsilon
from .query_budget import BudgetExhaustedError, BudgetStateError, QueryBudgetAccountant, UnlimitedAccountant

__all__ = [
    "Release", "PrivacyLedger", "Guarantee", "NoneProven", "NONE_PROVEN", "format_epsilon", "check_epochs",
    "compose_events", "event_to_json", "event_from_json",
    "QueryBudgetAccountant", "UnlimitedAccountant", "BudgetExhaustedError", "BudgetStateError", "gdp_delta",
    "gdp_epsilon",
    "gaussian_epsilon", "gaussian_sigma", "laplace_scale", "local_gaussian_epsilon", "sigma_local_gaussian",
    "dpsgd_steps", "dpsgd_epsilon", "dpsgd_noise_multiplier", "dpsgd_epsilon_after_steps", "epsilon_any_order",
    "poisson_dpsgd_epsilon", "poisson_dpsgd_noise_multiplier", "NotCertifiableError", "smallest_sigma",
    "PrivacyBudget", "write_json_atomically", "locked_state",
]
