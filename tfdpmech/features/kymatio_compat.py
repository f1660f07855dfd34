"""Import ``kymatio.tensorflow`` on this stack (importing this module fails where kymatio cannot load).

kymatio 0.3.0 imports ``scipy.special.sph_harm`` (for its 3-D transform), which SciPy 1.15 renamed
``sph_harm_y`` (degree first, angles swapped) and 1.17 removed. When it is missing, the exact
equivalent is added to ``scipy.special`` before kymatio is imported; the 2-D transform used by
:mod:`tfdpmech.features.scatter` never calls it.
"""

from __future__ import annotations

import scipy.special

if not hasattr(scipy.special, "sph_harm") and hasattr(scipy.special, "sph_harm_y"):
    # sph_harm(m, n, θ azimuthal, φ polar) == sph_harm_y(n, m, φ polar, θ azimuthal)
    scipy.special.sph_harm = lambda m, n, theta, phi: scipy.special.sph_harm_y(n, m, phi, theta)

try:
    import kymatio.tensorflow as kymatio_tensorflow
except ImportError as exc:
    raise type(exc)("scattering features need kymatio: pip install 'tfdpmech[scatter]' (kymatio==0.3.0); "
                      f"the import failed with: {exc}") from exc

__all__ = ["kymatio_tensorflow"]
