"""Old path of :mod:`tfdpmech.mechanisms.adlm.taylor_cross_entropy`, kept for one release: import from the new path.

Importing this module warns once (``DeprecationWarning``); its names are the new module's.
"""

from .._deprecation import warn_moved
from ..mechanisms.adlm.taylor_cross_entropy import *  # noqa: F401,F403
from ..mechanisms.adlm.taylor_cross_entropy import __all__ as _all_0

__all__ = list(_all_0)

warn_moved(__name__, "tfdpmech.mechanisms.adlm.taylor_cross_entropy")
