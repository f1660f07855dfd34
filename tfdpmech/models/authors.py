"""Old path of :mod:`tfdpmech.mechanisms.adlm.networks` (AdLM) and :mod:`tfdpmech.mechanisms.pcdbn.networks`
(pCDBN), kept for one release: import from the new paths.

Importing this module warns once (``DeprecationWarning``); its names are the new module's.
"""

from .._deprecation import warn_moved
from ..mechanisms.adlm.networks import *  # noqa: F401,F403
from ..mechanisms.adlm.networks import __all__ as _all_0
from ..mechanisms.pcdbn.networks import *  # noqa: F401,F403
from ..mechanisms.pcdbn.networks import __all__ as _all_1

__all__ = list(_all_0) + list(_all_1)

warn_moved(__name__, "tfdpmech.mechanisms.adlm.networks and tfdpmech.mechanisms.pcdbn.networks")
