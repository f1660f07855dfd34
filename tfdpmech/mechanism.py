"""Old path of the mechanism contract, now :mod:`tfdpmech.contract` (beside the per-paper package
:mod:`tfdpmech.mechanisms`); kept for one release. Importing this module warns once
(``DeprecationWarning``)."""

from ._deprecation import warn_moved
from .contract import *  # noqa: F401,F403
from .contract import __all__, reference_mode, refuse_model  # noqa: F401

warn_moved(__name__, "tfdpmech.contract")
