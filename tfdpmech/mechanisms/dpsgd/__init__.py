"""DP-SGD: Poisson-sampled (default, ε proven) and shuffled-batch runs, on Keras 2.15 and Keras 3.

- :class:`DPSGD` (:mod:`.poisson`): every step samples each record with probability q;
  the noisy sum of clipped gradients is divided by the expected batch size; the Poisson ε from
  ``dp_accounting`` is **proven**.
- :class:`ShuffledDPSGD` (:mod:`.shuffled`): shuffled fixed-size batches; the Poisson ε is only *claimed*, the
  any-order ε is *provable*.
- :class:`DPSGDRun` (:mod:`.base`): what both share (validated settings, engines, ``compile``, data
  checks); :class:`DPSGDBudget` (:mod:`.callback`): their Keras callback.
- :class:`OptimizerSettings` (:mod:`.optimizer_settings`): the optimiser of either run (name, step
  size, SGD momentum, schedule, weight average) in one frozen object; ``optimizer="adam"`` names it.
- :mod:`.poisson_sampling` (Poisson batches, padded; batch t drawn from a secret key and t) and
  :mod:`.poisson_models` (tensorflow-privacy's DP models with the Poisson train step).
- :mod:`.recipe`: the stated recipe (:data:`RECIPE`, :func:`tanh_mlp`, :func:`make_dpsgd`).
- :mod:`.paths`: the engines (``engine="auto"``: tensorflow-privacy where it imports, else
  tfdpmech's own), the training paths and the model checks.
- :mod:`.run_state` and :mod:`.resume`: a compiled run travels with its model (``model.save``, checkpoints)
  in its optimizer; :func:`resume` continues a loaded one, a new run composes with it.
- :mod:`.chunked_clipping`: ``physical_batch_size``, a Poisson batch clipped in chunks.
- :mod:`.private_model`: what :func:`tfdpmech.make_private` does with a :class:`DPSGD` run: an
  ordinary Keras model then trains with Poisson DP-SGD through its own ``compile`` / ``fit``, on every stack.
- :mod:`.train_step` and :mod:`.clipping`: tfdpmech's own engine, the train step installed on the
  user's model and the per-example clipped gradient sums (:mod:`.ghost_norms` with the layer registry
  :mod:`.layer_rules`, checked on a probe batch by :mod:`.ghost_probe`; per-record gradients for any other
  model).
- :mod:`.batch_norm`: :func:`replace_batch_norm`, a copy of a model with ``GroupNormalization`` in place
  of each trainable ``BatchNormalization`` (which DP-SGD refuses; a frozen one is accepted).
- :mod:`.model_probe` (a model whose training pass sets state from the batch or mixes records is
  refused before the release), :mod:`.guards` (the compiled model trains only on the run's own
  batches, within the accounted steps) and :mod:`.run_engines` (how a run compiles with each engine).

Importing this package does not import tensorflow-privacy. The accounting (ε ↔ noise multiplier)
lives in :mod:`tfdpmech.accounting.dpsgd`.
"""

from .base import OPTIMIZERS, DPSGDRun
from .batch_norm import replace_batch_norm
from .callback import DPSGDBudget
from .clipping import GHOST_LAYERS, clipped_gradient_sum, ghost_unsupported_layers
from .shuffled import ShuffledDPSGD
from .optimizer_settings import OptimizerSettings
from .paths import ENGINES, PATHS, fast_clipping_layers, resolve_engine, supports_fast_clipping, tf_privacy_available
from .poisson import DPSGD
from .layer_rules import LayerRule, register_layer_rule
from .resume import resume
from .poisson_sampling import PoissonSampler, padded_batch_size, poisson_dataset
from .recipe import FINETUNE_RECIPE, HEAD_RECIPE, RECIPE, SAMPLINGS, Recipe, make_dpsgd, tanh_mlp

__all__ = ["DPSGD", "resume", "LayerRule", "register_layer_rule", "ShuffledDPSGD", "DPSGDRun", "DPSGDBudget", "OPTIMIZERS", "OptimizerSettings", "ENGINES", "PATHS", "GHOST_LAYERS", "clipped_gradient_sum",
           "ghost_unsupported_layers", "resolve_engine", "tf_privacy_available", "fast_clipping_layers",
           "supports_fast_clipping",
           "PoissonSampler", "padded_batch_size", "poisson_dataset", "RECIPE", "HEAD_RECIPE",
           "FINETUNE_RECIPE", "SAMPLINGS", "Recipe", "make_dpsgd", "tanh_mlp", "replace_batch_norm"]
