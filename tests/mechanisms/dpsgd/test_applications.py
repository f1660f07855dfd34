"""Every ``keras.applications`` family under DP-SGD: BatchNorm replaced, the ghost-norm path, exact, one DP step.

Each network is built as a user fine-tuning it would (``weights=None`` here: no download), at a small input,
10 classes, its BatchNormalization replaced by :func:`tfdpmech.replace_batch_norm`. Then

* the compile-time probe takes the ghost-norm path (every trainable unit with a rule; no unit demoted to the
  per-record path for rounding);
* the clipped gradient sum of three records and one padding row equals one gradient tape per record, every
  record run in the same batch (so both sides see the same forward pass: a separate batch of one rounds
  differently, and a deep network's ReLU kinks turn that into a 0.1 % difference that is no error of the
  engine), to 1e-5 of the sum of the clipped records' norms, per weight;
* one DP step trains (eagerly: tracing a 150-layer train step is the first fit's cost, not the engine's).

MobileNetV3Small runs in the default suite; the other families are marked slow and ``applications`` (``make
test-slow`` runs them, about ten minutes on two cores; ``.ci/run`` leaves them out to keep within its time).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfdpmech
from tfdpmech.mechanisms.dpsgd.clipping import clipped_gradient_sum, gradients, per_example_loss, resolve_clipping
from tfdpmech.mechanisms.dpsgd.clipping.ghost_norms import layer_paths
from tfdpmech.mechanisms.dpsgd.runs.train_step import KERAS_3

LOSS = keras.losses.CategoricalCrossentropy(from_logits=True)
CLASSES = 10
ROWS = 4  # three records and one padding row

# name -> (constructor keyword arguments beyond weights / classes, input side)
FAMILIES = {
    "MobileNetV3Small": ({"alpha": 0.75}, 32),
    "MobileNet": ({"alpha": 0.25}, 32),
    "MobileNetV2": ({"alpha": 0.35}, 32),
    "MobileNetV3Large": ({"alpha": 0.75}, 32),
    "EfficientNetB0": ({}, 32),
    "EfficientNetV2B0": ({}, 32),
    "ResNet50": ({}, 32),
    "ResNet50V2": ({}, 32),
    "DenseNet121": ({}, 32),
    "ConvNeXtTiny": ({}, 32),
    "VGG16": ({}, 32),
    "Xception": ({}, 71),  # its smallest input
}
FAST = ("MobileNetV3Small",)


def build(name: str, seed: int = 0) -> keras.Model:
    """The family's network (``weights=None``, 10 logits), its BatchNormalization replaced."""
    keras.utils.set_random_seed(seed)
    options, side = FAMILIES[name]
    kwargs = dict(weights=None, input_shape=(side, side, 3), classes=CLASSES, **options)
    if KERAS_3 or name != "VGG16":
        kwargs["classifier_activation"] = None
    model = getattr(keras.applications, name)(**kwargs)
    return tfdpmech.replace_batch_norm(model, verbose=False)


def _batch(model, seed=0):
    rng = np.random.default_rng(seed)
    side = int(model.inputs[0].shape[1])
    x = rng.random((ROWS, side, side, 3)).astype(np.float32)
    y = keras.utils.to_categorical(rng.integers(0, CLASSES, ROWS), CLASSES).astype(np.float32)
    return x, y


def _per_record_gradients(model, x, y):
    """One gradient tape per record, each over the whole batch's forward pass (see the module docstring)."""
    fn, out = per_example_loss(LOSS), []
    for i in range(ROWS - 1):
        with tf.GradientTape() as tape:
            loss = fn(y, model(x, training=False))[i]
        out.append([g.numpy().astype(np.float64) for g in gradients(tape, loss, model.trainable_variables)])
    return out


def _params(names):
    return [pytest.param(name, marks=() if name in FAST else (pytest.mark.slow, pytest.mark.applications))
            for name in names]


@pytest.mark.skipif(not KERAS_3, reason="keras.applications under Keras 2.15 build their own BatchNormalization "
                                        "variants; the catalogue is checked on Keras 3 (the default stack)")
@pytest.mark.parametrize("name", _params(FAMILIES))
def test_every_application_family_is_on_the_ghost_path_exact_and_takes_a_dp_step(name):
    model = build(name)
    assert resolve_clipping(model, "auto") == "fast_clipping"
    paths = layer_paths(model)
    assert None not in paths.values()
    x, y = _batch(model)
    per_record = _per_record_gradients(model, x, y)
    norms = np.array([np.sqrt(sum(float(np.sum(g * g)) for g in grads)) for grads in per_record])
    clip = float(np.median(norms))  # some records clipped, some not
    factors = np.minimum(1.0, clip / norms)
    weights = np.array([1.0] * (ROWS - 1) + [0.0], np.float32)
    got, _, got_norms = clipped_gradient_sum(model, per_example_loss(LOSS), x, y, weights, clip, "fast_clipping",
                                             training=False)
    np.testing.assert_allclose(got_norms.numpy()[:-1], norms, rtol=1e-5)
    scale = float(np.sum(factors * norms))
    for k, (v, g) in enumerate(zip(model.trainable_variables, got)):
        want = sum(f * grads[k] for f, grads in zip(factors, per_record))
        assert np.linalg.norm(g.numpy() - want) <= 1e-5 * scale, v.name

    before = [v.numpy().copy() for v in model.trainable_variables]
    dp = tfdpmech.DPSGD(epsilon=2.0, delta=1e-5, n=8, expected_batch_size=4, epochs=1, l2_norm_clip=1.0)
    private = tfdpmech.make_private(model, dp)
    private.compile(optimizer=keras.optimizers.SGD(0.01), loss=LOSS)
    private.run_eagerly = True
    x8, y8 = (np.concatenate([a, a]) for a in _batch(model, seed=1))
    private.fit(x8, y8, verbose=0)
    assert dp.path == "fast_clipping"
    assert any(not np.array_equal(b, v.numpy()) for b, v in zip(before, model.trainable_variables))
    assert all(r.guarantee == "proven" for r in dp.ledger.releases)
    assert dp.ledger.epsilon_provable() <= 2.0 * (1 + 1e-9)
