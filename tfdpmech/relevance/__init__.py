"""Old path of :mod:`tfdpmech.mechanisms.adlm`, kept for one release: import from the new path.

Importing this module warns once (``DeprecationWarning``); its names are the new module's.
"""

from .._deprecation import warn_moved
from ..mechanisms.adlm.lrp import *  # noqa: F401,F403
from ..mechanisms.adlm.lrp import __all__ as _all_0
from ..mechanisms.adlm.private_relevance import *  # noqa: F401,F403
from ..mechanisms.adlm.private_relevance import __all__ as _all_1

__all__ = list(_all_0) + list(_all_1)

warn_moved(__name__, "tfdpmech.mechanisms.adlm")
