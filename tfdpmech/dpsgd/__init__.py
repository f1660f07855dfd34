"""DP-SGD through tensorflow-privacy: Poisson-sampled (default, ε proven) and shuffled-batch runs.

- :class:`PoissonDPSGD` (:mod:`.poisson`): every step samples each record with probability q;
  the noisy sum of clipped gradients is divided by the expected batch size; the Poisson ε from
  ``dp_accounting`` is **proven**.
- :class:`DPSGD` (:mod:`.dpsgd`): shuffled fixed-size batches; the Poisson ε is only *claimed*, the
  any-order ε is *provable*.
- :mod:`.recipe`: the stated recipe (:data:`RECIPE`, :func:`tanh_mlp`, :func:`make_dpsgd`).
- :mod:`.paths`: the training paths and the model checks.

Importing this package does not import tensorflow-privacy; using the DP-SGD API without it raises
an ImportError that says ``pip install tfdpmech[dpsgd] (needs TensorFlow 2.15)``. The accounting
(ε ↔ noise multiplier) lives in :mod:`tfdpmech.accounting.dpsgd`.
"""

from .dpsgd import DPSGD, OPTIMIZERS, DPSGDBudget
from .paths import PATHS, fast_clipping_layers, supports_fast_clipping
from .poisson import PoissonDPSGD, PoissonSampler, padded_batch_size, poisson_dataset
from .recipe import FINETUNE_RECIPE, HEAD_RECIPE, RECIPE, SAMPLINGS, Recipe, make_dpsgd, tanh_mlp

__all__ = ["DPSGD", "DPSGDBudget", "OPTIMIZERS", "PATHS", "fast_clipping_layers", "supports_fast_clipping",
           "PoissonDPSGD", "PoissonSampler", "padded_batch_size", "poisson_dataset", "RECIPE", "HEAD_RECIPE",
           "FINETUNE_RECIPE", "SAMPLINGS", "Recipe", "make_dpsgd", "tanh_mlp"]
