"""Privacy audits that any mechanism's outputs can be run through (membership inference)."""

from .membership_inference import (
    ShadowModelAttack,
    ShadowSplit,
    accuracy_loss,
    membership_advantage,
    run_tf_privacy_attacks,
    shadow_attack_data,
    split_target_and_shadows,
    tf_privacy_attack_floor,
    tf_privacy_attacks_available,
)

__all__ = [
    "ShadowModelAttack",
    "ShadowSplit",
    "accuracy_loss",
    "membership_advantage",
    "run_tf_privacy_attacks",
    "shadow_attack_data",
    "split_target_and_shadows",
    "tf_privacy_attack_floor",
    "tf_privacy_attacks_available",
]
