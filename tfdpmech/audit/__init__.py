"""Privacy audits that any mechanism's outputs can be run through: membership inference (the shadow-model
attack, the threshold and logistic-regression attacks) and the one-run canary audit with its ε lower bound."""

from .canary import CanaryAudit, audit_scores, canary_audit, digits_canaries, epsilon_lower_bound, noise_canaries
from .membership_inference import (
    ShadowModelAttack, ShadowSplit, accuracy_loss, membership_advantage, shadow_attack_data, split_target_and_shadows,
)
from .mia_run import (
    mia_attack_floor, mia_attacks_available, mia_implementation, run_mia_attacks, run_tf_privacy_attacks,
    tf_privacy_attack_floor, tf_privacy_attacks_available,
)

__all__ = [
    "CanaryAudit",
    "ShadowModelAttack",
    "ShadowSplit",
    "accuracy_loss",
    "audit_scores",
    "canary_audit",
    "digits_canaries",
    "epsilon_lower_bound",
    "membership_advantage",
    "mia_attack_floor",
    "mia_attacks_available",
    "mia_implementation",
    "noise_canaries",
    "run_mia_attacks",
    "run_tf_privacy_attacks",
    "shadow_attack_data",
    "split_target_and_shadows",
    "tf_privacy_attack_floor",
    "tf_privacy_attacks_available",
]
