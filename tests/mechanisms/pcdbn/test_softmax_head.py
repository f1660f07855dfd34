"""The functional-mechanism softmax head: Taylor cross-entropy, Δ, PSD projection, closed-form fit."""

import numpy as np
import pytest
import tensorflow as tf

import tfdpmech
from tfdpmech.mechanisms.pcdbn.softmax_head import (
    FunctionalSoftmaxHead,
    head_sensitivity,
    project_psd,
    taylor_sigmoid_ce,
)


# --- the private head (pCDBN §3.3, Eqs. 17–18) -----------------------------------------------
def test_taylor_ce_closed_form_and_accuracy_near_zero():
    z = np.array([[0.3, -0.2], [0.01, 0.05]])
    y = np.array([[1.0, 0.0], [0.0, 1.0]])
    want = np.sum(np.log(2) + (0.5 - y) * z + z**2 / 8, axis=1)
    np.testing.assert_allclose(taylor_sigmoid_ce(z, y), want)
    bce = lambda zz, yy: np.sum(yy * np.log1p(np.exp(-zz)) + (1 - yy) * np.log1p(np.exp(zz)), axis=-1)
    for h in (0.1, 0.05):  # error is O(z⁴): halving z divides it by ~16
        zz = np.full((1, 2), h)
        err = abs(taylor_sigmoid_ce(zz, y[:1]) - bce(zz, y[:1]))[0]
        assert err <= h**4 / 96 * 2 + 1e-15
    np.testing.assert_allclose(
        tfdpmech.TaylorCrossEntropy()(tf.constant(y, tf.float32), tf.constant(z, tf.float32)).numpy(), want.mean(),
        rtol=1e-6)


def test_head_sensitivity_and_per_record_bound():
    assert head_sensitivity(25, 10, quadratic="per_class") == pytest.approx(1812.5)
    assert head_sensitivity(25, 10) == pytest.approx(406.25)
    rng = np.random.default_rng(0)
    for _ in range(5):
        p, y = rng.uniform(0, 1, 6), np.eye(3)[rng.integers(3)]
        l1 = np.abs(np.outer(p, 0.5 - y)).sum() + np.abs(np.outer(p, p)).sum() / 8
        assert 2 * l1 <= head_sensitivity(6, 3)


def test_psd_projection_and_closed_form_minimises():
    m = project_psd(np.array([[1.0, 2.0], [0.0, -3.0]]))
    assert np.all(np.linalg.eigvalsh(m) >= -1e-12) and np.allclose(m, m.T)
    rng = np.random.default_rng(1)
    p = rng.uniform(0, 1, (200, 4))
    y = np.eye(3)[rng.integers(3, size=200)]
    head = FunctionalSoftmaxHead(3, epsilon=1.0, seed=0).fit(p, y)
    assert np.all(np.linalg.eigvalsh(head.export_statistics()["m2_bar"]) >= -1e-8)
    base = head.objective(head.kernel, head.bias)
    for _ in range(5):
        assert head.objective(head.kernel + rng.normal(0, 0.1, head.kernel.shape), head.bias) >= base - 1e-9
    assert head.release.epsilon_provable == 1.0


def test_noiseless_head_learns_separable_problem():
    rng = np.random.default_rng(2)
    labels = rng.integers(3, size=300)
    p = np.clip(np.eye(3)[labels] * 0.8 + rng.uniform(0, 0.2, (300, 3)), 0, 1)
    head = FunctionalSoftmaxHead(3, "noiseless", ridge=1e-4).fit(p, np.eye(3)[labels])
    layer = head.dense_layer()
    assert np.mean(np.argmax(layer(p.astype(np.float32)).numpy(), 1) == labels) > 0.95
    assert head.release is None
