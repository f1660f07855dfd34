"""Re-exports resolved on first access (PEP 562), for packages that offer names defined elsewhere.

``tfdpmech.layers`` offers the papers' layers (``tfdpmech.layers.ConvRBM`` is defined in
:mod:`tfdpmech.mechanisms.pcdbn.conv_rbm`), and each paper's modules use the generic layers. With
eager re-exports, importing either package first would need the other one half-initialised; resolved
on first access, a generic package never imports a mechanism while it initialises, so no import
order can fail. ``import tfdpmech`` still imports every name (and so registers every Keras class).
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, names: dict[str, str], submodules: tuple[str, ...] = ()):
    """``(__getattr__, __dir__)`` for ``package``.

    Args:
        package: the package's ``__name__``.
        names: public name → the module that defines it (imported on first access, then cached
            on the package).
        submodules: submodules of ``package`` that ``package.<name>`` imports on access (the
            mechanisms' subpackages).
    """

    def __getattr__(name: str):
        if name in names:
            value = getattr(importlib.import_module(names[name]), name)
        elif name in submodules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
