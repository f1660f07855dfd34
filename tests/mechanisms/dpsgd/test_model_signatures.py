"""Any Keras model signature: lists, tuples and dicts of inputs; several outputs with a list or dict of losses."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech import DPSGD, make_private
from tfdpmech.mechanisms.dpsgd.clipping import clipped_gradient_sum, gradients
from tfdpmech.mechanisms.dpsgd.clipping.output_losses import per_record_loss

N, VOCAB, TOKENS = 120, 20, 6


def _records():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, VOCAB, size=(N, TOKENS))
    numeric = rng.normal(size=(N, 3)).astype("float32")
    labels = ((ids[:, 0] % 2) + (numeric[:, 0] > 0)).astype("int64")  # 3 classes
    return ids, numeric, labels, (numeric[:, :1] * 2.0).astype("float32")


def _two_inputs(dict_inputs=False, two_outputs=False):
    keras.utils.set_random_seed(0)
    ids, numeric = keras.Input((TOKENS,), dtype="int32", name="ids"), keras.Input((3,), name="numeric")
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(VOCAB, 4)(ids))
    hidden = keras.layers.Dense(8, activation="tanh")(keras.layers.Concatenate()([pooled, numeric]))
    outputs = keras.layers.Dense(3, name="cls")(hidden)
    if two_outputs:
        outputs = [outputs, keras.layers.Dense(1, name="reg")(hidden)]
    return keras.Model({"ids": ids, "numeric": numeric} if dict_inputs else [ids, numeric], outputs)


def _run(**kw):
    return DPSGD(epsilon=4.0, delta=1e-5, n=N, expected_batch_size=30, epochs=2, seed=0, **kw)


SPARSE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@pytest.mark.parametrize("form", ["list", "tuple", "dict"])
def test_several_inputs_train_on_the_ghost_path(form):
    ids, numeric, labels, _ = _records()
    model = make_private(_two_inputs(dict_inputs=form == "dict"), _run())
    model.compile(loss=SPARSE, metrics=["accuracy"])
    assert model.dp_sgd.path == "fast_clipping"
    x = {"list": [ids, numeric], "tuple": (ids, numeric), "dict": {"ids": ids, "numeric": numeric}}[form]
    before = [w.copy() for w in model.get_weights()]
    history = model.fit(x, labels, verbose=0)
    assert len(history.history["loss"]) == 2
    assert all(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    assert model.evaluate(x, labels, verbose=0)[1] >= 0.0


def test_bad_inputs_are_named(tmp_path):
    ids, numeric, labels, _ = _records()
    model = make_private(_two_inputs(), _run())
    model.compile(loss=SPARSE)
    bad = numeric.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"x\[1\] contains 1 NaN"):
        model.fit([ids, bad], labels)
    with pytest.raises(ValueError, match=r"one row per record"):
        model.fit([ids, numeric[:-1]], labels)
    with pytest.raises(TypeError, match=r"x\['numeric'\] must be a numeric array"):
        model.fit({"ids": ids, "numeric": numeric.astype(str)}, labels)
    assert len(model.privacy_ledger) == 0  # every check ran before the release


def test_several_outputs_clip_the_joint_gradient_of_the_weighted_total_loss():
    ids, numeric, labels, target = _records()
    model = _two_inputs(two_outputs=True)
    losses = {"cls": SPARSE, "reg": keras.losses.MeanSquaredError()}
    weights = {"cls": 1.0, "reg": 0.5}
    loss_fn = per_record_loss(model, losses, weights)
    x = [tf.constant(ids[:16]), tf.constant(numeric[:16])]
    y = [tf.constant(labels[:16]), tf.constant(target[:16])]
    mask = np.ones(16, np.float32)
    mask[[2, 9]] = 0.0
    clip = 0.05
    for method in ("fast_clipping", "vectorized"):
        got, _, norms = clipped_gradient_sum(model, loss_fn, x, y, tf.constant(mask), clip, method, training=False)
        want = [np.zeros(v.shape) for v in model.trainable_variables]
        for i in np.flatnonzero(mask):
            with tf.GradientTape() as tape:
                cls, reg = model([t[i:i + 1] for t in x], training=False)
                total = (SPARSE(y[0][i:i + 1], cls)
                         + 0.5 * keras.losses.MeanSquaredError()(y[1][i:i + 1], reg))
            grads = [g.numpy() for g in gradients(tape, total, model.trainable_variables)]
            norm = np.sqrt(sum(float(np.sum(g * g)) for g in grads))
            np.testing.assert_allclose(float(norms[i]), norm, rtol=1e-4)
            want = [w + g * min(1.0, clip / norm) for w, g in zip(want, grads)]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-4, atol=1e-6)


def test_several_outputs_train_with_a_dict_of_losses_and_loss_weights():
    ids, numeric, labels, target = _records()
    model = make_private(_two_inputs(two_outputs=True), _run())
    model.compile(loss={"cls": SPARSE, "reg": keras.losses.MeanSquaredError()}, loss_weights={"cls": 1.0, "reg": 0.5},
                  metrics={"cls": ["accuracy"]})
    history = model.fit([ids, numeric], {"cls": labels, "reg": target}, verbose=0)
    assert len(model.privacy_ledger) == 1
    assert np.isfinite(history.history["loss"]).all()
    results = model.evaluate([ids, numeric], [labels, target], verbose=0, return_dict=True)
    assert "cls_accuracy" in results or "accuracy" in str(results)
