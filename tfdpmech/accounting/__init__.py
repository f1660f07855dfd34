"""Privacy accounting in one place: the ledger, the query budget and the ``dp_accounting`` calibrations.

* :mod:`~tfdpmech.accounting.ledger`: :class:`Release`, :class:`PrivacyLedger`, ``NONE_PROVEN``.
* :mod:`~tfdpmech.accounting.query_budget`: :class:`QueryBudgetAccountant` (per-query ε, GDP).
* :mod:`~tfdpmech.accounting.gaussian`: one Gaussian mechanism's ε ↔ σ (``dp_accounting``).
* :mod:`~tfdpmech.accounting.dpsgd`: DP-SGD's ε ↔ noise multiplier (``dp_accounting`` RDP).
* :mod:`~tfdpmech.accounting.callbacks`: :class:`PrivacyBudget`, the Keras callback that logs ε.
* :mod:`~tfdpmech.accounting.atomic_file`: crash-safe JSON writes for ledgers and budgets.
"""

from .atomic_file import write_json_atomically
from .callbacks import PrivacyBudget
from .dpsgd import dpsgd_steps, epsilon_any_order, epsilon_for_noise_multiplier, noise_multiplier_for_epsilon
from .gaussian import gaussian_epsilon, local_gaussian_epsilon, sigma_local_gaussian
from .ledger import NONE_PROVEN, PrivacyLedger, Release, format_epsilon
from .query_budget import (
    BudgetExhaustedError,
    BudgetStateError,
    QueryBudgetAccountant,
    UnlimitedAccountant,
    gdp_delta,
    gdp_epsilon,
)

__all__ = [
    "Release", "PrivacyLedger", "NONE_PROVEN", "format_epsilon",
    "QueryBudgetAccountant", "UnlimitedAccountant", "BudgetExhaustedError", "BudgetStateError", "gdp_delta",
    "gdp_epsilon",
    "gaussian_epsilon", "local_gaussian_epsilon", "sigma_local_gaussian",
    "dpsgd_steps", "epsilon_for_noise_multiplier", "noise_multiplier_for_epsilon", "epsilon_any_order",
    "PrivacyBudget", "write_json_atomically",
]
