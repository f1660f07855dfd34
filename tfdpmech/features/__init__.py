"""Feature extractors that never saw the private data, each with its provenance as an ε = 0 release.

* :func:`public_features`: a model trained on public data, cut at a bounded layer;
* :func:`random_features`: fixed random Fourier features (data-independent, seeded);
* public data sources: :func:`split_public` (a disjoint part of a training split) and
  :func:`load_digits_public` (scikit-learn's 8×8 digits resized to 28×28).

* :func:`scatter_features`: the 2-D scattering transform (Tramèr & Boneh, ICLR 2021) via
  ``kymatio`` (the optional extra ``tfdpmech[scatter]``), then a fixed random projection
  (data-independent; unbounded, for the Gaussian head).
"""

from .extractor import FeatureExtractor, weights_fingerprint
from .public import layer_bounds, public_features
from .public_data import (
    PublicSplit, check_disjoint, load_digits_public, public_split, record_hashes, split_public,
)
from .random import RandomFourierFeatures, random_features
from .scatter import ScatteringProjection, scatter_features, scattering_coefficients

__all__ = [
    "FeatureExtractor", "weights_fingerprint", "public_features", "layer_bounds", "random_features",
    "RandomFourierFeatures", "scatter_features", "scattering_coefficients", "ScatteringProjection", "PublicSplit", "split_public", "load_digits_public", "public_split",
    "check_disjoint", "record_hashes",
]
