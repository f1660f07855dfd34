"""A small BERT text classifier over token ids, its WordPiece vocabulary and its trainable parts (needs the
``text`` extra: keras-hub and tensorflow-text).

* :func:`wordpiece_vocabulary`: keras-hub's WordPiece learner on the texts given (the text preset gives it public
  texts only: a vocabulary learnt from private text would reveal its words).
* :func:`token_ids`: texts as ``[CLS] … [SEP]`` token ids padded with 0 to a fixed length; a text that does not fit
  is refused, never cut (``truncate=True`` cuts, for public texts only, and says how many).
* :func:`bert_text_classifier`: keras-hub's ``BertBackbone`` (named ``backbone``) on one input, the token ids (the
  padding mask is ``ids != 0``, one segment), its pooled output through dropout to a ``Dense`` head named
  ``logits``: the shape of keras-hub's ``BertTextClassifier``, fed an array that a comparison's records, test set
  and slicing handle like images.
* :func:`set_text_trainable_part`: what a fine-tuning run trains: ``"head"``, ``"lora"`` (keras-hub's
  ``enable_lora``: rank-4 adapters on each attention's query and value projections, whose biases train too, and
  the head) or ``"all"``.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

__all__ = ["wordpiece_vocabulary", "token_ids", "bert_text_classifier", "set_text_trainable_part", "TEXT_PARTS",
           "RESERVED_TOKENS", "LORA_RANK"]

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # [PAD] is id 0: the padding mask is ids != 0
TEXT_PARTS = ("head", "lora", "all")
LORA_RANK = 4


def _keras_hub():
    try:
        import keras_hub  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError("the text classifier needs keras-hub and tensorflow-text: pip install 'tfdpmech[text]'") \
            from exc
    return keras_hub


def wordpiece_vocabulary(texts, size: int = 8192) -> list:
    """A lower-cased WordPiece vocabulary of at most ``size`` tokens learnt from ``texts`` (keras-hub's
    ``compute_word_piece_vocabulary``), :data:`RESERVED_TOKENS` first. The learner stops early where the texts hold
    fewer distinct pieces."""
    import tensorflow as tf  # noqa: PLC0415

    data = tf.data.Dataset.from_tensor_slices(list(texts)).batch(512)
    return list(_keras_hub().tokenizers.compute_word_piece_vocabulary(
        data, size, lowercase=True, reserved_tokens=list(RESERVED_TOKENS)))


def token_ids(texts, vocabulary, sequence_length: int, *, truncate: bool = False, name: str = "texts"):
    """``(token ids (n, sequence_length) int32, texts cut)``: each text as ``[CLS] pieces [SEP]``, 0-padded.

    Raises:
        ValueError: a text has more than ``sequence_length - 2`` pieces and ``truncate`` is False (the message
            names the first one and the fix).
    """
    tokenizer = _keras_hub().models.BertTokenizer(vocabulary=list(vocabulary), lowercase=True)
    pieces = [np.asarray(p, np.int32) for p in tokenizer(list(texts))]
    room = sequence_length - 2
    too_long = [i for i, p in enumerate(pieces) if len(p) > room]
    if too_long and not truncate:
        i = too_long[0]
        raise ValueError(f"{name}[{i}] has {len(pieces[i])} word pieces, more than sequence_length - 2 = {room} "
                         f"({len(too_long)} texts do not fit); pass a sequence_length of at least "
                         f"{max(len(pieces[j]) for j in too_long) + 2}")
    cls, sep = vocabulary.index("[CLS]"), vocabulary.index("[SEP]")
    ids = np.zeros((len(pieces), sequence_length), np.int32)
    for row, p in zip(ids, pieces):
        p = p[:room]
        row[:len(p) + 2] = [cls, *p, sep]
    return ids, len(too_long)


@keras.saving.register_keras_serializable(package="tfdpmech")
class PaddingMask(keras.layers.Layer):
    """``ids != 0``: the positions that hold a token ([PAD] is id 0)."""

    def call(self, ids):
        return ops.not_equal(ids, 0)

    def compute_output_spec(self, ids):
        return keras.KerasTensor(ids.shape, dtype="bool")


@keras.saving.register_keras_serializable(package="tfdpmech")
class OneSegment(keras.layers.Layer):
    """Segment id 0 at every position (one text per record)."""

    def call(self, ids):
        return ops.zeros_like(ids)


def bert_text_classifier(num_classes: int, input_shape, *, vocabulary_size: int, hidden_dim: int = 128,
                         num_layers: int = 2, num_heads: int = 2, dropout: float = 0.1) -> keras.Model:
    """A small BERT classifier over token ids of shape ``input_shape = (sequence_length,)``; logits out."""
    (sequence_length,) = tuple(input_shape)
    backbone = _keras_hub().models.BertBackbone(
        vocabulary_size=vocabulary_size, num_layers=num_layers, num_heads=num_heads, hidden_dim=hidden_dim,
        intermediate_dim=4 * hidden_dim, dropout=dropout, max_sequence_length=sequence_length, name="backbone")
    ids = keras.Input((sequence_length,), dtype="int32", name="token_ids")
    outputs = backbone({"token_ids": ids, "padding_mask": PaddingMask(name="padding_mask")(ids),
                        "segment_ids": OneSegment(name="segment_ids")(ids)})
    pooled = keras.layers.Dropout(dropout, name="head_dropout")(outputs["pooled_output"])
    logits = keras.layers.Dense(num_classes, name="logits")(pooled)
    return keras.Model(ids, logits, name=f"bert_{num_layers}x{hidden_dim}")


def set_text_trainable_part(model: keras.Model, part: str) -> keras.Model:
    """Make ``part`` of a :func:`bert_text_classifier` trainable and freeze the rest (in place; returns it).

    ``"head"``: the ``logits`` layer only; ``"lora"``: rank-:data:`LORA_RANK` LoRA adapters on the backbone
    (its own weights frozen) and the head; ``"all"``: every weight.
    """
    if part not in TEXT_PARTS:
        raise ValueError(f"part={part!r}; choose one of {TEXT_PARTS} (what a fine-tuning run trains)")
    backbone = model.get_layer("backbone")
    backbone.trainable = part != "head"
    if part == "lora":
        backbone.enable_lora(LORA_RANK)
    return model
