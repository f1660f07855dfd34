"""keras-hub's text models on the ghost-norm path: every backbone, as a classifier or a causal LM, full and with LoRA.

Each model is built small from its classes (random weights, no download; :mod:`._hub_models`) and its ghost-norm
clipped sum is checked against each record's own gradient (one gradient tape per record), with a causal LM's
next-token loss weighted by the padding mask as keras-hub's preprocessor weighs it. Tied input and output
embeddings (GPT-2, OPT, Gemma, Gemma3), one encoder layer shared across depth (ALBERT) and DeBERTa's relative
positions (its projections also applied to a table shared by every record) are on the ghost-norm path, exact.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip("keras_hub", reason="keras-hub is the text extra (pip install 'tfdpmech[text]'); the "
                                        "tensorflow-privacy stack (TF 2.15, Keras 2) has no keras-hub 0.26")

import keras  # noqa: E402

from tfdpmech.mechanisms.dpsgd.clipping import gradients, per_example_loss, resolve_clipping  # noqa: E402
from tfdpmech.mechanisms.dpsgd.clipping.ghost_norms import ghost_clipped_sum, layer_paths  # noqa: E402
from tfdpmech.mechanisms.dpsgd.sampling.position_weights import (position_weighted_loss,  # noqa: E402
                                                                   with_position_weights)

from ._hub_models import DECODERS, ENCODERS, build  # noqa: E402

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
TIED = ("gpt2", "opt", "gemma", "gemma3")  # their causal LM's logits go through the token embedding's table


def _per_record(model, loss_fn, x, y):
    rows, out = len(x["token_ids"]), []
    for i in range(rows):
        xi, yi = {k: v[i:i + 1] for k, v in x.items()}, tf.nest.map_structure(lambda t: t[i:i + 1], y)
        with tf.GradientTape() as tape:
            value = tf.reduce_sum(loss_fn(yi, model(xi, training=False)))
        out.append([g.numpy().astype(np.float64) for g in gradients(tape, value, model.trainable_variables)])
    return out


def _check(model, x, y, weights, lora):
    assert resolve_clipping(model, "fast_clipping") == "fast_clipping"
    # handled alone (each record's gradient of that layer, recomputed record by record): keras-hub's own RMS norms
    # only; every other layer on its registered rule, the LoRA-adapted projections on the LoRA rule
    paths = layer_paths(model)
    assert not {name for name, family in paths.items() if family == "alone" and "norm" not in name}, paths
    if lora:
        assert (paths["query"], paths["value"]) == ("lora", "lora"), paths
    loss_fn = position_weighted_loss(per_example_loss(LOSS))
    labels = y if weights is None else with_position_weights(y, weights)
    records = _per_record(model, loss_fn, x, labels)
    norms = np.array([np.sqrt(sum(float(np.sum(g * g)) for g in r)) for r in records])
    clip = float(np.median(norms))
    want = [sum(r[j] * min(1.0, clip / n) for r, n in zip(records, norms)) for j in range(len(records[0]))]
    got, _, got_norms = ghost_clipped_sum(model, loss_fn, x, labels, tf.ones((len(norms),)), clip, False)
    np.testing.assert_allclose(got_norms.numpy(), norms, rtol=1e-4)
    floor = 1e-6 * max(float(np.abs(w).max()) for w in want)  # a gradient that is 0 but for rounding (a key's bias)
    for g, w, v in zip(got, want, model.trainable_variables):
        assert np.abs(g.numpy() - w).max() <= 1e-4 * float(np.abs(w).max()) + floor, v.path


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize("name", ENCODERS)
def test_a_keras_hub_classifier_clips_exactly_on_the_ghost_norm_path(name, lora):
    model, x, y, weights = build(name, "classifier", lora)
    _check(model, x, y, weights, lora)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize("name", DECODERS)
def test_a_keras_hub_causal_lm_clips_exactly_on_the_ghost_norm_path(name, lora):
    model, x, y, weights = build(name, "causal_lm", lora)
    _check(model, x, y, weights, lora)
    if name in TIED and not lora:  # the table's two uses on the rule with their cross term, not handled alone
        assert layer_paths(model)["token_embedding"] == "reversible_embedding"
