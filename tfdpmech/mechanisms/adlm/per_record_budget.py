"""The per-record private mode of AdLM, ILM and AFRRS against the ε it is asked for.

Algorithm 1 calibrates its Laplace noise to a batch: ``Δ_h0/(|L|·β_j·ε2)`` on the inputs (lines
12–13) and ``Δ_F/(|L|·ε3)`` on the label coefficients (lines 18–19), because Lemmas 4 and 6 bound a
sum over the |L| records of a batch. Drawn once per record, the same noise proves

    ε1 + |L|·d·ε2/Δ_h0 + 2|L|·ε3/Δ_F                      (per record, replace-one)

(:func:`~tfdpmech.mechanisms.adlm.sensitivity.provable_epsilon_per_record`). The number of steps,
epochs and records does not enter (the trained model is post-processing of the released data); the
batch size does, linearly. On the AdLM MNIST CNN (Δ_h0 = 39,200, Δ_F = 1,812.5, d = 784) the input
term is ``0.02·|L|·ε2``: below ε2 for |L| < 50, twenty times ε2 at |L| = 1,000.
:func:`check_per_record_target` refuses a batch size whose per-record ε exceeds the target, before
any release, and names the largest batch size that meets it.
"""

from __future__ import annotations

import math

from ...accounting.display import epsilon_upper
from ...accounting.sigma_search import NotCertifiableError

__all__ = ["largest_certified_batch", "check_per_record_target"]

_REL_TOL = 1e-12  # float rounding of the sums; below what a printed ε (12 significant digits) can show


def largest_certified_batch(*, eps2: float, eps3: float, sensitivities: dict) -> int:
    """The largest |L| with ``|L|·(d·ε2/Δ_h0 + 2·ε3/Δ_F) <= ε2 + ε3``, i.e. the per-record ε at most
    ε1 + ε2 + ε3 (0 when none).

    ``sensitivities``: ``{"d", "delta_h0", "delta_F"}`` of the model (:func:`model_sensitivities`).
    """
    s = sensitivities
    per_unit_of_batch = s["d"] * eps2 / s["delta_h0"] + 2.0 * eps3 / s["delta_F"]
    return max(math.floor((eps2 + eps3) * (1 + _REL_TOL) / per_unit_of_batch), 0)


def check_per_record_target(owner: str, *, eps1: float, eps2: float, eps3: float, batch_size: int,
                            sensitivities: dict, inputs: float | None = None) -> float:
    """The per-record ε of Algorithm 1's noise at ``batch_size``; refused when above ``eps1 + eps2 + eps3``.

    Args:
        owner: the mechanism's name for the message (``"AFRRS"``).
        eps1, eps2, eps3: the budgets the mechanism was asked for (``eps1 = 0`` for ILM).
        batch_size: |L|.
        sensitivities: ``{"d", "delta_h0", "delta_F"}`` of the model.
        inputs: the input release's per-record ε as recorded (Σ_j 1/b_j of its scales); None takes
            ``|L|·d·ε2/Δ_h0``, its value for every allocation (Σβ = d), before the relevance is known.

    Returns:
        ``eps1 + inputs + 2|L|·ε3/Δ_F``.

    Raises:
        NotCertifiableError: (a ValueError) that ε exceeds ``eps1 + eps2 + eps3``; the message names
            ``batch_size``, the provable ε and the largest batch size that meets the target.
    """
    s, target = sensitivities, eps1 + eps2 + eps3
    if inputs is None:
        inputs = batch_size * s["d"] * eps2 / s["delta_h0"]
    labels = 2.0 * batch_size * eps3 / s["delta_F"]
    provable = eps1 + inputs + labels
    if provable <= target * (1 + _REL_TOL):
        return provable
    largest = largest_certified_batch(eps2=eps2, eps3=eps3, sensitivities=s)
    fix = (f"pass batch_size <= {largest}, which meets ε = {target:g} on this model" if largest >= 1 else
           "no batch size meets it on this model; raise the ε")
    raise NotCertifiableError(
        f"batch_size={batch_size}: {owner}'s per-record private mode proves ε = {epsilon_upper(provable)} per record "
        f"on this model (relevance {epsilon_upper(eps1)} + inputs {epsilon_upper(inputs)} + labels "
        f"{epsilon_upper(labels)}), above the ε = {target:g} it was asked for. Algorithm 1 divides its Laplace "
        f"scales by the batch size (Δ_h0/(|L|·β·ε2) with Δ_h0 = {s['delta_h0']:g}, Δ_F/(|L|·ε3) with "
        f"Δ_F = {s['delta_F']:g}), so the per-record ε grows with batch_size; {fix}"
    )
