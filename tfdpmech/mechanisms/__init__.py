"""One module per paper: the once-only private steps and the recipe around them."""

from .adlm import AdLM, ILM, PrivateData

__all__ = ["AdLM", "ILM", "PrivateData"]
