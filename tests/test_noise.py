"""Tests for tfdpmech.noise: Laplace/Gaussian/exponential-mechanism samplers and fingerprints.

Statistical tests use fixed seeds, so each runs on one fixed sample: they either always pass or
always fail. Thresholds (p > 1e-4 for the right distribution, p < 1e-6 for a wrong one) leave room
for a change of RNG stream between numpy/TensorFlow versions. Every goodness-of-fit test is paired
with a test that the same sample *rejects* a wrong scale, so a test without power would show.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as st
import tensorflow as tf

from tfdpmech.noise import (
    gaussian,
    laplace,
    make_rng,
    tf_laplace,
)
from tfdpmech.released_data import array_fingerprint

P_OK = 1e-4  # a correct sampler passes with probability 1 - 1e-4 on a fresh stream
P_BAD = 1e-6  # a 10 % scale error must be detected


# ------------------------------------------------------------------------------------------------
# make_rng
# ------------------------------------------------------------------------------------------------


def test_make_rng_seeded_is_reproducible():
    a = laplace(1.0, 50, make_rng(7))
    b = laplace(1.0, 50, make_rng(7))
    np.testing.assert_array_equal(a, b)
    c = laplace(1.0, 50, make_rng(np.int64(7)))
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, laplace(1.0, 50, make_rng(8)))


def test_make_rng_os_entropy_differs():
    a = laplace(1.0, 50, make_rng(None))
    b = laplace(1.0, 50, make_rng())
    assert not np.array_equal(a, b)


def test_make_rng_passes_generators_through_and_rejects_bad_seeds():
    g = np.random.default_rng(1)
    assert make_rng(g) is g
    for bad in ("1", 1.5, True, [1]):
        with pytest.raises(TypeError, match="seed must be None, an int or a numpy Generator"):
            make_rng(bad)


# ------------------------------------------------------------------------------------------------
# laplace (host, float64)
# ------------------------------------------------------------------------------------------------


def test_laplace_matches_scipy_laplace_with_the_given_scale():
    scale = 2.5
    x = laplace(scale, 50_000, make_rng(2024))
    assert x.dtype == np.float64 and x.shape == (50_000,)
    assert st.kstest(x, st.laplace(loc=0.0, scale=scale).cdf).pvalue > P_OK
    # power: a 10 % error in the scale (either way) is rejected on the same sample
    assert st.kstest(x, st.laplace(scale=scale * 1.1).cdf).pvalue < P_BAD
    assert st.kstest(x, st.laplace(scale=scale / 1.1).cdf).pvalue < P_BAD
    # b is the scale, not ε or the variance: Lap(b) has density exp(−|x|/b)/(2b), Var = 2 b²
    assert st.kstest(x, st.laplace(scale=np.sqrt(scale)).cdf).pvalue < P_BAD


def test_laplace_mean_abs_is_the_scale_and_mean_is_zero():
    scale = 1.5
    x = laplace(scale, 200_000, make_rng(7))
    # E|X| = b and sd(|X|) = b: standard error 0.0022 b, tolerance ~9 standard errors
    assert abs(np.abs(x).mean() / scale - 1.0) < 0.02
    # E X = 0, sd = sqrt(2) b: standard error 0.0032 b
    assert abs(x.mean() / scale) < 0.02
    assert abs(x.var() / (2 * scale**2) - 1.0) < 0.05


def test_laplace_broadcasts_a_per_feature_scale():
    scales = np.array([0.0, 0.5, 4.0])
    x = laplace(scales, (50_000, 3), make_rng(3))
    assert x.shape == (50_000, 3)
    np.testing.assert_array_equal(x[:, 0], 0.0)  # scale 0 means no noise at all
    mean_abs = np.abs(x).mean(axis=0)
    np.testing.assert_allclose(mean_abs[1:], scales[1:], rtol=0.03)


def test_laplace_rejects_bad_scales():
    rng = make_rng(0)
    with pytest.raises(ValueError, match="scale must be >= 0"):
        laplace(-1.0, 3, rng)
    with pytest.raises(ValueError, match="scale contains 1 NaN"):
        laplace(np.nan, 3, rng)
    with pytest.raises(ValueError, match="scale contains 1 NaN or infinite"):
        laplace(np.array([1.0, np.inf]), (2, 2), rng)


def test_gaussian_matches_normal_with_given_sigma():
    x = gaussian(0.7, 50_000, make_rng(3))
    assert st.kstest(x, st.norm(scale=0.7).cdf).pvalue > P_OK
    assert st.kstest(x, st.norm(scale=0.77).cdf).pvalue < P_BAD
    with pytest.raises(ValueError, match="sigma must be >= 0"):
        gaussian(-0.1, 3, make_rng(0))


# ------------------------------------------------------------------------------------------------
# tf_laplace (per-call noise inside a model)
# ------------------------------------------------------------------------------------------------


def test_tf_laplace_matches_scipy_laplace():
    g = tf.random.Generator.from_seed(42)
    y = tf_laplace((50_000,), 1.5, g)
    assert y.dtype == tf.float32 and y.shape == (50_000,)
    y = y.numpy().astype(np.float64)
    assert np.all(np.isfinite(y))
    assert st.kstest(y, st.laplace(scale=1.5).cdf).pvalue > P_OK
    assert st.kstest(y, st.laplace(scale=1.65).cdf).pvalue < P_BAD
    assert abs(np.abs(y).mean() / 1.5 - 1.0) < 0.03


def test_tf_laplace_per_element_scale_and_dtype():
    g = tf.random.Generator.from_seed(5)
    scale = tf.constant([[0.0], [1.0], [3.0]])  # broadcast over 4000 columns
    y = tf_laplace((3, 4000), scale, g, dtype=tf.float64)
    assert y.dtype == tf.float64
    y = y.numpy()
    np.testing.assert_array_equal(y[0], 0.0)
    np.testing.assert_allclose(np.abs(y[1:]).mean(axis=1), [1.0, 3.0], rtol=0.06)


def test_tf_laplace_successive_calls_in_tf_function_differ():
    g = tf.random.Generator.from_seed(1)

    @tf.function
    def draw():
        return tf_laplace((16,), 1.0, g)

    draws = [draw().numpy() for _ in range(4)]
    assert draw.experimental_get_tracing_count() == 1  # the same graph runs each time
    for i in range(4):
        assert np.count_nonzero(draws[i]) > 0
        for j in range(i + 1, 4):
            # per-call noise must never repeat (a stateless op with a fixed seed would)
            assert not np.any(draws[i] == draws[j])


def test_tf_laplace_two_draws_inside_one_tf_function_differ():
    g = tf.random.Generator.from_seed(2)

    @tf.function
    def two():
        return tf_laplace((8,), 1.0, g), tf_laplace((8,), 1.0, g)

    a, b = two()
    assert not np.any(a.numpy() == b.numpy())


def test_tf_laplace_seeded_generators_reproduce_and_entropy_differs():
    a = tf_laplace((32,), 1.0, tf.random.Generator.from_seed(9)).numpy()
    b = tf_laplace((32,), 1.0, tf.random.Generator.from_seed(9)).numpy()
    np.testing.assert_array_equal(a, b)
    c = tf_laplace((32,), 1.0, tf.random.Generator.from_non_deterministic_state()).numpy()
    d = tf_laplace((32,), 1.0, tf.random.Generator.from_non_deterministic_state()).numpy()
    assert not np.array_equal(c, d)


# ------------------------------------------------------------------------------------------------
# array_fingerprint
# ------------------------------------------------------------------------------------------------


def test_array_fingerprint_is_stable():
    x = laplace(1.0, (4, 5), make_rng(0))
    fp = array_fingerprint(x)
    assert isinstance(fp, str) and len(fp) == 16
    int(fp, 16)  # hexadecimal
    assert array_fingerprint(x) == fp
    assert array_fingerprint(x.copy()) == fp
    assert array_fingerprint(laplace(1.0, (4, 5), make_rng(0))) == fp  # same seed, same noise
    # memory layout does not matter, only the values
    xt = np.asfortranarray(x)
    assert array_fingerprint(xt) == fp


def test_array_fingerprint_changes_with_values_shape_and_dtype():
    x = laplace(1.0, (4, 5), make_rng(0))
    fp = array_fingerprint(x)
    y = x.copy()
    y[2, 3] = np.nextafter(y[2, 3], np.inf)  # one ulp in one entry
    assert array_fingerprint(y) != fp
    assert array_fingerprint(x.reshape(5, 4)) != fp  # same bytes, other shape
    assert array_fingerprint(x.astype(np.float32)) != fp
    assert array_fingerprint(laplace(1.0, (4, 5), make_rng(1))) != fp
