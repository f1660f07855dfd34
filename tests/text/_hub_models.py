"""Small keras-hub text models built from their classes (random weights, no download): the catalogue's models.

Each builder returns ``(model, inputs, labels, position_weights or None)`` for a batch of ``rows`` records: a
classifier (labels: a class per record) or a causal LM (labels: the next token at every position, weighted by
the padding mask, as keras-hub's ``CausalLMPreprocessor`` yields them).
"""

from __future__ import annotations

import keras
import keras_hub
import numpy as np

VOCAB, SEQ, HIDDEN, HEADS, INTERMEDIATE, LAYERS = 64, 8, 16, 2, 32, 2


def _encoder(name):
    common = dict(num_layers=LAYERS, num_heads=HEADS, hidden_dim=HIDDEN, intermediate_dim=INTERMEDIATE, dropout=0.0,
                  max_sequence_length=SEQ)
    m = keras_hub.models
    if name == "albert":  # one group: the same encoder layer at both depths
        return m.AlbertBackbone(vocabulary_size=VOCAB, embedding_dim=8, num_groups=1, num_inner_repetitions=1,
                                **common)
    if name == "electra":
        return m.ElectraBackbone(vocab_size=VOCAB, embedding_dim=HIDDEN, **common)
    if name == "deberta_v3":
        return m.DebertaV3Backbone(vocabulary_size=VOCAB, bucket_size=4, **common)
    cls = {"bert": m.BertBackbone, "distil_bert": m.DistilBertBackbone, "roberta": m.RobertaBackbone}[name]
    return cls(vocabulary_size=VOCAB, **common)


def _decoder(name):
    m = keras_hub.models
    heads = dict(num_query_heads=HEADS, num_key_value_heads=1)
    common = dict(vocabulary_size=VOCAB, num_layers=LAYERS, hidden_dim=HIDDEN, intermediate_dim=INTERMEDIATE,
                  dropout=0.0)
    if name == "gpt2":
        return m.GPT2Backbone(num_heads=HEADS, max_sequence_length=SEQ, **common)
    if name == "opt":
        return m.OPTBackbone(num_heads=HEADS, max_sequence_length=SEQ, **common)
    if name == "gemma":
        return m.GemmaBackbone(head_dim=HIDDEN // HEADS, **heads, **common)
    if name == "gemma3":
        return m.Gemma3Backbone(head_dim=HIDDEN // HEADS, image_size=None, vision_encoder=None, **heads, **common)
    if name == "llama":
        return m.LlamaBackbone(**heads, **common)
    if name == "mistral":
        return m.MistralBackbone(**heads, **common)
    if name == "phi3":
        return m.Phi3Backbone(max_sequence_length=SEQ, **heads, **common)
    if name == "qwen":
        return m.QwenBackbone(**heads, **common)
    raise KeyError(name)


ENCODERS = ("bert", "distil_bert", "roberta", "albert", "deberta_v3", "electra")
DECODERS = ("gpt2", "opt", "gemma", "gemma3", "llama", "mistral", "phi3", "qwen")
_CLASSIFIERS = {"bert": "BertTextClassifier", "distil_bert": "DistilBertTextClassifier",
                "roberta": "RobertaTextClassifier", "albert": "AlbertTextClassifier",
                "deberta_v3": "DebertaV3TextClassifier"}
_CAUSAL_LMS = {"gpt2": "GPT2CausalLM", "opt": "OPTCausalLM", "gemma": "GemmaCausalLM", "gemma3": "Gemma3CausalLM",
               "llama": "LlamaCausalLM", "mistral": "MistralCausalLM", "phi3": "Phi3CausalLM", "qwen": "QwenCausalLM"}


def _inputs(backbone, rows, rng):
    lengths = rng.integers(2, SEQ + 1, rows)
    mask = np.arange(SEQ)[None, :] < lengths[:, None]
    ids = np.where(mask, rng.integers(1, VOCAB, (rows, SEQ)), 0).astype(np.int32)
    names = [i.name for i in backbone.inputs] if isinstance(backbone.input, dict) is False else list(backbone.input)
    x = {"token_ids": ids, "padding_mask": mask}
    if "segment_ids" in names:
        x["segment_ids"] = np.zeros((rows, SEQ), np.int32)
    return x, mask


def build(name, kind, lora=False, rows=4, seed=0):
    """``(model, x, y, position weights or None)`` (see the module docstring)."""
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    if kind == "classifier":
        backbone = _encoder(name)
        if name in _CLASSIFIERS:
            model = getattr(keras_hub.models, _CLASSIFIERS[name])(backbone, num_classes=3, preprocessor=None,
                                                                 dropout=0.0)
        else:  # a backbone without a task class of its own: a head on its pooled output
            model = keras.Model(backbone.input, keras.layers.Dense(3)(backbone.output["pooled_output"]))
        x, _ = _inputs(backbone, rows, rng)
        y, weights = rng.integers(0, 3, rows).astype(np.int32), None
    else:
        backbone = _decoder(name)
        model = getattr(keras_hub.models, _CAUSAL_LMS[name])(backbone=backbone, preprocessor=None)
        x, mask = _inputs(backbone, rows, rng)
        y = np.concatenate([x["token_ids"][:, 1:], np.zeros((rows, 1), np.int32)], axis=1)
        weights = np.concatenate([mask[:, 1:], np.zeros((rows, 1), bool)], axis=1).astype(np.float32)
    if lora:
        backbone.enable_lora(2)
    return model, x, y, weights


# ---------------------------------------------------------------------------------------------------------------
# Task models with their preprocessors attached (tokenizers built from small vocabularies, no download)
# ---------------------------------------------------------------------------------------------------------------
WORDS = ("the", "a", "cat", "dog", "sat", "ran", "good", "bad", "film", "plot", "was", "not")


def texts(rows: int, seed: int = 0) -> list[str]:
    """``rows`` short sentences of :data:`WORDS`."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, rng.integers(2, 6))) for _ in range(rows)]


def gpt2_task(sequence_length: int = 12):
    """A GPT-2 causal LM with its preprocessor: a byte-level BPE vocabulary (every byte, one merge)."""
    from keras_hub.src.tokenizers.byte_pair_tokenizer import bytes_to_unicode  # noqa: PLC0415

    keras.utils.set_random_seed(0)
    chars = sorted(set(bytes_to_unicode()[1]))
    vocabulary = {"<|endoftext|>": 0, **{c: i + 1 for i, c in enumerate(chars)}, "th": len(chars) + 1}
    tokenizer = keras_hub.models.GPT2Tokenizer(vocabulary=vocabulary, merges=["t h"])
    preprocessor = keras_hub.models.GPT2CausalLMPreprocessor(tokenizer, sequence_length=sequence_length)
    backbone = keras_hub.models.GPT2Backbone(vocabulary_size=len(vocabulary), num_layers=1, num_heads=2, hidden_dim=16,
                                             intermediate_dim=32, dropout=0.0, max_sequence_length=sequence_length)
    return keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=preprocessor)


def bert_task(sequence_length: int = 10):
    """A BERT classifier (2 classes) with its preprocessor: a WordPiece vocabulary of :data:`WORDS`."""
    keras.utils.set_random_seed(0)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS])
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=sequence_length)
    backbone = keras_hub.models.BertBackbone(vocabulary_size=tokenizer.vocabulary_size(), num_layers=1, num_heads=2,
                                             hidden_dim=16, intermediate_dim=32, dropout=0.0,
                                             max_sequence_length=sequence_length)
    return keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=preprocessor, dropout=0.0)
