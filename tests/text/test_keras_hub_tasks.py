"""keras-hub's task models as their users call them, made private: raw strings in, a preprocessor attached.

``TextClassifier`` and ``CausalLM`` with their preprocessors fit on raw text (a list, an array, a ``tf.data``
dataset of strings: each string one record) on the ghost-norm path; a causal LM's padding mask weighs its
next-token loss per position; a preset saved locally loads with ``from_preset`` and fine-tunes; ``generate``
works after DP fine-tuning.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

keras_hub = pytest.importorskip("keras_hub", reason="keras-hub is the text extra (pip install 'tfdpmech[text]'); the "
                                                    "tensorflow-privacy stack (TF 2.15, Keras 2) has no keras-hub 0.26")

import keras  # noqa: E402

from tfdpmech import DPSGD, make_private  # noqa: E402

from ._hub_models import bert_task, gpt2_task, texts  # noqa: E402


def _private(model, n, **kw):
    return make_private(model, DPSGD(epsilon=3.0, delta=1e-3, n=n, expected_batch_size=16, epochs=1, seed=0, **kw))


def test_a_causal_lm_with_its_preprocessor_fits_on_raw_strings_and_generates(tmp_path):
    corpus = texts(64)
    model = _private(gpt2_task(), len(corpus))
    model.compile(optimizer=keras.optimizers.Adam(1e-3))  # keras-hub's loss: sparse cross-entropy from logits
    history = model.fit(corpus, verbose=0)
    assert model.dp_sgd.path == "fast_clipping"
    assert model.dp_sgd.steps_taken() == model.dp_sgd.steps and np.isfinite(history.history["loss"]).all()
    assert model.privacy_ledger.releases[0].details["path"] == "fast_clipping"
    out = model.generate("the cat", max_length=10)
    assert isinstance(out, str) and out.startswith("the cat")


def test_a_classifier_with_its_preprocessor_fits_on_lists_arrays_and_datasets_of_strings():
    corpus, labels = texts(48, seed=1), np.arange(48) % 2
    for data in ((corpus, labels), (np.array(corpus), labels),
                 (tf.data.Dataset.from_tensor_slices((corpus, labels)), None)):
        model = _private(bert_task(), len(corpus))
        model.compile(optimizer=keras.optimizers.Adam(1e-3))
        model.fit(*data, verbose=0)
        assert model.dp_sgd.path == "fast_clipping" and model.dp_sgd.steps_taken() == model.dp_sgd.steps
        assert model.predict(corpus[:3], verbose=0).shape == (3, 2)  # the preprocessor still attached


def test_token_ids_given_to_a_task_with_a_preprocessor_are_refused_before_the_release():
    model = _private(bert_task(), 32)
    model.compile(optimizer="adam")
    with pytest.raises(ValueError, match="raw records .strings.*preprocessor = None"):
        model.fit(np.zeros((32, 10), np.int32), np.zeros(32, np.int32), verbose=0)
    assert model.dp_sgd.release is None


def test_a_preset_saved_locally_loads_with_from_preset_and_fine_tunes(tmp_path):
    gpt2_task().save_to_preset(str(tmp_path / "preset"))
    loaded = keras_hub.models.CausalLM.from_preset(str(tmp_path / "preset"))
    corpus = texts(32, seed=2)
    model = _private(loaded, len(corpus))
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    model.fit(corpus, verbose=0)
    assert model.dp_sgd.path == "fast_clipping" and model.dp_sgd.steps_taken() == model.dp_sgd.steps
    assert isinstance(model.generate("a dog", max_length=8), str)


@pytest.mark.parametrize("mistake, message", [
    ("id", r"token_ids\[3\] holds the id 70, outside the vocabulary of BertBackbone \(vocabulary_size=17"),
    ("mask", r"padding_mask has shape \(32, 9\), token_ids \(32, 10\)"),
    ("length", r"sequences of 12 tokens, longer than BertBackbone's max_sequence_length=10"),
])
def test_bad_token_inputs_are_refused_naming_them_before_the_release(mistake, message):
    task = bert_task()
    task.preprocessor = None  # token ids given directly
    model = _private(task, 32)
    model.compile(optimizer="adam")
    rng = np.random.default_rng(0)
    length = 12 if mistake == "length" else 10
    x = {"token_ids": rng.integers(0, 17, (32, length)).astype(np.int32), "segment_ids": np.zeros((32, length), np.int32),
         "padding_mask": np.ones((32, 9 if mistake == "mask" else length), bool)}
    if mistake == "id":
        x["token_ids"][3, 4] = 70
    with pytest.raises(ValueError, match=message):
        model.fit(x, np.zeros(32, np.int32), verbose=0)
    assert model.dp_sgd.release is None and len(model.privacy_ledger) == 0
