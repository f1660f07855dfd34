"""Every model builder of the package.

* :mod:`.mnist`: AdLM's MNIST networks (``mnist_cnn``, ``mlp``) and the standard-layer
  ``standard_cnn`` / ``standard_mlp`` (non-private baseline, DP-SGD).
* :mod:`.erm`: the DP-ERM models of input perturbation (``linear_model``, ``paper_mlp``, ``L2BallConstraint``).
* :mod:`.convexified`: output perturbation's ``convexified_mlp`` and ``logits_model_from``.
* :mod:`.afrrs`: the AFRRS paper's Table-1 (MNIST) and Table-2 (CIFAR-10) models.
* :mod:`.authors`: the networks of the AdLM and pCDBN authors' public code (the reference modes).
"""

from .afrrs import afrrs_cifar_model, afrrs_mnist_model
from .authors import authors_mnist_network, lenet5_relevance_model, pcdbn_authors_network
from .convexified import convexified_mlp, logits_model_from
from .erm import L2BallConstraint, linear_model, paper_mlp
from .mnist import mlp, mnist_cnn, standard_cnn, standard_mlp

__all__ = [
    "mnist_cnn", "mlp", "standard_cnn", "standard_mlp", "linear_model", "paper_mlp", "L2BallConstraint",
    "convexified_mlp", "logits_model_from", "afrrs_mnist_model", "afrrs_cifar_model", "authors_mnist_network",
    "lenet5_relevance_model", "pcdbn_authors_network",
]
