"""Tests for tfdpmech.mechanisms.adlm.lrp: LRP with the ε rule against hand computations and numpy loops."""

from __future__ import annotations

from fractions import Fraction

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.mechanisms.adlm import lrp_relevance


L = keras.layers


def _set_random_weights(model, seed, bias_scale=0.3):
    """Deterministic weights from numpy, independent of the Keras initialiser state."""
    rng = np.random.default_rng(seed)
    weights = []
    for w in model.get_weights():
        scale = bias_scale if w.ndim == 1 else 1.0
        weights.append((rng.normal(size=w.shape) * scale).astype(np.float32))
    model.set_weights(weights)
    return model


def _unit_data(shape, n, seed=0):
    return np.random.default_rng(seed).random((n, *shape)).astype(np.float32)


# ------------------------------------------------------------------------------------------------
# numpy reference implementation of the ε rule, loop by loop (AdLM §II-C, Eqs. 4–7)
# ------------------------------------------------------------------------------------------------


def _stab(z, mu):
    return z + mu * np.where(z >= 0, 1.0, -1.0)


def _np_dense_lrp(a, w, b, r, mu):
    z = a @ w + b
    s = r / _stab(z, mu)
    return a * (w @ s)


def _padding(size, k, stride, dil, padding):
    span = (k - 1) * dil + 1
    if padding == "valid":
        return 0, (size - span) // stride + 1
    out = -(-size // stride)
    total = max((out - 1) * stride + span - size, 0)
    return total // 2, out


def _np_conv(a, w, b, stride, dil, padding, r=None, mu=0.0):
    """Forward (r=None) or LRP ε rule of a 2-D convolution on one (H, W, C) example."""
    kh, kw, c, f = w.shape
    pt, oh = _padding(a.shape[0], kh, stride, dil, padding)
    pl, ow = _padding(a.shape[1], kw, stride, dil, padding)
    ap = np.pad(a, ((pt, kh * dil + stride * oh), (pl, kw * dil + stride * ow), (0, 0)))
    z = np.zeros((oh, ow, f)) + b
    for i in range(oh):
        for j in range(ow):
            for u in range(kh):
                for v in range(kw):
                    z[i, j] += ap[i * stride + u * dil, j * stride + v * dil] @ w[u, v]
    if r is None:
        return z
    s = r / _stab(z, mu)
    rp = np.zeros_like(ap)
    for i in range(oh):
        for j in range(ow):
            for u in range(kh):
                for v in range(kw):
                    p, q = i * stride + u * dil, j * stride + v * dil
                    for ci in range(c):
                        for fi in range(f):
                            rp[p, q, ci] += ap[p, q, ci] * w[u, v, ci, fi] * s[i, j, fi]
    return rp[pt : pt + a.shape[0], pl : pl + a.shape[1]]


def _np_pool(a, size, stride, kind, r=None, mu=0.0):
    """Forward or LRP of a 'valid' max/average pool: max routes to the winner, avg uses the ε rule."""
    oh, ow = (a.shape[0] - size) // stride + 1, (a.shape[1] - size) // stride + 1
    z = np.zeros((oh, ow, a.shape[2]))
    rin = np.zeros_like(a)
    for i in range(oh):
        for j in range(ow):
            win = a[i * stride : i * stride + size, j * stride : j * stride + size]
            for c in range(a.shape[2]):
                wc = win[:, :, c]
                if kind == "max":
                    z[i, j, c] = wc.max()
                    if r is not None:
                        u, v = np.unravel_index(np.argmax(wc), wc.shape)
                        rin[i * stride + u, j * stride + v, c] += r[i, j, c]
                else:
                    z[i, j, c] = wc.mean()
                    if r is not None:
                        s = r[i, j, c] / _stab(np.array(wc.mean()), mu)
                        rin[i * stride : i * stride + size, j * stride : j * stride + size, c] += wc / wc.size * s
    return z if r is None else rin


def _np_conv_model_lrp(model, x, label, mu, conv_cfg, pool_cfg):
    """Conv2D(relu) → pool → Flatten → Dense, relevance seeded with the true logit."""
    (kc, bc), (kd, bd) = [model.layers[i].get_weights() for i in (0, 3)]
    stride, dil, padding = conv_cfg
    size, pstride, kind = pool_cfg
    zc = _np_conv(x, kc, bc, stride, dil, padding)
    h = np.maximum(zc, 0.0)
    p = _np_pool(h, size, pstride, kind)
    flat = p.reshape(-1)
    logits = flat @ kd + bd
    r_out = np.zeros_like(logits)
    r_out[label] = logits[label]
    r_flat = _np_dense_lrp(flat, kd, bd, r_out, mu)
    r_h = _np_pool(h, size, pstride, kind, r=r_flat.reshape(p.shape), mu=mu)
    return _np_conv(x, kc, bc, stride, dil, padding, r=r_h, mu=mu)  # ReLU: identity


# ------------------------------------------------------------------------------------------------
# (a) conservation, (b) hand-computed example
# ------------------------------------------------------------------------------------------------


def _mlp(activation_style="builtin", use_bias=False, seed=1):
    hidden = {
        "builtin": [L.Dense(8, activation="relu", use_bias=use_bias)],
        "layer": [L.Dense(8, use_bias=use_bias), L.ReLU(), L.Dropout(0.5)],
        "activation": [L.Dense(8, use_bias=use_bias), L.Activation("relu")],
    }[activation_style]
    model = keras.Sequential([keras.Input((5,)), *hidden, L.Dense(3, activation="softmax", use_bias=use_bias)])
    return _set_random_weights(model, seed)


def _logits(model, x):
    kernels = [w for w in model.get_weights() if w.ndim == 2]
    return np.maximum(x @ kernels[0], 0.0) @ kernels[1]


@pytest.mark.parametrize("start", ["true_class_logit", "predicted_logit", "all_logits"])
def test_conservation_without_bias_and_stabiliser(start):
    # Eq. 9: with μ → 0 and no bias, the input relevance sums to the starting relevance.
    model = _mlp()
    x = _unit_data((5,), 6)
    y = np.array([0, 1, 2, 0, 1, 2])
    r = lrp_relevance(model, x, y, mu=0.0, start=start)
    z = _logits(model, x)
    expected = {
        "true_class_logit": z[np.arange(6), y],
        "predicted_logit": z.max(axis=1),
        "all_logits": z.sum(axis=1),
    }[start]
    np.testing.assert_allclose(r.sum(axis=1), expected, rtol=1e-4, atol=1e-4)


def test_relu_layer_dropout_and_activation_match_builtin_relu():
    x = _unit_data((5,), 4)
    y = [0, 1, 2, 1]
    ref = lrp_relevance(_mlp("builtin", use_bias=True), x, y)
    for style in ("layer", "activation"):
        np.testing.assert_allclose(lrp_relevance(_mlp(style, use_bias=True), x, y), ref, rtol=1e-5, atol=1e-6)


def test_hand_computed_two_inputs_two_hidden():
    # x=(1,2); z_h = x·W1 + b1 = (5.5, 1); logits = relu(z_h)·W2 = (4.5, 2); seed = (4.5, 0).
    # Output: s = 4.5/(4.5+1) = 9/11, R_h = h ⊙ W2[:,0]·s = (4.5, -9/11).
    # Hidden: s_h = R_h/(z_h+1) = (9/13, -9/22), R_x = x ⊙ (W1·s_h).
    model = keras.Sequential(
        [keras.Input((2,)), L.Dense(2, activation="relu"), L.Dense(2, activation="softmax")]
    )
    model.set_weights(
        [
            np.array([[1, -1], [2, 1]], np.float32),
            np.array([0.5, 0], np.float32),
            np.array([[1, 0], [-1, 2]], np.float32),
            np.zeros(2, np.float32),
        ]
    )
    s = (Fraction(9, 13), Fraction(-9, 22))
    expected = [float(1 * (s[0] - s[1])), float(2 * (2 * s[0] + s[1]))]
    r = lrp_relevance(model, np.array([[1.0, 2.0]]), np.array([0]), mu=1.0)
    np.testing.assert_allclose(r[0], expected, rtol=1e-6)
    # the one-hot label gives the same seed as the integer label, and here the same as predicted
    np.testing.assert_allclose(lrp_relevance(model, [[1.0, 2.0]], [[1, 0]]), r, rtol=1e-6)
    np.testing.assert_allclose(lrp_relevance(model, [[1.0, 2.0]], start="predicted_logit"), r, rtol=1e-6)


# ------------------------------------------------------------------------------------------------
# (c) convolutional models against the numpy loops
# ------------------------------------------------------------------------------------------------


CONV_CASES = [
    # (conv: stride, dilation, padding), (pool: size, stride, kind)
    ((1, 1, "valid"), (2, 2, "max")),
    ((1, 1, "valid"), (2, 2, "avg")),
    ((2, 1, "same"), (2, 1, "avg")),
    ((1, 2, "same"), (3, 2, "max")),
]


@pytest.mark.parametrize("conv_cfg,pool_cfg", CONV_CASES)
def test_conv_pool_model_matches_numpy_loops(conv_cfg, pool_cfg):
    stride, dil, padding = conv_cfg
    size, pstride, kind = pool_cfg
    pool = (L.MaxPooling2D if kind == "max" else L.AveragePooling2D)(size, strides=pstride)
    model = keras.Sequential(
        [
            keras.Input((6, 6, 1)),
            L.Conv2D(2, 3, strides=stride, dilation_rate=dil, padding=padding, activation="relu"),
            pool,
            L.Flatten(),
            L.Dense(3, activation="softmax"),
        ]
    )
    _set_random_weights(model, seed=3)
    x = _unit_data((6, 6, 1), 2, seed=4)
    y = np.array([2, 0])
    for mu in (1.0, 0.1):
        r = lrp_relevance(model, x, y, mu=mu, batch_size=1)
        for i in range(len(x)):
            ref = _np_conv_model_lrp(model, x[i].astype(np.float64), y[i], mu, conv_cfg, pool_cfg)
            np.testing.assert_allclose(r[i], ref, rtol=1e-4, atol=1e-5)


def test_functional_model_with_global_average_pooling_and_reshape():
    inp = keras.Input((16,))
    h = L.Reshape((4, 4, 1))(inp)
    h = L.Conv2D(3, 2, padding="same", activation="relu")(h)
    h = L.GlobalAveragePooling2D()(h)
    out = L.Dense(2)(h)
    model = _set_random_weights(keras.Model(inp, out), seed=5, bias_scale=0.0)
    x = _unit_data((16,), 3)
    r = lrp_relevance(model, x, start="all_logits", mu=0.0)
    assert r.shape == (3, 16)
    # no bias, μ = 0, average pooling is linear: conservation (Eq. 9) still holds
    np.testing.assert_allclose(r.sum(axis=1), model.predict(x, verbose=0).sum(axis=1), rtol=1e-4, atol=1e-4)


class _ClipToUnit(L.Layer):
    """An elementwise layer LRP must treat as identity, like tfdpmech's UnitClip."""

    lrp_passthrough = True

    def call(self, inputs):
        return tf.clip_by_value(inputs, 0.0, 1.0)


def test_passthrough_layer_is_identity_for_relevance_but_not_for_activations():
    model = keras.Sequential(
        [keras.Input((4,)), L.Dense(3, activation="relu"), _ClipToUnit(), L.Dense(2, activation="sigmoid")]
    )
    _set_random_weights(model, seed=6)
    x = _unit_data((4,), 3)
    y = [1, 0, 1]
    w1, b1, w2, b2 = [w.astype(np.float64) for w in model.get_weights()]
    r = lrp_relevance(model, x, y)
    for i in range(3):
        z1 = x[i] @ w1 + b1
        h = np.clip(np.maximum(z1, 0), 0, 1)
        logits = h @ w2 + b2
        seed = np.zeros(2)
        seed[y[i]] = logits[y[i]]
        r_h = _np_dense_lrp(h, w2, b2, seed, 1.0)
        np.testing.assert_allclose(r[i], _np_dense_lrp(x[i], w1, b1, r_h, 1.0), rtol=1e-4, atol=1e-6)


class _ShiftByOne(L.Layer):
    """A passthrough layer that moves a zero pre-activation away from zero (like a perturbed bias)."""

    lrp_passthrough = True

    def call(self, inputs):
        return inputs + 1.0


def test_sign_of_zero_preactivation_is_plus_one():
    # x = (1, 1): z_h = (0, 2), h = z_h + 1 = (1, 3), logit 4; s = 4/5, R_h = h·s = (0.8, 2.4).
    # sign(0) = +1: s_h = (0.8/(0+1), 2.4/(2+1)) = (0.8, 0.8), R_x = x ⊙ (W1·s_h) = (1.6, 0).
    model = keras.Sequential(
        [keras.Input((2,)), L.Dense(2, use_bias=False), _ShiftByOne(), L.Dense(1, use_bias=False)]
    )
    model.set_weights([np.array([[1, 1], [-1, 1]], np.float32), np.ones((2, 1), np.float32)])
    r = lrp_relevance(model, np.array([[1.0, 1.0]]), start="all_logits", mu=1.0)
    np.testing.assert_allclose(r[0], [1.6, 0.0], atol=1e-6)


def test_batching_does_not_change_the_result():
    model = _mlp(use_bias=True)
    x = _unit_data((5,), 7)
    y = np.arange(7) % 3
    np.testing.assert_allclose(lrp_relevance(model, x, y, batch_size=3), lrp_relevance(model, x, y), rtol=1e-6)


# ------------------------------------------------------------------------------------------------
# (g) errors
# ------------------------------------------------------------------------------------------------


def test_unsupported_layer_raises_type_error_naming_it():
    model = keras.Sequential([keras.Input((4,)), L.Dense(3), L.BatchNormalization(), L.Dense(2)])
    with pytest.raises(TypeError, match=r"BatchNormalization.*supported layers: InputLayer, Dense"):
        lrp_relevance(model, _unit_data((4,), 2), [0, 1])


def test_unsupported_hidden_activation_and_layers_after_the_output():
    tanh = keras.Sequential([keras.Input((4,)), L.Dense(3, activation="tanh"), L.Dense(2)])
    with pytest.raises(TypeError, match="tanh"):
        lrp_relevance(tanh, _unit_data((4,), 2), [0, 1])
    after = keras.Sequential([keras.Input((4,)), L.Dense(2), L.ReLU()])
    with pytest.raises(TypeError, match="ReLU"):
        lrp_relevance(after, _unit_data((4,), 2), [0, 1])


def test_model_that_is_not_a_chain_is_refused():
    inp = keras.Input((4,))
    shared = L.Dense(4, activation="relu")
    model = _set_random_weights(keras.Model(inp, L.Dense(2)(shared(shared(inp)))), seed=9)
    with pytest.raises(TypeError, match="single-path"):
        lrp_relevance(model, _unit_data((4,), 2), [0, 1])


def test_bad_inputs_raise_clear_errors():
    model = _mlp()
    x = _unit_data((5,), 3)
    y = [0, 1, 2]
    bad_x = x.copy()
    bad_x[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        lrp_relevance(model, bad_x, y)
    with pytest.raises(ValueError, match="shape"):
        lrp_relevance(model, _unit_data((6,), 3), y)
    with pytest.raises(ValueError, match="needs labels y"):
        lrp_relevance(model, x)
    with pytest.raises(ValueError, match="3 examples"):
        lrp_relevance(model, x, [0, 1])
    with pytest.raises(ValueError):
        lrp_relevance(model, x, [0, 1, 3])  # class 3 of 3
    with pytest.raises(ValueError, match="mu"):
        lrp_relevance(model, x, y, mu=-1.0)
    with pytest.raises(ValueError, match="start"):
        lrp_relevance(model, x, y, start="softmax")
    with pytest.raises(TypeError):
        lrp_relevance(model, x, y, batch_size=0.5)
    with pytest.raises(TypeError, match="keras.Model"):
        lrp_relevance(lambda t: t, x, y)
