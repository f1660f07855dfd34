"""How a DP-SGD step is clipped: per-example clipped gradient sums (:mod:`.clipped_sums`) from the ghost norms of one
backward pass (:mod:`.ghost_norms`, the layer registry :mod:`.layer_rules`, checked by :mod:`.ghost_probe`) or from
per-record gradients; batches clipped in chunks; the per-record loss of several outputs; and the models per-example
clipping cannot bound, found (:mod:`.model_probe`) or replaced (:mod:`.batch_norm`) before any release.

The names of :mod:`.clipped_sums` that other modules use are importable from here too.
"""

from .clipped_sums import (
    CLIPPING_METHODS,
    GHOST_LAYERS,
    clipped_gradient_sum,
    ghost_norms_mismatch,
    ghost_unsupported_layers,
    gradients,
    per_example_loss,
    resolve_clipping,
)

__all__ = ["CLIPPING_METHODS", "GHOST_LAYERS", "clipped_gradient_sum", "ghost_norms_mismatch",
           "ghost_unsupported_layers", "gradients", "per_example_loss", "resolve_clipping"]
