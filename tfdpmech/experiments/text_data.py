"""The records of a text comparison: sentiment snippets as token ids, the vocabulary learnt from public text only.

``--dataset sentiment_snippets`` (:func:`tfdpmech.data_text.load_sentiment_snippets`): the private movie snippets
(train and test; ``sentiment_snippets_validation``: 7,454 of the training ones train, 1,000 score) and, as public data (``--public other_domains``, the only public source of the text data), the
tweets, product-review and news snippets. A lower-cased WordPiece vocabulary (at most 8,192 pieces) is learnt from
the public texts alone; every text is ``[CLS] pieces [SEP]`` padded to :data:`SEQUENCE_LENGTH` = 100 positions,
which every private and test text fits (the longest has 95 pieces): none is cut. Public texts longer than that are
cut (their number is in the public source's description). ``options["max_public"]`` keeps the first public texts
only and ``options["sequence_length"]`` sets the positions (the quick run's: a vocabulary learnt from fewer texts
cuts words into more pieces).

The public model's recipe (``PUBLIC_RECIPES["text"]`` of :mod:`.context`: Adam 1e-3, batch 32, 3 epochs) is
stated in advance, not tuned: a step and batch usual for training a small BERT classifier, few epochs because the
public texts are few.
"""

from __future__ import annotations

import numpy as np

from .. import data_text

__all__ = ["text_context", "TEXT_PUBLIC_SOURCE", "SEQUENCE_LENGTH", "VOCABULARY_SIZE"]

TEXT_PUBLIC_SOURCE = "other_domains"
SEQUENCE_LENGTH = 100
VOCABULARY_SIZE = 8192


def _one_hot(labels, num_classes) -> np.ndarray:
    return np.eye(num_classes, dtype=np.float32)[np.asarray(labels, dtype=np.int64)]


def text_context(config, name: str) -> dict:
    """The :class:`~.context.Context` fields of text dataset ``name`` (token ids, one-hot labels, the vocabulary
    size the model family needs)."""
    from ..models.text_classifier import token_ids, wordpiece_vocabulary  # the text extra, only for text data

    if config.public != TEXT_PUBLIC_SOURCE:
        raise ValueError(f"public={config.public!r} for the text data set {name!r}: its public data are the other "
                         f"domains' snippets; pass --public {TEXT_PUBLIC_SOURCE}")
    splits = data_text.load_sentiment_snippets(validation=name.endswith("_validation"))
    cap = (config.options or {}).get("max_public")
    public_texts = splits.public_texts[:cap] if cap else splits.public_texts
    public_labels = splits.public_labels[:len(public_texts)]
    vocabulary = wordpiece_vocabulary(public_texts, VOCABULARY_SIZE)
    length = (config.options or {}).get("sequence_length", SEQUENCE_LENGTH)
    x_public, cut = token_ids(public_texts, vocabulary, length, truncate=True, name="public texts")
    try:
        x_private, _ = token_ids(splits.train_texts, vocabulary, length, name="private training texts")
        x_test, _ = token_ids(splits.test_texts, vocabulary, length, name="test texts")
    except ValueError as exc:
        raise ValueError(f"{exc} (the comparison's options['sequence_length'], default {SEQUENCE_LENGTH})") from exc
    k = splits.num_classes
    public_source = (splits.public_source + ("" if cap is None else f", the first {len(public_texts)} kept")
                     + f"; {cut} cut to {length} positions; the vocabulary ({len(vocabulary)} WordPiece "
                     "pieces) learnt from them alone")
    return {"x_private": x_private, "y_private": _one_hot(splits.train_labels, k), "x_public": x_public,
            "y_public": _one_hot(public_labels, k), "x_test": x_test, "y_test": _one_hot(splits.test_labels, k),
            "num_classes": k, "public_source": public_source,
            "note": splits.source + f"; token ids of {length} positions, none cut",
            "model_kwargs": {"vocabulary_size": len(vocabulary)}}
