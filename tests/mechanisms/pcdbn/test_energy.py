"""pCDBN's perturbed CRBM energy (ChebyshevEnergy): Δ, noise drawn once, release, modes, bad input."""

import numpy as np
import pytest
import tensorflow as tf

from tfdpmech.mechanisms.pcdbn.conv_rbm import ConvRBM
from tfdpmech.mechanisms.pcdbn import ChebyshevEnergy, energy_sensitivity
from tfdpmech.mechanisms.pcdbn.softmax_head import FunctionalSoftmaxHead
from tfdpmech.mechanisms.pcdbn import PrivateCDBN
from tfdpmech.mechanisms.pcdbn.monomials import _exact_coefficients


def small_layer(approx="paper_smoothstep", degree=3, filters=3, channels=2, seed=0, **kw):
    rbm = ConvRBM(filters, 3, approx=approx, degree=degree, **kw)
    rbm(tf.zeros((1, 6, 6, channels)))
    rng = np.random.default_rng(seed)
    rbm.kernel.assign(rng.uniform(-1, 1, rbm.kernel.shape))
    rbm.hidden_bias.assign(rng.uniform(-1, 1, filters))
    rbm.visible_bias.assign([0.4])
    return rbm


def data(n=5, channels=2, seed=1):
    return np.random.default_rng(seed).uniform(0, 1, (n, 6, 6, channels)).astype(np.float32)


def coeff_l1(c):
    return float(sum(np.abs(np.asarray(v)).sum() for v in c.values()))


def coeff_diff_l1(a, b):
    return float(sum(np.abs(np.asarray(a[k]) - np.asarray(b[k])).sum() for k in a))


# --- sensitivity (pCDBN §3.2, Lemma 2, Eqs. 15–16, with a constant normaliser Z) -------------
def test_sensitivity_matches_worked_numbers():
    def mnist(approx, degree):
        layer = ConvRBM(32, 5, approx=approx, degree=degree)
        layer.build((None, 28, 28, 1))
        return energy_sensitivity(layer, (None, 28, 28, 1))

    assert mnist("paper_smoothstep", 7) == pytest.approx(106_400)
    assert mnist("paper_smoothstep", 3) == pytest.approx(46_496)
    assert mnist("chebyshev_sigmoid", 7) == pytest.approx(24_722, rel=1e-4)


def test_sensitivity_bounds_random_records_and_neighbours():
    rbm = small_layer("paper_smoothstep", 3)
    delta = energy_sensitivity(rbm, (None, 6, 6, 2))
    rng = np.random.default_rng(7)
    assert 2 * coeff_l1(_exact_coefficients(rbm, np.ones((1, 6, 6, 2), np.float32))) == pytest.approx(delta)
    for _ in range(10):
        record = rng.uniform(0, 1, (1, 6, 6, 2)).astype(np.float32)
        assert 2 * coeff_l1(_exact_coefficients(rbm, record)) <= delta
        d1 = rng.uniform(0, 1, (4, 6, 6, 2)).astype(np.float32)
        d2 = d1.copy()
        d2[rng.integers(4)] = rng.uniform(0, 1, (6, 6, 2)) * (rng.uniform() < 0.5)
        assert coeff_diff_l1(_exact_coefficients(rbm, d1), _exact_coefficients(rbm, d2)) <= delta


# --- noise drawn once (functional mechanism, pCDBN §3.2) -------------------------------------
def prepared(seed=3, eps=1.0):
    obj = ChebyshevEnergy(small_layer(), "private", epsilon=eps, seed=seed, neg_chains=4)
    obj.prepare(data())
    return obj


def test_noise_fixed_across_epochs_and_retraces():
    obj = prepared()
    rbm = obj.layer
    w0 = [v.numpy() for v in (rbm.kernel, rbm.hidden_bias, rbm.visible_bias)]
    e0 = float(obj.polynomial_energy())
    fn = tf.function(lambda scale: obj.polynomial_energy() * scale)
    assert float(fn(tf.constant(1.0))) == pytest.approx(e0, rel=1e-6)
    assert float(fn(tf.constant([1.0]))[0]) == pytest.approx(e0, rel=1e-6)  # a retrace
    before = obj.export_coefficients()
    obj.fit(None, epochs=2, batch_size=5)  # data-free: x is not needed after prepare()
    for v, w in zip((rbm.kernel, rbm.hidden_bias, rbm.visible_bias), w0):
        v.assign(w)
    assert float(obj.polynomial_energy()) == pytest.approx(e0, rel=1e-6)
    after = obj.export_coefficients()
    for k in before:
        np.testing.assert_array_equal(before[k], after[k])


def test_seed_controls_draws():
    a, b, c = prepared(seed=5), prepared(seed=5), prepared(seed=6)
    np.testing.assert_array_equal(a.export_coefficients()[2], b.export_coefficients()[2])
    assert not np.array_equal(a.export_coefficients()[2], c.export_coefficients()[2])
    assert a.release.details["fingerprint"] == b.release.details["fingerprint"] != c.release.details["fingerprint"]


def test_private_release_and_data_free_objective():
    obj = prepared(eps=2.0)
    r = obj.release
    assert (r.epsilon_claimed, r.epsilon_provable, r.reproduction) == (2.0, 2.0, False)
    assert r.noise_scale == pytest.approx(r.sensitivity / 2.0)
    with pytest.raises(ValueError, match="no private data"):
        obj.loss(data())
    with pytest.raises(RuntimeError, match="once"):
        obj.prepare(data())


def test_reference_mode_moved_to_pcdbn_reference():
    with pytest.raises(ValueError, match="PCDBNReference"):
        ChebyshevEnergy(small_layer(), "reference", epsilon=0.5)


@pytest.mark.parametrize("mode", ["exact", "noiseless"])
def test_baseline_modes_train(mode):
    obj = ChebyshevEnergy(small_layer(), mode, seed=0, neg_chains=4)
    hist = obj.fit(data(8), epochs=2, batch_size=4)
    assert len(hist) == 2 and all(np.isfinite(hist)) and obj.release is None
    assert np.max(np.abs(obj.layer.kernel.numpy())) <= obj.layer.weight_bound


# --- bad input -------------------------------------------------------------------------------
def test_infeasible_degree_names_monomial_count():
    layer = ConvRBM(4, 5, degree=7)
    layer.build((None, 28, 28, 1))
    obj = ChebyshevEnergy(layer, "private", epsilon=1.0)
    with pytest.raises(ValueError, match=r"14,644,565 monomials.*degree=3"):
        obj.prepare(np.zeros((2, 28, 28, 1), np.float32))


@pytest.mark.parametrize("eps", [0, -1.0, float("inf")])
def test_bad_epsilon(eps):
    with pytest.raises(ValueError, match="epsilon"):
        ChebyshevEnergy(small_layer(), "private", epsilon=eps)
    with pytest.raises(ValueError, match="epsilon"):
        FunctionalSoftmaxHead(10, epsilon=eps)
    with pytest.raises(ValueError, match="epsilon"):
        PrivateCDBN(epsilon=eps)


def test_inputs_outside_domain():
    obj = ChebyshevEnergy(small_layer(), "private", epsilon=1.0)
    with pytest.raises(ValueError, match=r"domain \[0, 1\]"):
        obj.prepare(data() * 2)
    with pytest.raises(ValueError, match=r"every feature in \[0, 1\]"):
        FunctionalSoftmaxHead(3, epsilon=1.0).fit(np.full((4, 2), 1.5), np.eye(3)[[0, 1, 2, 0]])


def test_private_needs_constant_normalizer_and_mode_epsilon_pairing():
    with pytest.raises(ValueError, match="normalizer='constant'"):
        ChebyshevEnergy(small_layer(normalizer="lrn"), "private", epsilon=1.0)
    with pytest.raises(ValueError, match="non-private"):
        ChebyshevEnergy(small_layer(), "noiseless", epsilon=1.0)
    with pytest.raises(ValueError, match="needs epsilon"):
        ChebyshevEnergy(small_layer(), "private")


def test_split_must_add_up():
    with pytest.raises(ValueError, match="does not add up"):
        PrivateCDBN(epsilon=1.0, split=(0.5, 0.6))
    with pytest.raises(ValueError, match="does not add up"):
        PrivateCDBN(epsilon=1.0, split={"crbm_layer_1": 0.5, "output_layer": 0.6})
    with pytest.raises(TypeError, match="sequence of fractions"):
        PrivateCDBN(epsilon=1.0, split=0.5)


def test_noise_free_export_refused():
    obj = prepared()
    with pytest.raises(ValueError, match="never exported"):
        obj.export_coefficients(noisy=False)
    head = FunctionalSoftmaxHead(2, "noiseless").fit(np.eye(2), np.eye(2))
    with pytest.raises(ValueError, match="never exported"):
        head.export_statistics()
    base = ChebyshevEnergy(small_layer(), "noiseless", seed=0)
    base.prepare(data())
    with pytest.raises(ValueError, match="mode='private'"):
        base.export_coefficients()
