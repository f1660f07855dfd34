"""The ledger entries of AdLM's perturbation: the noisy features (ε2) and the noisy loss coefficients (ε3).

The paper claims ε2 and ε3 (Theorem 1); with noise drawn once per record each release is a Laplace
mechanism per record and its provable ε is recorded; the shared modes prove nothing, and say so.
"""

from __future__ import annotations

import numpy as np

from ...accounting.ledger import Release
from ...contract import release

__all__ = ["record_releases"]


def record_releases(mech, n, d, beta, scales, delta_h0, delta_f, fingerprint) -> None:
    """Record ``mech``'s two releases (features, loss coefficients) in its ledger: claimed, and proven per
    record only for ``per_example_frozen`` noise."""
    per_record = mech.noise_mode == "per_example_frozen"
    reproduction = not per_record
    common = {"noise_mode": mech.noise_mode, "batch_size": mech.batch_size, "n": n,
              "records_dropped_per_epoch": n % mech.batch_size,
              "allocation": mech.allocation_name, "fingerprint": fingerprint}
    # features: per record, Σ_j c_j / b_j with c_j = 1 (x in [0, 1]) = |L|·ε2·Σβ/Δ_h0
    feat_provable = float(np.sum(1.0 / scales)) if per_record else None
    feat_basis = (
        "Laplace mechanism on each record's features (range 1 per feature); the model is "
        "post-processing of x̄" if per_record else
        "none: a noise draw shared by all records is revealed by one known record; "
        "Lemma 4 (Eqs. 19-21) bounds only the batch sum; see docs/mechanisms/adlm.md"
    )
    release(mech.ledger, Release(
        component="first_layer_inputs", mechanism="laplace", epsilon_claimed=mech.eps2,
        neighbours="replace_one", protects="record",
        epsilon_provable=feat_provable, basis=feat_basis, sensitivity=delta_h0,
        noise_scale=float(np.min(scales)), per_epoch=mech.noise_mode == "shared_per_step",
        reproduction=reproduction,
        details={**common, "delta_h0_policy": mech.delta_h0_policy, "scale_min": float(np.min(scales)),
                 "scale_max": float(np.max(scales)), "beta_sum": float(beta.sum()),
                 "bias_noise": mech.bias_noise, "clip_noisy_inputs": mech.clip_noisy_inputs,
                 **mech.sensitivities},
    ))
    coef_scale = delta_f / (mech.batch_size * mech.eps3)
    # labels: replacing a record moves ϕ^(1) = 1/2 - y by 1 in two classes (L1 = 2)
    coef_provable = 2.0 / coef_scale if per_record else None
    release(mech.ledger, Release(
        component="loss_coefficients", mechanism="laplace", epsilon_claimed=mech.eps3,
        neighbours="replace_one", protects="record",
        epsilon_provable=coef_provable,
        basis=("Laplace mechanism on each record's label coefficients, L1 sensitivity 2 "
               "(orders 0 and 2 do not depend on the data)") if per_record else
              "none: coefficient noise shared by all records is data-independent (Lemma 6, App. E, "
              "bounds only the batch aggregate)",
        sensitivity=delta_f, noise_scale=coef_scale, reproduction=reproduction,
        details={**common, "perturb_orders": list(mech.perturb_orders)},
    ))
