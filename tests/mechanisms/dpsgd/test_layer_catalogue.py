"""Every layer class Keras ships, on the running stack: DP-SGD clips it exactly or refuses it before the release.

The classes are read from ``keras.layers`` itself (Keras 2.15 and Keras 3 alike), not from a hand-picked
list. :data:`SPECS` (in :mod:`._layer_specs`) builds each in a tiny model (input → layer → Dense logits)
and states what the engine must do with it: ``"exact"`` (its clipped gradient sum equals a loop of one
gradient tape per record, 1e-4 relative, and removing any one record moves it by at most C; on Keras 3
also on the ghost-norm path, by the layer's registry rule or handled alone, unless
:data:`WHOLE_MODEL_PER_RECORD` says why not), ``"refused"`` (compile raises and the ledger stays empty) or
``"none"`` (it holds no variable: nothing to clip, nothing to update). :data:`NOT_TESTABLE` names, with
the reason, the classes no DP-SGD model can hold on this stack (base classes, other backends' wrappers).
A class in neither fails the test: a new Keras layer cannot slip through unclassified.

Layers that draw random numbers in training (dropout, noise, augmentation) are compared in inference
mode, where the engine and the loop see the same function; the compile-time probe has already run
their training pass and found their state data-independent (:mod:`tfdpmech.mechanisms.dpsgd.clipping.model_probe`).
"""

from __future__ import annotations

import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.mechanisms.dpsgd import DPSGD
from tfdpmech.mechanisms.dpsgd.clipping import clipped_gradient_sum, gradients, per_example_loss
from tfdpmech.mechanisms.dpsgd.clipping.ghost_norms import layer_paths
from tfdpmech.mechanisms.dpsgd.clipping.layer_rules import registered_rule
from tfdpmech.mechanisms.dpsgd.runs.train_step import KERAS_3

from ._layer_specs import NOT_TESTABLE, SLOW, SPECS

LOSS = keras.losses.CategoricalCrossentropy(from_logits=True)
ROWS = 5  # four records and one padding row


def _catalogue() -> dict:
    classes = {}
    for name in dir(keras.layers):
        obj = getattr(keras.layers, name)
        if inspect.isclass(obj) and issubclass(obj, keras.layers.Layer):
            classes[obj.__name__] = obj
    return classes


CATALOGUE = _catalogue()


def _batch(model, seed=0):
    rng = np.random.default_rng(seed)
    arrays = []
    for tensor in model.inputs:
        shape = (ROWS,) + tuple(tensor.shape[1:])
        dtype = str(getattr(tensor.dtype, "name", tensor.dtype))
        arrays.append(rng.integers(1, 6, shape).astype(dtype) if "int" in dtype else rng.random(shape).astype(dtype))
    y = keras.utils.to_categorical(rng.integers(0, 2, ROWS), 2).astype(np.float32)
    return (arrays[0] if len(arrays) == 1 else arrays), y


def _rows(x, i):
    return tf.nest.map_structure(lambda t: t[i:i + 1], x)


def _per_record_gradients(model, x, y, training):
    """One gradient tape per record: the definition, no tricks."""
    fn, out = per_example_loss(LOSS), []
    for i in range(ROWS):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(fn(y[i:i + 1], model(_rows(x, i), training=training)))
        out.append([g.numpy().astype(np.float64) for g in gradients(tape, loss, model.trainable_variables)])
    return out


def _engine_outcome(model, random: bool, layer=None) -> str:
    dp = DPSGD(2.0, 1e-3, expected_batch_size=10, epochs=1, n=100, engine="tfdpmech")
    try:
        dp.compile(model, loss=LOSS)
    except (ValueError, TypeError):
        assert len(dp.ledger) == 0 and dp.release is None, "refused after the release was recorded"
        return "refused"
    _check_path(model, layer, dp.path)
    x, y = _batch(model)
    weights = np.array([1.0] * (ROWS - 1) + [0.0], np.float32)
    training = not random
    per_record = _per_record_gradients(model, x, y, training)
    norms = np.array([np.sqrt(sum(float(np.sum(g * g)) for g in grads)) for grads in per_record])
    clip = float(np.median(norms[:-1]))  # some records clipped, some not
    want = [sum(w * min(1.0, clip / max(n, 1e-12)) * grads[k] for grads, w, n in zip(per_record, weights, norms))
            for k in range(len(model.trainable_variables))]
    got, _, got_norms = clipped_gradient_sum(model, per_example_loss(LOSS), x, y, weights, clip, dp.path,
                                             training=training)
    np.testing.assert_allclose(got_norms.numpy()[:-1], norms[:-1], rtol=1e-4, atol=1e-7, err_msg=dp.path)
    overall = max(float(np.abs(w).max()) for w in want)  # a gradient that is 0 in exact arithmetic is float noise
    for g, w, v in zip(got, want, model.trainable_variables):
        tolerance = 1e-4 * float(np.abs(w).max()) + 1e-6 * overall
        assert float(np.abs(g.numpy() - w).max()) <= tolerance, (v.name, dp.path)
    _check_add_remove_sensitivity(model, x, y, weights, clip, dp.path, training, got)
    return "exact"


def _check_add_remove_sensitivity(model, x, y, weights, clip, path, training, summed):
    """Removing any one record (its weight set to 0: the neighbouring batch) moves the engine's clipped sum by
    at most C in L2 norm: the sensitivity the noise is calibrated to."""
    for i in np.flatnonzero(weights):
        without = weights.copy()
        without[i] = 0.0
        other, _, _ = clipped_gradient_sum(model, per_example_loss(LOSS), x, y, without, clip, path,
                                           training=training)
        moved = np.sqrt(sum(float(np.sum((a.numpy().astype(np.float64) - b.numpy()) ** 2))
                            for a, b in zip(summed, other)))
        assert moved <= clip * (1 + 1e-4), f"removing record {i} moved the clipped sum by {moved} > C = {clip}"


# Keras 3: every layer DP-SGD clips exactly trains on the ghost-norm path, by its registry rule or alone,
# except these (the whole model then takes the per-record path), with what the compile-time probe measured
WHOLE_MODEL_PER_RECORD: dict[str, str] = {}


def _check_path(model, layer, path):
    """Which path the layer takes: ghost norms (its registered rule, else alone) or, listed above, per record."""
    if not KERAS_3 or layer is None:
        return
    name = type(layer).__name__
    if name in WHOLE_MODEL_PER_RECORD:
        assert path == "vectorized", name
        return
    assert path == "fast_clipping", f"{name} sent the model to the per-record path"
    paths = layer_paths(model)
    if layer.name in paths:  # the layer is a unit itself (not a cell or a container of units)
        rule = registered_rule(layer)
        assert paths[layer.name] == (rule.family if rule is not None else "alone"), (name, paths)


def _holds_variables(layer) -> bool:
    return bool(layer.variables) or any(sub.variables for sub in layer._flatten_layers(include_self=False))


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in sorted(CATALOGUE)])
def test_every_layer_is_clipped_exactly_or_refused_before_the_release(name):
    if name in NOT_TESTABLE:
        pytest.skip(NOT_TESTABLE[name])
    assert name in SPECS, (f"keras.layers.{name} is not classified: add it to SPECS (a tiny model and what DP-SGD "
                           "must do with it) or to NOT_TESTABLE with the reason")
    spec = SPECS[name]
    keras.utils.set_random_seed(0)
    model, layer = spec.build()
    assert isinstance(layer, CATALOGUE[name]), f"the spec of {name} builds a {type(layer).__name__}"
    if spec.expect == "none":
        assert not _holds_variables(layer), f"{name} holds variables: classify it as 'exact' or 'refused'"
        return
    # a random layer holds its seed state in a variable on Keras 3, in none on Keras 2: the engine checks it either way
    assert _holds_variables(layer) or spec.random or spec.expect == "refused", (
        f"{name} holds no variable: classify it as 'none'")
    assert _engine_outcome(model, spec.random, layer) == spec.expect


def test_the_catalogue_is_read_from_keras_itself():
    assert {"Dense", "Conv2D", "LSTM", "BatchNormalization", "MultiHeadAttention"} <= set(CATALOGUE)
    assert len(CATALOGUE) > 80
    stale = sorted(set(NOT_TESTABLE) & set(SPECS))
    assert not stale, f"classified twice: {stale}"
