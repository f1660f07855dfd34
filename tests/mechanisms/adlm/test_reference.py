"""AdLM/ILM reference mode: every step of the authors' code path pinned to its numbers."""

import math

import numpy as np
import pytest
import tensorflow as tf

import tfdpmech
from tfdpmech import AdLM, ILM
from tfdpmech.mechanisms.adlm.allocation import UniformAllocation
from tfdpmech.mechanisms.adlm import reference as ar
from tfdpmech.mechanisms.adlm.networks import authors_mnist_network, lenet5_relevance_model

RNG = np.random.default_rng(0)


def tiny_data(n=40, classes=10, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 28, 28, 1)).astype(np.float32)
    y = np.eye(classes, dtype=np.float32)[rng.integers(0, classes, n)]
    return x, y


# --- step 4: the input noise ---------------------------------------------------------------------
def test_noise_scale_is_72_59_over_beta_at_the_codes_setting():
    assert ar.DELTA2_MNIST == 9800
    beta = np.array([[1.0, 2.0], [0.5, 1e-5]])
    scales = ar.input_noise_scales(beta, ar.DELTA2_MNIST, 0.075, 1800)
    np.testing.assert_allclose(scales * beta, 9800 / (1800 * 0.075))
    assert round(float(scales[0, 0]), 2) == 72.59


def test_noise_scale_rejects_zero_beta():
    with pytest.raises(ValueError, match="beta"):
        ar.input_noise_scales(np.zeros((2, 2)), 9800, 0.075, 1800)


def test_one_map_per_step_shared_by_the_batch_and_redrawn_next_step():
    gen = tf.random.Generator.from_seed(1)
    scales = tf.constant(np.full((28, 28), 0.5), tf.float32)
    x = tf.constant(RNG.random((6, 28, 28, 1)) * 0.1, tf.float32)
    m1 = ar.draw_noise_map(scales, gen)
    m2 = ar.draw_noise_map(scales, gen)
    assert m1.shape == (1, 28, 28, 1)
    d1 = (ar.perturb_inputs(x, m1) - x).numpy()
    # shared: every record of the batch gets the same noise (values small, so nothing clipped)
    assert np.abs(d1).max() < 10
    np.testing.assert_allclose(d1, np.broadcast_to(d1[:1], d1.shape), atol=1e-6)
    # redrawn: the next step's map differs
    assert np.mean(np.abs(m1.numpy() - m2.numpy())) > 0.1


def test_map_is_redrawn_inside_the_compiled_step():
    ref = ar.ILMReference(0.1, 0.2, 8, seed=3)
    ref.build()
    a, b = ref._draw().numpy(), ref._draw().numpy()
    assert not np.allclose(a, b)
    # the per-pixel spread follows the scales: Lap(b) has mean |x| = b
    many = np.stack([ref._draw().numpy() for _ in range(200)])
    np.testing.assert_allclose(np.mean(np.abs(many)), ref.scales.mean(), rtol=0.1)


def test_noisy_inputs_clipped_at_ten():
    x = tf.zeros((3, 28, 28, 1))
    noise = tf.constant(RNG.laplace(0, 1e4, (1, 28, 28, 1)), tf.float32)
    out = ar.perturb_inputs(x, noise).numpy()
    assert out.max() == 10.0 and out.min() == -10.0
    assert ar.NOISY_INPUT_CLIP == 10.0


# --- step 2/3: relevance, sharpening and floors -------------------------------------------------
def test_sharpening_is_the_fourth_power_of_min_max():
    r = np.array([[2.0, 3.0], [4.0, 6.0]])
    np.testing.assert_allclose(ar.sharpen(r), [[0.0, (1 / 4) ** 4], [(2 / 4) ** 4, 1.0]])
    with pytest.raises(ValueError, match="constant"):
        ar.sharpen(np.ones((3, 3)))


def test_budget_ratios_floor_r_and_beta_on_the_32_grid():
    r = np.full((32, 32), 1.0)
    r[0, 0] = -3.0  # negative noisy relevance: R floored at 1e-5
    r[5, 5] = 0.0
    beta = ar.budget_ratios_on_grid(r)
    total = 1022 * 1.0 + 2e-5
    assert beta[1, 1] == pytest.approx(1024 / total)
    assert beta[0, 0] == pytest.approx(1024 * 1e-5 / total)  # floored R, beta just above its floor
    assert beta.sum() == pytest.approx(1024, rel=1e-6)
    r[1, 1] = 1e4  # one dominant cell: the floored cells' beta falls below 1e-5 and is floored too
    beta = ar.budget_ratios_on_grid(r)
    assert beta[0, 0] == ar.R_LOWERBOUND and beta[5, 5] == ar.R_LOWERBOUND
    assert beta[2, 2] == pytest.approx(1024 / (1e4 + 1021 + 2e-5))
    inner = ar.inner_crop(beta)
    assert inner.shape == (28, 28)
    assert inner[3, 3] == beta[5, 5] and inner[0, 0] == beta[2, 2]  # _beta[i+2][j+2]


def test_relevance_noise_scale_follows_the_code():
    # 2*784/(eps1*D): the shipped file used eps1 = 0.075, D = 60,000
    assert ar.relevance_noise_scale(0.075, 60000) == pytest.approx(2 * 784 / (0.075 * 60000))


def test_code_range_and_padding():
    x = np.array([0.0, 0.5, 1.0], np.float32).reshape(1, 1, 3, 1)
    np.testing.assert_allclose(ar.to_code_range(x).ravel(), [-1, 0, 1])
    g = ar.pad_to_grid(np.zeros((2, 28, 28, 1), np.float32))
    assert g.shape == (2, 32, 32, 1) and g[0, 0, 0, 0] == -1 and g[0, 2, 2, 0] == 0


# --- step 5: the network --------------------------------------------------------------------------
def test_network_matches_the_code():
    m = authors_mnist_network(seed=0)
    names = [type(layer).__name__ for layer in m.layers]
    assert names == ["Conv2D", "MaxPooling2D", "Conv2D", "MaxPooling2D", "Flatten", "Dense",
                     "BatchStatisticsNormalization", "ReLU", "Dense"]
    assert m.get_layer("w_out").use_bias and m.get_layer("w_out").kernel.shape == (25, 10)
    assert np.allclose(m.get_layer("conv1").bias.numpy(), 0.1)
    assert np.abs(m.get_layer("conv1").kernel.numpy()).max() <= 0.2 + 1e-6  # truncated at 2 std


def test_batch_norm_uses_batch_statistics_at_test():
    m = authors_mnist_network(seed=0)
    x = tf.constant(RNG.random((8, 28, 28, 1)), tf.float32)
    a = m(x, training=False).numpy()
    x2 = tf.concat([x[:4], x[4:] * 0.0 - 1.0], axis=0)
    b = m(x2, training=False).numpy()
    # the first record's output depends on the other records of its batch, also at inference
    assert not np.allclose(a[0], b[0])
    bn = m.get_layer("batch_stat_norm")
    h = tf.random.normal((16, 25))
    out = bn(h, training=False).numpy()
    np.testing.assert_allclose(out.mean(0), 0, atol=1e-5)


# --- step 6: the loss -----------------------------------------------------------------------------
def test_delta3_is_1812_5():
    assert ar.loss_sensitivity_code(10, 25) == 1812.5


def test_taylor_terms_equal_the_codes_expression():
    z = tf.constant(RNG.normal(0, 2, (5, 10)), tf.float32)
    y = tf.one_hot(RNG.integers(0, 10, 5), 10)
    code = tf.nn.relu(z) - z * y + math.log(2.0) - 0.5 * tf.abs(z) + tf.square(z) / 8.0
    np.testing.assert_allclose(ar.taylor_terms(z, y).numpy(), code.numpy(), rtol=1e-5, atol=1e-5)


def test_weight_noise_term_counts_batch_times_classes():
    z = tf.zeros((4, 10))
    y = tf.one_hot([0, 1, 2, 3], 10)
    w = tf.Variable(tf.ones((25, 10)))
    noise = RNG.laplace(0, 1, (25, 10))
    with tf.GradientTape() as tape:
        loss = ar.reference_loss(z, y, w, noise, 1800)
    grad = tape.gradient(loss, w).numpy()
    np.testing.assert_allclose(grad, -4 * 10 * noise / 1800, rtol=1e-5)


def test_weight_noise_drawn_once_and_kept():
    ref = ar.ILMReference(0.1, 0.2, 8, seed=1)
    x, y = tiny_data(16)
    ref.fit(x, y, steps=2)
    before = ref.weight_noise.copy()
    assert before.shape == (25, 10)
    np.testing.assert_allclose(ref._noise_tf.numpy(), before.astype(np.float32))


# --- step 7 and the mode --------------------------------------------------------------------------
def test_next_batch_reshuffles_and_skips_the_rest():
    batches = list(ar.next_batch_indices(10, 4, 5, 0))
    assert all(len(b) == 4 for b in batches)
    assert len(set(np.concatenate(batches[:2]))) == 8  # one pass: 2 batches, 2 records skipped


def test_no_noise_at_test_and_one_batch():
    ref = ar.ILMReference(0.1, 0.2, 8, seed=1)
    x, y = tiny_data(24)
    ref.fit(x, y, steps=2)
    a, b = ref.predict_logits(x), ref.predict_logits(x)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a, ref.model(ar.to_code_range(x), training=False).numpy(), rtol=1e-5)
    assert ref.evaluate(x, y) == pytest.approx(np.mean(a.argmax(1) == y.argmax(1)))


def test_ledger_claims_the_papers_epsilon_and_proves_none():
    ref = ar.ILMReference(0.1, 0.2, 8, seed=1)
    x, y = tiny_data(16)
    hist = ref.fit(x, y, steps=3, x_test=x, y_test=y, eval_every=2)
    assert hist["step"] == [0, 2, 3] and not hist["diverged"]
    assert ref.ledger.epsilon_claimed() == pytest.approx(0.3)
    assert ref.ledger.epsilon_provable() is None
    assert all(ar.REFERENCE_REASON in r.basis and r.reproduction for r in ref.ledger.releases)
    with pytest.raises(ValueError, match="spent"):
        ref.fit(x, y, steps=1)


def test_adlm_reference_needs_relevance_before_spending():
    ref = ar.AdLMReference.from_total(0.3, 8, seed=0)
    assert (ref.eps1, ref.eps2, ref.eps3) == pytest.approx((0.075, 0.075, 0.15))
    x, y = tiny_data(16)
    with pytest.raises(ValueError, match="fit_relevance"):
        ref.fit(x, y, steps=1)
    assert len(ref.ledger) == 0


def test_bad_inputs_are_refused_before_spending():
    ref = ar.ILMReference(0.1, 0.2, 8, seed=0)
    x, y = tiny_data(16)
    with pytest.raises(ValueError, match="x"):
        ref.fit(x * 2.0 + 1.0, y, steps=1)
    with pytest.raises(ValueError, match="batch_size"):
        ar.ILMReference(0.1, 0.2, 64).fit(x, y, steps=1)
    with pytest.raises(ValueError, match="allocation"):
        ar.AdLMReference(0.1, 0.1, 0.1, 8, allocation="adaptive")
    assert len(ref.ledger) == 0


def test_relevance_step_on_a_tiny_public_model():
    x, y = tiny_data(40)
    model = lenet5_relevance_model(seed=0)
    ref = ar.AdLMReference(0.075, 0.075, 0.15, 8, seed=0)
    beta = ref.fit_relevance(model, x, samples=10)
    assert beta.shape == (28, 28) and np.all(beta >= ar.R_LOWERBOUND)
    rel = ref.ledger.releases[0]
    assert rel.component == "relevance" and rel.epsilon_provable is None
    assert rel.noise_scale == pytest.approx(2 * 784 / (0.075 * 40))


def test_a_given_allocation_sets_beta():
    ref = ar.AdLMReference(None, 0.1, 0.2, 8, allocation=UniformAllocation())
    np.testing.assert_array_equal(ref.ratios(), np.ones((28, 28)))


def test_the_reference_mode_is_its_own_class_and_the_proven_class_names_it():
    assert isinstance(AdLM(0.075, 0.075, 0.15, 8), AdLM) and AdLM.mode == "private"
    assert tfdpmech.AdLMReference is ar.AdLMReference and tfdpmech.ILMReference is ar.ILMReference
    assert ar.AdLMReference(0.075, 0.075, 0.15, 8).mode == "reference"
    with pytest.raises(ValueError, match=r"mode='reference'.*AdLMReference"):
        AdLM(0.075, 0.075, 0.15, 8, mode="reference")
    with pytest.raises(ValueError, match=r"mode='reference'.*ILMReference"):
        ILM.from_total(0.3, 8, mode="reference")
    with pytest.raises(ValueError, match="mode"):
        AdLM(0.075, 0.075, 0.15, 8, mode="authors")


def test_keras_epoch_hooks_every_pass():
    class Hooks:
        def __init__(self):
            self.calls = []

        def on_epoch_begin(self, epoch, logs=None):
            self.calls.append(("begin", epoch))

        def on_epoch_end(self, epoch, logs=None):
            self.calls.append(("end", epoch))

    hooks = Hooks()
    x, y = tiny_data(16)
    ar.ILMReference(0.1, 0.2, 8, seed=0).fit(x, y, steps=4, callbacks=[hooks])  # 2 steps per pass
    assert hooks.calls == [("begin", 0), ("end", 0), ("begin", 1), ("end", 1)]
