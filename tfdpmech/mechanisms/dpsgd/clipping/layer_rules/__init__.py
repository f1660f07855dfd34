"""The layer registry of the ghost-norm path: one module per layer family (see :mod:`.registry`).

- :mod:`.dense`: Dense, EinsumDense (MultiHeadAttention's projections); :mod:`.lora`: either with LoRA;
- :mod:`.embedding`: Embedding, with ids from the data or shared (positions);
- :mod:`.reversible_embedding`: ReversibleEmbedding (Keras's, keras-hub's): the lookup and the tied output projection;
- :mod:`.position_embedding`: keras-hub's PositionEmbedding (a lookup at the positions);
- :mod:`.convolution`: Conv1D/2D/3D and Conv1D/2D/3DTranspose;
- :mod:`.depthwise`: DepthwiseConv1D/2D, SeparableConv1D/2D, and Conv1D/2D with one input channel per group;
- :mod:`.layer_scale`: keras.applications ConvNeXt's LayerScale (a learnt per-channel scale);
- :mod:`.normalization`: LayerNormalization, GroupNormalization, RMSNormalization;
- :mod:`.recurrent`: SimpleRNN, LSTM, GRU;
- :mod:`.alone`: any other layer, handled alone (its own weights' per-record gradients);
- :mod:`.shared_uses`: a layer called more than once per forward pass (the cross terms between its calls).

:func:`register_layer_rule` adds a rule for a layer class of one's own.
"""

from . import convolution, dense, depthwise, embedding, layer_scale, lora, normalization, position_embedding, recurrent, reversible_embedding  # noqa: F401  (each registers its rules)
from .alone import ALONE, AloneRule
from .registry import LayerRule, Tapped, register_layer_rule, registered_classes, registered_rule

__all__ = ["ALONE", "AloneRule", "LayerRule", "Tapped", "register_layer_rule", "registered_classes",
           "registered_rule"]
