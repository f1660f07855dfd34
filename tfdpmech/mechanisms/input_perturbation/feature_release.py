"""The ledger entry of input perturbation's one feature release: what is claimed, what is proven, and why.

``mode="reference"``: Kang et al. 2020 Theorem 1 / 3 claim (ε, δ) and nothing is proven (gaps in the
published proof); ``mode="private"``: a Gaussian mechanism on each record's features, L2 sensitivity
2R, accounted with ``dp_accounting`` (:func:`tfdpmech.accounting.gaussian.local_gaussian_epsilon`).
"""

from __future__ import annotations

from ...accounting.gaussian import local_gaussian_epsilon, require_dp_accounting
from ...accounting.ledger import Release
from .calibration import paper_constant

__all__ = ["PAPER_BASIS", "feature_release", "implied_local_epsilon"]

PAPER_BASIS = (
    "none proven: Kang et al. 2020 Theorem {thm} claims (ε, δ)-DP for θ_T, but the published proof has "
    "gaps (Eq. 18 variance Cσ² instead of C²σ² and M_t is not Gaussian; Eq. 27 lower-bounds a signed scalar "
    "that is 0 at the optimum; Eqs. 30-31 compose T steps that share a single noise draw; see "
    "docs/mechanisms/input_perturbation.md)"
)


def feature_release(mech, n: int, d: int, clipped: bool, charged: bool) -> Release:
    """The :class:`Release` of the noisy features of ``n`` records of ``d`` features drawn by ``mech``
    (claimed by the paper's Theorem in ``mode="reference"``, proven per record in ``mode="private"``)."""
    details = {
        "mode": mech.mode, "noise_structure": mech.noise_structure, "n": n, "d": d,
        "T": mech.epochs, "n_effective": mech.n_effective, "T_effective": mech.T_effective,
        "batch_size": mech.batch_size, "G": mech.G, "strong_convexity": mech.curvature,
        "condition": mech.condition, "theta_bound": mech.constants.theta_bound, "beta": mech.constants.beta,
        "l2": mech.constants.l2, "num_classes": mech.num_classes, "feature_norm_bound": mech.feature_norm_bound,
        "clip": "rows clipped to ‖x‖ <= R before the noise" if clipped else "none (all rows within R)",
        "perturbation": mech.perturbations, "charged_new_budget": bool(charged), "fingerprint": mech.fingerprint,
        "adjacency": "replace one record",
    }
    if mech.mode == "reference":
        thm = "3" if mech.condition == "pl" else "1"
        c = mech.c if mech.c is not None else paper_constant(mech.feature_epsilon, mech.delta, mech.kappa)
        details.update(c=c, kappa=mech.kappa, paper_literal_pl=mech.paper_literal_pl,
                       epsilon_paper_accountant=mech.epsilon_after(mech.T_effective),
                       implied_local_epsilon=implied_local_epsilon(mech))
        if mech.num_classes > 2:
            details["warning"] = "softmax cross-entropy is not of the margin form the paper's theory assumes"
        basis = PAPER_BASIS.format(thm=thm)
        if mech.noise_structure == "shared":
            basis += "; shared noise: one known record reveals z and all pairwise differences x_i − x_j"
        return Release(
            component="training_features", mechanism="gaussian", epsilon_claimed=mech.epsilon,
            epsilon_provable=None, basis=basis, delta=mech.delta, sensitivity=2.0 * mech.G / mech.n_effective,
            noise_scale=mech.sigma, reproduction=mech.noise_structure == "shared", details=details,
            neighbours="replace_one", protects="features",  # the noise is on the features; labels are public
        )
    eps_x = local_gaussian_epsilon(mech.sigma, mech.delta, mech.feature_norm_bound, accountant=mech.accountant)
    provable = eps_x + (mech.label_epsilon or 0.0)
    labels = (f"; labels by {mech.num_classes}-ary randomized response with ε={mech.label_epsilon:g}, "
              "basic composition" if mech.label_epsilon is not None else
              "; labels are NOT randomized: the guarantee covers a change of one record's features, with labels "
              "treated as public")
    details.update(epsilon_features=eps_x, label_epsilon=mech.label_epsilon, accountant=mech.accountant,
                   adjacency="replace one record" if mech.label_epsilon is not None else
                   "replace one record's features (labels public)")
    return Release(
        component="training_features", mechanism="gaussian", epsilon_claimed=mech.epsilon,
        epsilon_provable=provable,
        basis=(f"Gaussian mechanism on each record's features, L2 sensitivity 2R={2 * mech.feature_norm_bound:g} "
               "(replace one record in the R-ball), noise multiplier σ/(2R), ε from dp_accounting ("
               + ("the exact privacy curve of one Gaussian mechanism" if mech.accountant == "analytic"
                  else f"{mech.accountant.upper()} accountant")
               + "); the model is post-processing of the noisy data for any optimizer, batch size and "
               f"model{labels}"),
        delta=mech.delta, sensitivity=2.0 * mech.feature_norm_bound, noise_scale=mech.sigma, details=details,
        neighbours="replace_one", protects="record" if mech.label_epsilon is not None else "features",
        # the features' Gaussian mechanism as a dp_accounting event, so that a ledger composes it with other
        # (ε, δ) releases by PLD/RDP; with randomized labels the pure label ε adds (no event)
        event=(require_dp_accounting("the input-perturbation ledger").GaussianDpEvent(
            mech.sigma / (2.0 * mech.feature_norm_bound)) if mech.label_epsilon is None else None),
    )

def implied_local_epsilon(mech):
    """The per-record Gaussian ε that ``mech``'s σ would prove (None for shared noise or without dp_accounting)."""
    if mech.noise_structure == "shared":
        return None
    try:
        return local_gaussian_epsilon(mech.sigma, mech.delta, mech.feature_norm_bound, accountant=mech.accountant)
    except ImportError:
        return None
