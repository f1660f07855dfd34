"""ConvRBM: pCDBN (Phan, Wu, Dou) §2.2, Eqs. 4–7, and the normaliser Z of §3.1 (energy identity, Eq. 6 indices)."""

import numpy as np
import pytest
import tensorflow as tf
import keras

from tfdpmech.mechanisms.pcdbn.chebyshev import poly_eval_np
from tfdpmech.mechanisms.pcdbn.conv_rbm import BoxConstraint, ConvRBM


def sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def random_rbm(normalizer="constant", approx="paper_smoothstep", degree=7, channels=2, seed=0, **kw):
    rng = np.random.default_rng(seed)
    rbm = ConvRBM(3, 3, approx=approx, degree=degree, normalizer=normalizer, **kw)
    rbm(tf.zeros((1, 6, 6, channels)))
    rbm.kernel.assign(rng.uniform(-1, 1, rbm.kernel.shape))
    rbm.hidden_bias.assign(rng.uniform(-1, 1, 3))
    rbm.visible_bias.assign([0.7])
    return rbm, rng.uniform(0, 1, (4, 6, 6, channels)).astype(np.float32)


def literal_energy(rbm, v, h_of):
    """Eq. 12/14 as a literal loop: −ΣΣΣ h·W·v − Σ b Σ h − c Σ v, with h = h_of(k, i, j)."""
    W, b, c = rbm.kernel.numpy(), rbm.hidden_bias.numpy(), float(rbm.visible_bias.numpy()[0])
    nw, K = W.shape[0], W.shape[3]
    nh = v.shape[0] - nw + 1
    e = 0.0
    for k in range(K):
        for i in range(nh):
            for j in range(nh):
                h = h_of(k, i, j)
                for r in range(nw):
                    for s in range(nw):
                        e -= h * float(np.dot(W[r, s, :, k], v[i + r, j + s, :]))
                e -= b[k] * h
    return e - c * float(v.sum())


def preact_loop(rbm, v, k, i, j):
    W, b = rbm.kernel.numpy(), rbm.hidden_bias.numpy()
    nw = W.shape[0]
    return float(np.sum(W[:, :, :, k] * v[i : i + nw, j : j + nw, :]) + b[k])


@pytest.mark.parametrize("normalizer", ["constant", "lrn"])
def test_energy_identity_literal_loop_eq14(normalizer):
    rbm, v = random_rbm(normalizer)
    got = rbm.energy(v).numpy()
    a_all = rbm.preactivation(v).numpy()
    z_all = rbm.normalizer(tf.constant(a_all)).numpy()
    for t in range(len(v)):
        def h_of(k, i, j):
            a = preact_loop(rbm, v[t], k, i, j)
            assert a == pytest.approx(a_all[t, i, j, k], abs=1e-5)
            x = np.clip(a / z_all[t, i, j, k], -1, 1)
            return float(poly_eval_np(x, rbm.alpha))
        assert got[t] == pytest.approx(literal_energy(rbm, v[t], h_of), rel=1e-5, abs=1e-4)


def test_energy_identity_exact_eq12():
    rbm, v = random_rbm()
    got = rbm.energy(v, approx="exact").numpy()
    for t in range(len(v)):
        want = literal_energy(rbm, v[t], lambda k, i, j: sig(preact_loop(rbm, v[t], k, i, j)))
        assert got[t] == pytest.approx(want, rel=1e-5, abs=1e-4)


def test_visible_probs_match_eq6_index_for_index():
    rbm, _ = random_rbm()
    rng = np.random.default_rng(3)
    h = rng.uniform(0, 1, (2, 4, 4, 3)).astype(np.float32)
    got = rbm.visible_probs(h).numpy()
    W, c = rbm.kernel.numpy(), float(rbm.visible_bias.numpy()[0])
    want = np.zeros((2, 6, 6, 2))
    for t in range(2):
        for k in range(3):
            for i in range(4):
                for j in range(4):
                    for r in range(3):
                        for s in range(3):
                            want[t, i + r, j + s, :] += W[r, s, :, k] * h[t, i, j, k]  # full convolution, Eq. 6
    np.testing.assert_allclose(got, sig(want + c), atol=1e-5)


def test_normalizers_bound_x():
    for kind in ("constant", "lrn", "batch_max"):
        rbm, v = random_rbm(kind)
        a = rbm.preactivation(v)
        x = (a / rbm.normalizer(a)).numpy()
        assert np.all(np.abs(x) <= 1 + 1e-6) if kind != "batch_max" else np.max(x) == pytest.approx(1.0)
    rbm, _ = random_rbm()
    assert rbm.z == pytest.approx(3 * 3 * 2 + 1)  # ‖ṽ‖₁,max · w_max
    lrn_rbm, _ = random_rbm("lrn")
    small = lrn_rbm.normalizer(tf.constant(np.full((1, 1, 1, 3), 0.1, np.float32))).numpy()
    np.testing.assert_allclose(small, 2.0**0.75, rtol=1e-3)  # Z ≈ q^β when a is small (pCDBN §3.1, q = 2)


def test_probabilistic_max_pooling():
    rbm, v = random_rbm(pooling="probabilistic", pool_size=2)
    a = rbm.preactivation(v).numpy()
    out = rbm(v).numpy()
    block = a[:, 0:2, 0:2, :].reshape(len(a), 4, 3)
    np.testing.assert_allclose(out[:, 0, 0, :], 1 - 1 / (1 + np.exp(block).sum(axis=1)), rtol=1e-5)
    maxpool, _ = random_rbm(pooling="max")
    np.testing.assert_allclose(maxpool(v).numpy()[:, 0, 0, :], sig(block).max(axis=1), rtol=1e-5)


def test_gibbs_step_draws_fresh_samples_in_tf_function():
    rbm, v = random_rbm()
    gen = tf.random.Generator.from_seed(1)
    step = tf.function(lambda x: rbm.gibbs_step(x, gen, sample_v=True)[0])
    a, b = step(tf.constant(v)).numpy(), step(tf.constant(v)).numpy()
    assert set(np.unique(a)) <= {0.0, 1.0}
    assert not np.array_equal(a, b)


def test_box_constraint_and_project():
    rbm, _ = random_rbm(weight_bound=0.5)
    rbm.kernel.assign(rbm.kernel * 10)
    rbm.project()
    assert np.max(np.abs(rbm.kernel.numpy())) <= 0.5
    np.testing.assert_allclose(BoxConstraint(0.2)(tf.constant([-1.0, 0.1, 3.0])).numpy(), [-0.2, 0.1, 0.2])


def test_config_roundtrip_and_keras_model_save(tmp_path):
    rbm = ConvRBM(4, 3, degree=3, normalizer="lrn", pooling="probabilistic", name="crbm")
    clone = ConvRBM.from_config(rbm.get_config())
    assert clone.get_config() == rbm.get_config()
    model = keras.Sequential([keras.Input((8, 8, 1)), rbm, keras.layers.Flatten(), keras.layers.Dense(3)])
    x = np.random.default_rng(0).uniform(0, 1, (2, 8, 8, 1)).astype(np.float32)
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded(x).numpy(), model(x).numpy(), atol=1e-6)
    assert model.output_shape == (None, 3)


@pytest.mark.parametrize("kwargs,match", [
    ({"degree": 0}, "degree"),
    ({"normalizer": "softmax"}, "normalizer"),
    ({"pooling": "avg"}, "pooling"),
    ({"weight_bound": 0}, "weight_bound"),
    ({"z": -1.0}, "z"),
    ({"approx": "paper_smoothstep", "degree": 4}, "paper_smoothstep"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ConvRBM(2, 3, **kwargs)
