"""DP-SGD: Poisson-sampled (default, ε proven) and shuffled-batch runs, on Keras 2.15 and Keras 3.

The engine in three folders, one per question a DP-SGD step answers:

- :mod:`.sampling`: *who is in a step*.

  - :mod:`.sampling.poisson_sampling`: Poisson batches, padded; batch t drawn from a secret key and t.
  - :mod:`.sampling.poisson_units`: the clipping unit of a Poisson run (mixed into :class:`DPSGD`): a record, its K
    augmented views (:mod:`.sampling.augmentation`) or a user's records (:mod:`.sampling.user_sampling`).
  - the records a ``fit`` takes: arrays of any Keras signature (:mod:`.sampling.records`), their weights and
    ``validation_split`` (:mod:`.sampling.record_weights`), a ``tf.data.Dataset`` of single records
    (:mod:`.sampling.record_datasets`), random-access sources larger than memory (:mod:`.sampling.record_sources`;
    ArrayRecord files: :mod:`.sampling.array_records`).

- :mod:`.noise`: *what noise a step adds*: independent draws (DP-SGD), or BandMF's correlated noise with ``DPSGD(...,
  bands=b)`` (:mod:`.runs.banded_run`): the banded strategy (:mod:`.noise.banded_strategy`) and its inverse applied
  stream-wise (:mod:`.noise.correlated_noise`); cyclic Poisson partitions in :mod:`.sampling.cyclic_poisson`.

- :mod:`.clipping`: *how a step is clipped*.

  - :mod:`.clipping.clipped_sums`: the per-example clipped gradient sums of any Keras model: the ghost norms of one
    backward pass (:mod:`.clipping.ghost_norms`, with the layer registry :mod:`.clipping.layer_rules` and
    :func:`register_layer_rule`; checked on a probe batch by :mod:`.clipping.ghost_probe`), or per-record gradients
    for any other model.
  - :mod:`.clipping.chunked_clipping`: ``physical_batch_size``, a Poisson batch clipped in chunks;
    :mod:`.clipping.output_losses`: the per-record loss of a model with several outputs.
  - what per-example clipping cannot bound, before any release: a training pass that sets state from the batch or
    mixes records is refused (:mod:`.clipping.model_probe`); :func:`replace_batch_norm`
    (:mod:`.clipping.batch_norm`) puts ``GroupNormalization`` in place of each trainable ``BatchNormalization``.

- :mod:`.runs`: *the run around it*.

  - :class:`DPSGD` (:mod:`.runs.poisson`, σ from n in :mod:`.runs.poisson_calibration`): every step samples each
    record with probability q; the noisy sum of clipped gradients is divided by the expected batch size; the
    Poisson ε from ``dp_accounting`` is **proven**.
  - :class:`ShuffledDPSGD` (:mod:`.runs.shuffled`): shuffled fixed-size batches; the Poisson ε is only *claimed*,
    the any-order ε is *provable*.
  - :class:`DPSGDRun` (:mod:`.runs.base`): what both share (validated settings, ``compile``, data checks);
    :class:`DPSGDBudget` (:mod:`.runs.callback`): their Keras callback; :class:`OptimizerSettings`
    (:mod:`.runs.optimizer_settings`): the optimiser of either run in one frozen object.
  - :mod:`.runs.paths`: the engines (``engine="auto"``: tensorflow-privacy where it imports, else tfdpmech's own),
    the training paths and the model checks; :mod:`.runs.run_engines`: how a run compiles with each engine;
    :mod:`.runs.train_step`: tfdpmech's train step (clipped sum, noise once, public divisor);
    :mod:`.runs.poisson_models`: tensorflow-privacy's DP models with the Poisson train step.
  - :mod:`.runs.guards`: the compiled model trains only on the run's own batches, within the accounted steps;
    :mod:`.runs.multiworker`: several workers.
  - :mod:`.runs.private_model`: what :func:`tfdpmech.make_private` does with a :class:`DPSGD` run: an ordinary
    Keras model then trains with Poisson DP-SGD through its own ``compile`` / ``fit``, on every stack.
  - :mod:`.runs.run_state` and :mod:`.runs.resume`: a compiled run travels with its model (``model.save``,
    checkpoints) in its optimizer; :func:`resume` continues a loaded one, a new run composes with it.
  - :mod:`.runs.recipe`: the stated recipe (:data:`RECIPE`, :func:`tanh_mlp`, :func:`make_dpsgd`).

Importing this package does not import tensorflow-privacy. The accounting (ε ↔ noise multiplier)
lives in :mod:`tfdpmech.accounting.dpsgd`.
"""

from .sampling.poisson_sampling import PoissonSampler, padded_batch_size, poisson_dataset
from .clipping.batch_norm import replace_batch_norm
from .clipping.clipped_sums import GHOST_LAYERS, clipped_gradient_sum, ghost_unsupported_layers
from .clipping.layer_rules import LayerRule, register_layer_rule
from .runs.base import OPTIMIZERS, DPSGDRun
from .runs.callback import DPSGDBudget
from .runs.optimizer_settings import OptimizerSettings
from .runs.paths import (ENGINES, PATHS, fast_clipping_layers, resolve_engine, supports_fast_clipping,
                         tf_privacy_available)
from .runs.poisson import DPSGD
from .runs.recipe import FINETUNE_RECIPE, HEAD_RECIPE, RECIPE, SAMPLINGS, Recipe, make_dpsgd, tanh_mlp
from .runs.resume import resume
from .runs.shuffled import ShuffledDPSGD

__all__ = ["DPSGD", "resume", "LayerRule", "register_layer_rule", "ShuffledDPSGD", "DPSGDRun", "DPSGDBudget", "OPTIMIZERS", "OptimizerSettings", "ENGINES", "PATHS", "GHOST_LAYERS", "clipped_gradient_sum",
           "ghost_unsupported_layers", "resolve_engine", "tf_privacy_available", "fast_clipping_layers",
           "supports_fast_clipping",
           "PoissonSampler", "padded_batch_size", "poisson_dataset", "RECIPE", "HEAD_RECIPE",
           "FINETUNE_RECIPE", "SAMPLINGS", "Recipe", "make_dpsgd", "tanh_mlp", "replace_batch_norm"]
