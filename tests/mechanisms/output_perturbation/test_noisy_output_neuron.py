"""Tests for NoisyOutputNeuron (Lu et al. Algorithm 1 lines 9–12, Theorem 6, §5.3 "Privacy budget").

Statistical tests use fixed seeds (the draws are deterministic) and thresholds far from the
observed values, so they cannot flake.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

import tfdpmech  # noqa: F401
from tfdpmech.mechanisms.output_perturbation.noisy_output_neuron import NoisyOutputNeuron, noise_calibration

MNIST_DZ = 0.3577  # Lu et al. Table 6, MNIST Δz_T


def _recover(logits, probs):
    """Sampled neuron and η per row from softmax(z + mask·η): log p̂ − z is constant except at v."""
    d = np.log(np.asarray(probs, np.float64)) - np.asarray(logits, np.float64)
    med = np.median(d, axis=1, keepdims=True)
    v = np.argmax(np.abs(d - med), axis=1)
    eta = d[np.arange(len(d)), v] - med[:, 0]
    return v, eta, d - med


def test_rows_sum_to_one_and_shape_with_none_batch():
    layer = NoisyOutputNeuron(1.0, MNIST_DZ, 1.0, 10, seed=0, mode="reference")
    inp = keras.Input(shape=(10,))
    model = keras.Model(inp, layer(inp))
    z = np.random.default_rng(0).normal(size=(7, 10)).astype(np.float32)
    out = model.predict(z, verbose=0)
    assert out.shape == (7, 10)
    np.testing.assert_allclose(out.sum(1), 1.0, atol=1e-5)
    assert layer.compute_output_shape((None, 10)) == (None, 10)
    assert not layer.trainable_weights


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_exactly_one_logit_differs(noise):
    rng = np.random.default_rng(1)
    z = rng.normal(size=(500, 5)).astype(np.float32)
    probs = NoisyOutputNeuron(5.0, 1.0, 1.0, 5, noise=noise, seed=2, mode="reference")(z).numpy()
    _, _, dev = _recover(z, probs)
    changed = (np.abs(dev) > 1e-4).sum(axis=1)
    assert np.all(changed <= 1)  # never more than one logit
    assert np.mean(changed == 1) > 0.99  # and one unless |η| < 1e-4 happened to be drawn


def test_neuron_frequencies_match_exponential_mechanism_chi2():
    # ε_step = ε/(2C+1) = 0.1 (Laplace), Δp = 0.05 → sampling logits ε_s·p/(2Δp) = p
    p = np.array([0.7, 0.2, 0.1])
    z = np.tile(np.log(p).astype(np.float32), (30_000, 1))
    layer = NoisyOutputNeuron(0.7, 0.01, 0.05, 3, noise="laplace", seed=3, mode="reference")
    assert layer.epsilon_sampling == pytest.approx(0.1)
    v, _, _ = _recover(z, layer(z).numpy())
    counts = np.bincount(v, minlength=3)
    expected = np.exp(p) / np.exp(p).sum() * len(v)
    assert stats.chisquare(counts, expected).pvalue > 1e-3
    assert stats.chisquare(counts, np.full(3, len(v) / 3)).pvalue < 1e-12  # the test has power


@pytest.mark.parametrize("noise, scale", [("laplace", 7.5117), ("gaussian", 2.2904)])
def test_noise_distribution_matches_table_scales_ks(noise, scale):
    layer = NoisyOutputNeuron(1.0, MNIST_DZ, 1.0, 10, noise=noise, seed=4, mode="reference")
    assert layer.noise_scale == pytest.approx(scale, rel=1e-3)
    z = np.zeros((5000, 10), np.float32)
    _, eta, _ = _recover(z, layer(z).numpy())
    dist = stats.laplace(scale=layer.noise_scale) if noise == "laplace" else stats.norm(scale=layer.noise_scale)
    assert stats.kstest(eta, dist.cdf).pvalue > 1e-3
    wrong = stats.laplace(scale=2 * layer.noise_scale) if noise == "laplace" else stats.norm(scale=2 * layer.noise_scale)
    assert stats.kstest(eta, wrong.cdf).pvalue < 1e-12


def test_budget_split_per_query():
    c = noise_calibration(2.1, 1.0, 10, noise="laplace", mode="reference")
    assert c["epsilon_step"] == pytest.approx(0.1) and c["noise_scale"] == pytest.approx(10.0)
    g = noise_calibration(3.0, 1.0, 2, mode="reference")
    assert g["epsilon_step"] == pytest.approx(1.0)  # √(4·2+1) = 3
    code = noise_calibration(1.0, 1.0, 2, gaussian_split="reference_code", mode="reference")
    assert code["epsilon_step"] == pytest.approx(1 / 3.8284, rel=1e-4)
    layer = NoisyOutputNeuron(1.0, 0.5, 1.0, 10, gaussian_split="reference_code", mode="reference")
    assert layer.epsilon_step == pytest.approx(1 / (2 * math.sqrt(10) + 1))


def test_fresh_noise_every_call_also_inside_tf_function():
    layer = NoisyOutputNeuron(1.0, MNIST_DZ, 1.0, 10, seed=5, mode="reference")
    z = np.tile(np.linspace(-1, 1, 10, dtype=np.float32), (4, 1))
    a, b = layer(z).numpy(), layer(z).numpy()
    assert not np.allclose(a, b)
    assert not np.allclose(a[0], a[1])  # fresh noise on every row of one call
    fn = tf.function(lambda t: layer(t))
    c, d = fn(z).numpy(), fn(z).numpy()
    assert not np.allclose(c, d)
    inp = keras.Input(shape=(10,))
    model = keras.Model(inp, layer(inp))
    assert not np.allclose(model.predict(z, verbose=0), model.predict(z, verbose=0))


def test_seed_reproduces_and_none_differs():
    z = np.random.default_rng(6).normal(size=(3, 4)).astype(np.float32)
    a = NoisyOutputNeuron(1.0, 0.2, 1.0, 4, seed=11, mode="reference")(z).numpy()
    b = NoisyOutputNeuron(1.0, 0.2, 1.0, 4, seed=11, mode="reference")(z).numpy()
    np.testing.assert_array_equal(a, b)
    c = NoisyOutputNeuron(1.0, 0.2, 1.0, 4, mode="reference")(z).numpy()
    d = NoisyOutputNeuron(1.0, 0.2, 1.0, 4, mode="reference")(z).numpy()
    assert not np.allclose(c, d)


@pytest.mark.parametrize("mode", ["reference", "private"])
@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_epsilon_to_infinity_returns_softmax(mode, noise):
    z = np.random.default_rng(7).normal(size=(50, 6)).astype(np.float32)
    out = NoisyOutputNeuron(1e9, 0.3, 1.0, 6, noise=noise, mode=mode, seed=8)(z).numpy()
    np.testing.assert_allclose(out, tf.nn.softmax(z).numpy(), atol=1e-6)


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_epsilon_to_zero_agreement_is_one_half(noise):
    rng = np.random.default_rng(9)
    z = rng.normal(size=(4000, 10)).astype(np.float32) * 2
    out = NoisyOutputNeuron(1e-6, MNIST_DZ, 1.0, 10, noise=noise, seed=10, mode="reference")(z).numpy()
    agree = np.mean(np.argmax(out, 1) == np.argmax(z, 1))
    assert 0.45 < agree < 0.55


def test_private_mode_perturbs_every_logit_with_smaller_scale():
    layer = NoisyOutputNeuron(1.0, MNIST_DZ, 1.0, 10, mode="private", seed=12)
    single = NoisyOutputNeuron(1.0, MNIST_DZ, 1.0, 10, seed=12, mode="reference")
    assert layer.noise_scale == pytest.approx(math.sqrt(10) * MNIST_DZ)
    assert layer.noise_scale < single.noise_scale
    lap = NoisyOutputNeuron(1.0, MNIST_DZ, 1.0, 10, noise="laplace", mode="private")
    assert lap.noise_scale == pytest.approx(10 * MNIST_DZ)
    assert lap.noise_scale < NoisyOutputNeuron(1.0, MNIST_DZ, 1.0, 10, noise="laplace", mode="reference").noise_scale
    z = np.zeros((5000, 10), np.float32)
    d = np.log(layer(z).numpy().astype(np.float64))
    diff = d[:, 0] - d[:, 1]  # η_0 − η_1 ~ N(0, 2σ²)
    assert stats.kstest(diff, stats.norm(scale=math.sqrt(2) * layer.noise_scale).cdf).pvalue > 1e-3
    dev = np.abs(d - d.mean(axis=1, keepdims=True))
    assert np.mean((dev > 1e-4).sum(axis=1) >= 9) > 0.99  # every logit moved


def test_training_true_refused():
    layer = NoisyOutputNeuron(1.0, 0.2, 1.0, 3, mode="reference")
    with pytest.raises(ValueError, match="inference-only"):
        layer(np.zeros((2, 3), np.float32), training=True)
    inp = keras.Input(shape=(3,))
    model = keras.Model(inp, layer(inp))
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match="inference-only"):
        model.fit(np.zeros((4, 3), np.float32), np.zeros((4, 3), np.float32), verbose=0)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(epsilon_query=0.0), ValueError, "epsilon_query"),
    (dict(epsilon_query=-1.0), ValueError, "epsilon_query"),
    (dict(epsilon_query="1"), TypeError, "epsilon_query"),
    (dict(noise="cauchy"), ValueError, "noise"),
    (dict(mode="report_noisy_max"), ValueError, "mode"),
    (dict(gaussian_split="x"), ValueError, "gaussian_split"),
    (dict(delta_p=1.5), ValueError, "delta_p"),
    (dict(delta_z=0.0), ValueError, "delta_z"),
    (dict(num_classes=1), ValueError, "num_classes"),
])
def test_bad_arguments(kwargs, exc, match):
    args = dict(epsilon_query=1.0, delta_z=0.3, delta_p=1.0, num_classes=3)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        NoisyOutputNeuron(**args)


def test_wrong_number_of_logits_refused():
    with pytest.raises(ValueError, match="num_classes=3"):
        NoisyOutputNeuron(1.0, 0.3, 1.0, 3, mode="reference")(np.zeros((2, 4), np.float32))


def test_config_and_keras_file_round_trip(tmp_path):
    layer = NoisyOutputNeuron(0.5, 0.3, 0.8, 4, noise="laplace", mode="private", seed=3)
    clone = NoisyOutputNeuron.from_config(layer.get_config())
    assert (clone.noise_scale, clone.noise, clone.mode, clone.seed) == (layer.noise_scale, "laplace", "private", 3)
    inp = keras.Input(shape=(4,))
    model = keras.Model(inp, layer(keras.layers.Dense(4)(inp)))
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    noisy = [l for l in loaded.layers if isinstance(l, NoisyOutputNeuron)][0]
    assert noisy.noise_scale == layer.noise_scale
    x = np.ones((3, 4), np.float32)
    assert not np.allclose(loaded(x).numpy(), loaded(x).numpy())
