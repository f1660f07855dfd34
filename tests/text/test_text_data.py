"""The text preset's data and model: the sentiment snippets as published, a vocabulary from public text only,
token ids that never cut a private text, and the three trainable parts of the small BERT classifier."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from tfdpmech import data_text

keras_hub = pytest.importorskip("keras_hub", reason="keras-hub is the text extra (pip install 'tfdpmech[text]'); the "
                                                    "tensorflow-privacy stack (TF 2.15, Keras 2) has no keras-hub 0.26")

import keras  # noqa: E402

from tfdpmech.models import text_classifier  # noqa: E402
from tfdpmech.models.text_classifier import (  # noqa: E402
    RESERVED_TOKENS, bert_text_classifier, set_text_trainable_part, token_ids)


@pytest.fixture(scope="module")
def snippets():
    try:
        return data_text.load_sentiment_snippets()
    except ValueError as exc:
        pytest.skip(f"the sentiment snippets are not here ({exc}); set $TFDPMECH_DATA_DIR (.ci/run does)")


def test_the_snippets_load_as_published_with_the_neutral_ones_left_out(snippets):
    # the dataset README's counts: movie 5,242 positive / 5,326 negative / 37 neutral; the other three domains
    # 7,229 positive / 5,523 negative / 346 neutral
    assert len(snippets.train_texts) + len(snippets.test_texts) == 10_568
    assert len(snippets.test_texts) == data_text.TEST_SIZE == 2114
    assert int(snippets.train_labels.sum() + snippets.test_labels.sum()) == 5242
    assert len(snippets.public_texts) == 12_752 and int(snippets.public_labels.sum()) == 7229
    # two movie snippets occur twice in the source (one such pair lands on both sides of the split); no public
    # snippet is a movie snippet
    assert len(set(snippets.train_texts) & set(snippets.test_texts)) == 1
    assert not set(snippets.public_texts) & (set(snippets.train_texts) | set(snippets.test_texts))
    # stratified: each class has its share of the test set
    assert abs(snippets.test_labels.mean() - 5242 / 10_568) < 1e-3
    assert "37 rated 0 left out" in snippets.source and "346 rated 0 left out" in snippets.public_source



def test_the_validation_split_holds_out_training_snippets_and_never_reads_the_test_set(snippets):
    validation = data_text.load_sentiment_snippets(validation=True)
    assert len(validation.train_texts) == 8454 - data_text.VALIDATION_SIZE and len(validation.test_texts) == 1000
    # the held-out snippets are training snippets, the two parts together exactly the training set
    assert sorted(validation.train_texts + validation.test_texts) == sorted(snippets.train_texts)
    assert not set(validation.test_texts) & (set(snippets.test_texts) - set(snippets.train_texts))
    # stratified: each class keeps its share of the training set (within one snippet)
    share = snippets.train_labels.mean()
    assert abs(validation.test_labels.mean() - share) <= 1 / 1000
    assert "split again 7454/1000 with seed 1" in validation.source

def test_a_file_that_is_not_the_published_one_is_refused(tmp_path, snippets, monkeypatch):
    folder = tmp_path / "sentiment_snippets"
    folder.mkdir()
    source = data_text._folder(None)
    for name in data_text.SNIPPET_FILES:
        raw = gzip.decompress((source / f"{name}_GroundTruth.txt.gz").read_bytes())
        if name == "tweets":
            raw = raw.replace(b"\t", b"\t-", 1)  # one rating's sign flipped
        (folder / f"{name}_GroundTruth.txt.gz").write_bytes(gzip.compress(raw))
    with pytest.raises(ValueError, match="tweets_GroundTruth.txt.gz decompresses to md5 .* not 1225f43e"):
        data_text.load_sentiment_snippets(tmp_path)
    monkeypatch.delenv("TFDPMECH_DATA_DIR", raising=False)
    with pytest.raises(ValueError, match=r"not found \(no data_dir and no \$TFDPMECH_DATA_DIR\).*vaderSentiment"):
        data_text.load_sentiment_snippets()


def _vocabulary():
    return [*RESERVED_TOKENS, "a", "good", "bad", "film", "##s", "the"]


def test_token_ids_frame_each_text_and_refuse_one_that_does_not_fit():
    vocab = _vocabulary()
    ids, cut = token_ids(["a good film", "the films"], vocab, 8)
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    assert cut == 0
    assert ids.tolist() == [[cls, 5, 6, 8, sep, 0, 0, 0], [cls, 10, 8, 9, sep, 0, 0, 0]]
    with pytest.raises(ValueError, match=r"texts\[1\] has 5 word pieces, more than sequence_length - 2 = 4 \(1 "
                                         r"texts do not fit\); pass a sequence_length of at least 7"):
        token_ids(["a film", "a good bad good film"], vocab, 6)
    ids, cut = token_ids(["a film", "a good bad good film"], vocab, 6, truncate=True)
    assert cut == 1 and ids[1].tolist() == [cls, 5, 6, 7, 6, sep]


def test_the_comparison_learns_its_vocabulary_from_public_texts_only(snippets, monkeypatch):
    from tfdpmech.experiments import preset_config
    from tfdpmech.experiments.text_data import text_context

    seen = []

    def recording(texts, size):
        seen.extend(texts)
        return _vocabulary()

    monkeypatch.setattr(text_classifier, "wordpiece_vocabulary", recording)
    config = preset_config("text", quick=True, options={"max_public": 300, "sequence_length": 128})
    fields = text_context(config, "sentiment_snippets")
    assert seen == snippets.public_texts[:300]
    assert not set(seen) & (set(snippets.train_texts) | set(snippets.test_texts))
    assert fields["x_private"].shape == (len(snippets.train_texts), 128)
    assert fields["model_kwargs"] == {"vocabulary_size": len(_vocabulary())}
    with pytest.raises(ValueError, match="options\\['sequence_length'\\], default 100"):
        text_context(preset_config("text", quick=True, options={"sequence_length": 8}), "sentiment_snippets")
    with pytest.raises(ValueError, match="pass --public other_domains"):
        text_context(preset_config("text", quick=True, public=1000), "sentiment_snippets")


def test_the_trainable_parts_of_the_text_classifier():
    def model():
        return bert_text_classifier(2, (12,), vocabulary_size=40, hidden_dim=16, num_layers=1, num_heads=2)

    full = model()
    assert full.output_shape == (None, 2)
    head = set_text_trainable_part(model(), "head")
    assert [v.path for v in head.trainable_variables] == ["logits/kernel", "logits/bias"]
    lora = set_text_trainable_part(model(), "lora")
    names = [v.path for v in lora.trainable_variables]
    assert {"logits/kernel", "logits/bias"} <= set(names)
    # keras-hub's enable_lora: adapters on the attention's query and value projections, whose biases train too
    assert all("lora_kernel" in n or n.endswith(("query/bias", "value/bias")) for n in names
               if not n.startswith("logits"))
    assert len(names) > 2 and len(lora.trainable_variables) < len(full.trainable_variables)
    assert len(set_text_trainable_part(model(), "all").trainable_variables) == len(full.trainable_variables)
    with pytest.raises(ValueError, match="part='top'; choose one of \\('head', 'lora', 'all'\\)"):
        set_text_trainable_part(model(), "top")


def test_padding_never_changes_a_texts_logits():
    model = bert_text_classifier(2, (10,), vocabulary_size=40, hidden_dim=16, num_layers=1, num_heads=2, dropout=0.0)
    short = np.array([[2, 7, 9, 3, 0, 0, 0, 0, 0, 0]], np.int32)
    logits = np.asarray(model(short))
    # the same text in a longer frame: a second model with the same weights over 14 positions
    longer = bert_text_classifier(2, (14,), vocabulary_size=40, hidden_dim=16, num_layers=1, num_heads=2,
                                  dropout=0.0)
    weights = model.get_weights()
    longer.set_weights([np.concatenate([w, np.zeros((4, w.shape[1]), w.dtype)]) if w.shape == (10, 16) else w
                        for w in weights])
    padded = np.concatenate([short, np.zeros((1, 4), np.int32)], axis=1)
    np.testing.assert_allclose(np.asarray(longer(padded)), logits, rtol=1e-5, atol=1e-6)
    assert keras.saving.get_registered_object("tfdpmech>PaddingMask") is text_classifier.PaddingMask
