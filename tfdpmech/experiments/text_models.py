"""keras-hub language models for the DP-SGD speed benchmark, built from their classes (random weights, no download).

Sequence 128, hidden 128, two layers, a vocabulary of 8,192, expected batch 32 (the shapes of a small model
fine-tuned on a CPU): a GPT-2 causal LM (its logits through the tied token embedding), full and with LoRA
(rank 4), a Gemma causal LM with LoRA, and a BERT classifier, full and with LoRA; GPT-2 and BERT also at
sequence 512, where a ghost norm's T² terms cost more against a weight's size (the rules choose per layer).
:func:`text_batch` gives a batch as keras-hub's preprocessors do: token ids, a padding mask, and for a causal LM
the next-token labels weighted by the mask (:mod:`tfdpmech.mechanisms.dpsgd.sampling.position_weights`).
"""

from __future__ import annotations

import importlib.util

import numpy as np

__all__ = ["TEXT_MODELS", "text_batch", "keras_hub_available"]

VOCABULARY, SEQUENCE, HIDDEN, LAYERS, HEADS = 8192, 128, 128, 2, 2


def keras_hub_available() -> bool:
    """Whether the text extra (keras-hub) is installed."""
    return importlib.util.find_spec("keras_hub") is not None


def _gpt2(lora: bool, sequence: int = SEQUENCE):
    import keras_hub  # noqa: PLC0415

    backbone = keras_hub.models.GPT2Backbone(vocabulary_size=VOCABULARY, num_layers=LAYERS, num_heads=HEADS,
                                             hidden_dim=HIDDEN, intermediate_dim=4 * HIDDEN, dropout=0.0,
                                             max_sequence_length=sequence)
    if lora:
        backbone.enable_lora(4)
    return keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)


def _gemma(lora: bool, sequence: int = SEQUENCE):  # noqa: ARG001  (rotary positions: no table to size)
    import keras_hub  # noqa: PLC0415

    backbone = keras_hub.models.GemmaBackbone(vocabulary_size=VOCABULARY, num_layers=LAYERS, num_query_heads=HEADS,
                                              num_key_value_heads=1, hidden_dim=HIDDEN, intermediate_dim=4 * HIDDEN,
                                              head_dim=HIDDEN // HEADS, dropout=0.0)
    if lora:
        backbone.enable_lora(4)
    return keras_hub.models.GemmaCausalLM(backbone=backbone, preprocessor=None)


def _bert(lora: bool, sequence: int = SEQUENCE):
    import keras_hub  # noqa: PLC0415

    backbone = keras_hub.models.BertBackbone(vocabulary_size=VOCABULARY, num_layers=LAYERS, num_heads=HEADS,
                                             hidden_dim=HIDDEN, intermediate_dim=4 * HIDDEN, dropout=0.0,
                                             max_sequence_length=sequence)
    if lora:
        backbone.enable_lora(4)
    return keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None, dropout=0.0)


def _builder(fn, lora: bool, name: str, sequence: int):
    def build():
        return fn(lora, sequence)
    build.__name__ = name
    build.sequence = sequence
    return build


# name: (builder, "causal_lm" or "classifier"); builder.sequence: the sequence length
TEXT_MODELS = {name: (_builder(fn, lora, name, sequence), task) for name, fn, lora, sequence, task in (
    ("gpt2_lm", _gpt2, False, SEQUENCE, "causal_lm"), ("gpt2_lm_lora", _gpt2, True, SEQUENCE, "causal_lm"),
    ("gemma_lm_lora", _gemma, True, SEQUENCE, "causal_lm"), ("bert_classifier", _bert, False, SEQUENCE, "classifier"),
    ("bert_classifier_lora", _bert, True, SEQUENCE, "classifier"), ("gpt2_lm_512", _gpt2, False, 512, "causal_lm"),
    ("bert_classifier_512", _bert, False, 512, "classifier"))}


def text_batch(task: str, rows: int, seed: int = 0, sequence: int = SEQUENCE):
    """``(x, y, per-position weights or None)`` of ``rows`` records with lengths drawn in [T/2, T]."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(sequence // 2, sequence + 1, rows)
    mask = np.arange(sequence)[None, :] < lengths[:, None]
    ids = np.where(mask, rng.integers(1, VOCABULARY, (rows, sequence)), 0).astype(np.int32)
    x = {"token_ids": ids, "padding_mask": mask}
    if task == "classifier":
        x["segment_ids"] = np.zeros_like(ids)
        return x, rng.integers(0, 2, rows).astype(np.int32), None
    y = np.concatenate([ids[:, 1:], np.zeros((rows, 1), np.int32)], axis=1)
    weights = np.concatenate([mask[:, 1:], np.zeros((rows, 1), bool)], axis=1).astype(np.float32)
    return x, y, weights
