"""The inputs of a keras-hub text model, checked before anything is released.

A keras-hub backbone takes ``{"token_ids": (n, T), "padding_mask": (n, T), ...}``. Three mistakes would
otherwise surface inside the first DP step, after the run's release is recorded: a token id outside the
vocabulary (an opaque "Graph execution error" from the lookup), a mask or segment ids whose shape is not
the ids', a sequence longer than the backbone's position table. :func:`check_text_inputs` finds each in the
records, naming the argument, the first offending record and the fix.
"""

from __future__ import annotations

import numpy as np

__all__ = ["text_backbone", "check_text_inputs"]


def text_backbone(model):
    """The keras-hub backbone ``model`` is or holds (``model.backbone``), when it has a vocabulary; else None."""
    for candidate in (model, getattr(model, "backbone", None)):
        if candidate is not None and isinstance(getattr(candidate, "vocabulary_size", None), int):
            return candidate
    return None


def check_text_inputs(model, x) -> None:
    """Check the token ids, masks and lengths of ``x`` (a dict of arrays) against ``model``'s keras-hub backbone.

    Raises:
        ValueError: a token id outside ``[0, vocabulary_size)``, a ``padding_mask`` or ``segment_ids`` of another
            shape than ``token_ids``, or sequences longer than the backbone's ``max_sequence_length``.
    """
    backbone = text_backbone(model)
    if backbone is None or not isinstance(x, dict) or "token_ids" not in x:
        return
    ids = np.asarray(x["token_ids"])
    vocabulary = int(backbone.vocabulary_size)
    if ids.dtype.kind in "iu" and ids.size:
        bad = np.argwhere((ids < 0) | (ids >= vocabulary))
        if bad.size:
            record = int(bad[0][0])
            raise ValueError(
                f"token_ids[{record}] holds the id {int(ids[tuple(bad[0])])}, outside the vocabulary of "
                f"{type(backbone).__name__} (vocabulary_size={vocabulary}: ids 0 to {vocabulary - 1}); "
                f"{len(np.unique(bad[:, 0]))} record(s) do. Tokenize with the backbone's own tokenizer, or build "
                "the backbone with a vocabulary that holds every id")
    for name in ("padding_mask", "segment_ids"):
        if name in x and np.shape(x[name]) != ids.shape:
            raise ValueError(f"{name} has shape {np.shape(x[name])}, token_ids {ids.shape}: give one value per token "
                             f"(the preprocessor's {name} for the same texts)")
    longest = getattr(backbone, "max_sequence_length", None)
    if isinstance(longest, int) and ids.ndim >= 2 and ids.shape[-1] > longest:
        raise ValueError(f"token_ids has sequences of {ids.shape[-1]} tokens, longer than {type(backbone).__name__}'s "
                         f"max_sequence_length={longest} (its position table); pack the texts to at most {longest} "
                         "tokens (the preprocessor's sequence_length)")
