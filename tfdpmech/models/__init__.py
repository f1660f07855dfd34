"""Every model builder of the package: the MNIST networks and baselines defined here, and the papers'
own models offered here too.

* :mod:`.mnist`: AdLM's MNIST networks (``mnist_cnn``, ``mlp``) and the standard-layer
  ``standard_cnn`` / ``standard_mlp`` (non-private baseline, DP-SGD).
* :mod:`.tanh_cnn`: DP-SGD's MNIST baseline CNN (Papernot et al. 2021; Tramèr & Boneh 2021).
* :mod:`.application`: ``mobilenet_v2_gn``, Keras's MobileNetV2 with GroupNormalization on small images (the
  fine-tuning preset's backbone; resolved on first access).

The papers' own models live in their paper's subpackage and are offered here too (resolved on
first access, :mod:`tfdpmech._lazy`):

* :mod:`tfdpmech.mechanisms.input_perturbation.models`: the DP-ERM models of input perturbation
  (``linear_model``, ``paper_mlp``, ``L2BallConstraint``).
* :mod:`tfdpmech.mechanisms.output_perturbation.convexified_mlp`: output perturbation's
  ``convexified_mlp`` and ``logits_model_from``.
* :mod:`tfdpmech.mechanisms.afrrs.models`: the AFRRS paper's Table-1 (MNIST) and Table-2 (CIFAR-10) models.
* :mod:`tfdpmech.mechanisms.adlm.networks`, :mod:`tfdpmech.mechanisms.pcdbn.networks`: the networks of
  the AdLM and pCDBN authors' public code (the reference modes).
"""

from .._lazy import lazy_attributes
from .mnist import mlp, mnist_cnn, standard_cnn, standard_mlp
from .tanh_cnn import tanh_cnn

_ERM = "tfdpmech.mechanisms.input_perturbation.models"
_CONVEXIFIED = "tfdpmech.mechanisms.output_perturbation.convexified_mlp"
_AFRRS = "tfdpmech.mechanisms.afrrs.models"
_ADLM = "tfdpmech.mechanisms.adlm.networks"
_PAPER_MODELS = {
    "linear_model": _ERM, "paper_mlp": _ERM, "L2BallConstraint": _ERM,
    "convexified_mlp": _CONVEXIFIED, "logits_model_from": _CONVEXIFIED,
    "afrrs_mnist_model": _AFRRS, "afrrs_cifar_model": _AFRRS,
    "authors_mnist_network": _ADLM, "lenet5_relevance_model": _ADLM,
    "pcdbn_authors_network": "tfdpmech.mechanisms.pcdbn.networks",
    "mobilenet_v2_gn": "tfdpmech.models.application",
}
__getattr__, __dir__ = lazy_attributes(__name__, _PAPER_MODELS)

__all__ = [
    "mnist_cnn", "mlp", "standard_cnn", "standard_mlp", "tanh_cnn", "linear_model", "paper_mlp", "L2BallConstraint",
    "convexified_mlp", "logits_model_from", "afrrs_mnist_model", "afrrs_cifar_model", "authors_mnist_network",
    "lenet5_relevance_model", "pcdbn_authors_network", "mobilenet_v2_gn",
]
