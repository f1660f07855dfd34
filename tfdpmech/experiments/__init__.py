"""The method registry, the one runner and its presets (``tfdpmech compare``): every method × dataset × ε × seed
measured the same way, with the audits (:mod:`.audits`) and measurements (:mod:`.measuring`) it asks for."""

from .context import Context, build_context
from .presets import PRESETS, preset_config, register_preset
from .registry import METHODS, Build, Method, Prepared, register_mechanism, register_method
from .runner import AUDITS, CompareConfig, register_audit, run_comparison

__all__ = ["Context", "build_context", "PRESETS", "preset_config", "register_preset", "METHODS", "Method",
           "Prepared", "Build", "register_method", "register_mechanism", "AUDITS", "CompareConfig", "register_audit", "run_comparison"]
