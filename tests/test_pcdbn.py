"""pCDBN: perturbed energy, private head and PrivateCDBN (spec seed_003_pcdbn.md §3.4, §4, §8.4–§8.9)."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfdpmech
from tfdpmech.layers.conv_rbm import ConvRBM
from tfdpmech.losses.chebyshev_energy import (
    ChebyshevEnergy,
    _exact_coefficients,
    energy_orders,
    energy_sensitivity,
    monomial_count,
    monomial_table,
    multinomial_factors,
)
from tfdpmech.losses.functional_softmax_head import (
    FunctionalSoftmaxHead,
    head_sensitivity,
    project_psd,
    taylor_sigmoid_ce,
)
from tfdpmech.mechanisms.pcdbn import PrivateCDBN


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


# --- §3.4: monomial algebra and the expansion ----------------------------------------------
def test_monomial_tables_and_counts():
    t = monomial_table(4, 3)
    assert len(t) == math.comb(6, 3) and np.all(np.diff(t, axis=1) >= 0)
    np.testing.assert_allclose(multinomial_factors(np.array([[0, 0, 1], [0, 1, 2], [2, 2, 2]])), [3, 6, 1])
    assert energy_orders(tfdpmech.chebyshev.PAPER_SMOOTHSTEP[7]) == [1, 2, 4, 6, 8]
    assert monomial_count(26, tfdpmech.chebyshev.PAPER_SMOOTHSTEP[3]) == 26 + 351 + 23751  # §3.4 sizes


@pytest.mark.parametrize("approx,degree", [("paper_smoothstep", 3), ("chebyshev_sigmoid", 3), ("paper_smoothstep", 2)])
def test_monomial_expansion_equals_direct_evaluation(approx, degree):
    rbm, x = small_layer(approx, degree), data()
    coeffs = _exact_coefficients(rbm, x)
    w = rbm.filter_vectors().numpy().astype(np.float64)
    total = coeffs["c"] * float(rbm.visible_bias.numpy()[0])
    for m in energy_orders(rbm.alpha):
        t = monomial_table(rbm.patch_dim, m)
        total += sum(float(np.prod(w[k][t], axis=1) @ coeffs[m]) for k in range(len(w)))
    assert total == pytest.approx(float(tf.reduce_sum(rbm.energy(x))), rel=1e-5)


# --- §4.7 / §8.9: sensitivity ----------------------------------------------------------------
def test_sensitivity_matches_spec_worked_numbers():
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


# --- §8.6 / §8.9: noise drawn once -----------------------------------------------------------
def prepared(seed=3, eps=1.0):
    obj = ChebyshevEnergy(small_layer(), "functional", epsilon=eps, seed=seed, neg_chains=4)
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


def test_functional_release_and_data_free_objective():
    obj = prepared(eps=2.0)
    r = obj.release
    assert (r.epsilon_claimed, r.epsilon_provable, r.reproduction) == (2.0, 2.0, False)
    assert r.noise_scale == pytest.approx(r.sensitivity / 2.0)
    with pytest.raises(ValueError, match="no private data"):
        obj.loss(data())
    with pytest.raises(RuntimeError, match="once"):
        obj.prepare(data())


def test_reference_mode_is_claimed_only():
    obj = ChebyshevEnergy(small_layer(degree=7, normalizer="batch_max"), "reference", epsilon=0.5, seed=0)
    obj.fit(data(8), epochs=1, batch_size=4)
    assert obj.release.epsilon_provable is None and obj.release.reproduction
    assert obj.release.guarantee == "claimed"


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
    obj = ChebyshevEnergy(layer, "functional", epsilon=1.0)
    with pytest.raises(ValueError, match=r"14,644,565 monomials.*degree=3"):
        obj.prepare(np.zeros((2, 28, 28, 1), np.float32))


@pytest.mark.parametrize("eps", [0, -1.0, float("inf")])
def test_bad_epsilon(eps):
    with pytest.raises(ValueError, match="epsilon"):
        ChebyshevEnergy(small_layer(), "functional", epsilon=eps)
    with pytest.raises(ValueError, match="epsilon"):
        FunctionalSoftmaxHead(10, epsilon=eps)
    with pytest.raises(ValueError, match="epsilon"):
        PrivateCDBN([ConvRBM(2, 3)], epsilon=eps)


def test_inputs_outside_domain():
    obj = ChebyshevEnergy(small_layer(), "functional", epsilon=1.0)
    with pytest.raises(ValueError, match=r"domain \[0, 1\]"):
        obj.prepare(data() * 2)
    with pytest.raises(ValueError, match="features must lie in"):
        FunctionalSoftmaxHead(3, epsilon=1.0).fit(np.full((4, 2), 1.5), np.eye(3)[[0, 1, 2, 0]])


def test_functional_needs_constant_normalizer_and_mode_epsilon_pairing():
    with pytest.raises(ValueError, match="normalizer='constant'"):
        ChebyshevEnergy(small_layer(normalizer="lrn"), "functional", epsilon=1.0)
    with pytest.raises(ValueError, match="non-private"):
        ChebyshevEnergy(small_layer(), "noiseless", epsilon=1.0)
    with pytest.raises(ValueError, match="needs epsilon"):
        ChebyshevEnergy(small_layer(), "reference")


def test_split_must_add_up():
    with pytest.raises(ValueError, match="does not add up"):
        PrivateCDBN([ConvRBM(2, 3)], epsilon=1.0, split=(0.5, 0.6))
    with pytest.raises(ValueError, match="does not add up"):
        PrivateCDBN([ConvRBM(2, 3)], epsilon=1.0, split={"crbm_layer_1": 0.5, "output_layer": 0.6})
    with pytest.raises(ValueError, match="components"):
        PrivateCDBN([ConvRBM(2, 3)], epsilon=1.0, split=(1.0,))


def test_noise_free_export_refused():
    obj = prepared()
    with pytest.raises(ValueError, match="never exported"):
        obj.export_coefficients(noisy=False)
    head = FunctionalSoftmaxHead(2, "noiseless").fit(np.eye(2), np.eye(2))
    with pytest.raises(ValueError, match="never exported"):
        head.export_statistics()
    base = ChebyshevEnergy(small_layer(), "noiseless", seed=0)
    base.prepare(data())
    with pytest.raises(ValueError, match="functional"):
        base.export_coefficients()


# --- §8.5: the private head ------------------------------------------------------------------
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


# --- §8.7: the builder ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def mnist():
    ds = tfdpmech.data.load("mnist_sample")
    return ds.x_train[:300], ds.y_train[:300]


def test_builder_functional_ledger_composes_and_model_saves(mnist, tmp_path):
    x, y = mnist
    cdbn = PrivateCDBN([ConvRBM(4, 5, approx="chebyshev_sigmoid", degree=1),
                        ConvRBM(4, 3, approx="chebyshev_sigmoid", degree=1)],
                       mode="functional", epsilon=3.0, split=(0.25, 0.25, 0.5), fc_units=10, pretrain_epochs=1,
                       batch_size=100, seed=0)
    model = cdbn.fit(x, y)
    assert [r.component for r in cdbn.ledger.releases] == ["crbm_layer_1", "crbm_layer_2", "random_fc", "output_layer"]
    assert cdbn.ledger.epsilon_claimed() == pytest.approx(3.0)
    assert cdbn.ledger.epsilon_provable() == pytest.approx(3.0)
    assert model.output_shape == (None, 10)
    path = tmp_path / "pcdbn.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded(x[:4]).numpy(), model(x[:4]).numpy(), atol=1e-5)
    with pytest.raises(RuntimeError, match="already spent"):
        cdbn.fit(x, y)


def test_builder_reference_and_baselines(mnist):
    x, y = mnist
    ref = PrivateCDBN([ConvRBM(4, 5, degree=7, normalizer="batch_max")], mode="reference", epsilon=0.5, split="same",
                      pretrain_epochs=1, head_epochs=1, batch_size=100, seed=0)
    ref.fit(x, y)
    assert ref.epsilon_claimed() == pytest.approx(1.0)  # same ε for both components (code behaviour)
    assert ref.epsilon_provable() is None and ref.ledger.is_reproduction
    base = PrivateCDBN([ConvRBM(4, 5, degree=3)], mode="noiseless", pretrain_epochs=1, batch_size=100, seed=0)
    base.fit(x, y)
    assert base.epsilon_provable() is None and len(base.ledger) == 0
    assert "non-private" in base.report()["note"]


def test_builder_seed_reproducible(mnist):
    x, y = mnist
    preds = []
    for _ in range(2):
        cdbn = PrivateCDBN([ConvRBM(2, 5, degree=3)], mode="noiseless", pretrain_epochs=1, batch_size=100, seed=4)
        preds.append(cdbn.fit(x[:100], y[:100])(x[:8]).numpy())
    np.testing.assert_allclose(preds[0], preds[1], atol=1e-5)


@pytest.mark.slow
def test_mnist_smoke_functional_above_chance_at_eps8():
    ds = tfdpmech.data.load("mnist_sample")
    cdbn = PrivateCDBN([ConvRBM(8, 5, approx="chebyshev_sigmoid", degree=1)], mode="functional", epsilon=8.0,
                       split=(0.1, 0.9), fc_units=10, fc_scale=16.0, pretrain_epochs=1, batch_size=200,
                       head_ridge=1e-2, seed=0)
    model = cdbn.fit(ds.x_train, ds.y_train)
    acc = np.mean(np.argmax(model.predict(ds.x_test, verbose=0), 1) == np.argmax(ds.y_test, 1))
    assert acc > 0.2  # chance is 0.1; measured 0.32 with this seed on 8,000 records
    assert cdbn.epsilon_provable() == pytest.approx(8.0)
