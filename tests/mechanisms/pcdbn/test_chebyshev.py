"""Chebyshev utilities for pCDBN (Phan, Wu, Dou: §2.3 Eqs. 9–11, the L = 7 polynomial printed in §3.1 as an
instance of Eq. 14, and the error bounds of §3.4, Lemma 3, Eqs. 19–21)."""


import numpy as np
import numpy.polynomial.polynomial as P
import pytest
import tensorflow as tf

from tfdpmech.mechanisms.pcdbn import chebyshev as cheb


# --- the polynomial printed in pCDBN §3.1 ---------------------------------------------------
def test_paper_polynomial_values_and_derivative():
    alpha = cheb.PAPER_SMOOTHSTEP[7]
    np.testing.assert_allclose(alpha, np.array([16, 35, 0, -35, 0, 21, 0, -5]) / 32)
    np.testing.assert_allclose(cheb.poly_eval_np([-1.0, 0.0, 1.0], alpha), [0.0, 0.5, 1.0], atol=1e-15)
    x = np.linspace(-1, 1, 101)
    np.testing.assert_allclose(P.polyval(x, P.polyder(alpha)), 35 / 32 * (1 - x**2) ** 3, atol=1e-12)
    assert np.abs(alpha).sum() == pytest.approx(3.5)
    assert cheb.sup_error(alpha) == pytest.approx(0.322, abs=1e-3)  # not Eq. 10 truncated: far from σ


@pytest.mark.parametrize("degree", [2, 3, 5, 7])
def test_smoothstep_presets_reach_zero_and_one(degree):
    alpha = cheb.approximation_alpha("paper_smoothstep", degree)
    np.testing.assert_allclose(cheb.poly_eval_np([-1.0, 1.0], alpha), [0.0, 1.0], atol=1e-12)
    if degree != 2:
        assert cheb.poly_eval_np(0.0, alpha) == pytest.approx(0.5)  # the code's broken L = 5 gives 5


def test_no_broken_degree5_preset():
    alpha = cheb.PAPER_SMOOTHSTEP[5]
    np.testing.assert_allclose(alpha * 16, [8, 15, 0, -10, 0, 3])


# --- Chebyshev coefficients of σ (pCDBN Eq. 10) ---------------------------------------------
def test_sigmoid_chebyshev_coefficients_match_the_paper():
    A = cheb.chebyshev_coefficients(cheb.sigmoid, 11, n_nodes=20000)
    expected = {0: 1.0, 1: 0.2355714139, 3: -4.6200917e-3, 5: 1.0983984e-4, 7: -2.6457061e-6,
                9: 6.3811598e-8, 11: -1.5392947e-9}
    for k, v in expected.items():
        assert A[k] == pytest.approx(v, abs=1e-8, rel=1e-7)
    np.testing.assert_allclose(A[2::2], 0.0, atol=1e-12)  # σ − ½ is odd


@pytest.mark.parametrize("degree,alpha,err", [
    (1, [0.5, 0.2355714], 4.68e-3),
    (3, [0.5, 0.2494317, 0, -0.0184804], 1.12e-4),
    (5, [0.5, 0.2499809, 0, -0.0206772, 0, 0.00175744], 2.70e-6),
    (7, [0.5, 0.2499994, 0, -0.0208253, 0, 0.00205376, 0, -0.000169325], 6.53e-8),
])
def test_truncations_in_monomial_form(degree, alpha, err):
    got = cheb.sigmoid_chebyshev_alpha(degree)
    np.testing.assert_allclose(got, alpha, atol=1e-7)
    assert cheb.sup_error(got) == pytest.approx(err, rel=0.01)
    assert cheb.approximation_alpha("chebyshev_sigmoid", degree) == pytest.approx(got)


def test_chebyshev_to_monomial_halves_a0():
    np.testing.assert_allclose(cheb.chebyshev_to_monomial([2.0, 0.0, 1.0]), [0.0, 0.0, 2.0])  # ½·2 + T2 = 2x²


def test_any_function_by_quadrature():
    A = cheb.chebyshev_coefficients(np.tanh, 9)
    alpha = cheb.chebyshev_to_monomial(A)
    assert cheb.sup_error(alpha, np.tanh) < 1e-4


def test_taylor_and_piecewise():
    np.testing.assert_allclose(cheb.approximation_alpha("taylor", 5), [0.5, 0.25, 0, -1 / 48, 0, 1 / 480])
    np.testing.assert_allclose(cheb.approximation_alpha("piecewise", 1), [0.5, 0.2356])


# --- error bounds (pCDBN §3.4, Lemma 3, Eqs. 19–21) -----------------------------------------
def test_error_bounds_table():
    for L, factor, lower in [(2, 4.281, 3.629e-3), (4, 4.562, 8.627e-5), (6, 4.726, 2.078e-6), (8, 4.843, 5.012e-8)]:
        b = cheb.chebyshev_error_bounds(L)
        assert b["lebesgue_factor"] == pytest.approx(factor, abs=1e-3)
        assert b["lower_bound"] == pytest.approx(lower, rel=1e-3)
        assert b["lower_bound"] <= b["sup_error_chebyshev"] <= b["upper_bound"]
    assert cheb.chebyshev_error_bounds(7)["lower_bound"] < 1e-15  # odd L: trivial lower bound
    assert cheb.chebyshev_error_bounds(7)["sup_error_paper_smoothstep"] == pytest.approx(0.322, abs=1e-3)


# --- Horner in TensorFlow --------------------------------------------------------------------
def test_poly_eval_tf_matches_numpy_and_clips():
    alpha = cheb.PAPER_SMOOTHSTEP[7]
    x = np.linspace(-1, 1, 41).astype(np.float32)
    np.testing.assert_allclose(cheb.poly_eval(tf.constant(x), alpha).numpy(), cheb.poly_eval_np(x, alpha), atol=1e-6)
    out = cheb.poly_eval(tf.constant([-3.0, 1.1, 50.0]), alpha).numpy()
    np.testing.assert_allclose(out, [0.0, 1.0, 1.0], atol=1e-6)  # X clipped to [−1, 1]
    raw = cheb.poly_eval(tf.constant([1.1]), alpha, clip_input=False).numpy()
    assert raw[0] < 1.0  # the smoothstep turns down outside [−1, 1]
    assert cheb.poly_eval(tf.constant([1.1]), alpha, clip_input=False, clip_output=True).numpy()[0] <= 1.0


# --- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize("degree", [0, -1])
def test_degree_below_one_refused(degree):
    with pytest.raises(ValueError, match="degree"):
        cheb.chebyshev_coefficients(cheb.sigmoid, degree)
    with pytest.raises(ValueError, match="degree"):
        cheb.approximation_alpha("chebyshev_sigmoid", degree)


def test_bad_approx_and_degree_type():
    with pytest.raises(ValueError, match="approx"):
        cheb.approximation_alpha("softplus", 3)
    with pytest.raises(ValueError, match="paper_smoothstep"):
        cheb.approximation_alpha("paper_smoothstep", 4)
    with pytest.raises(TypeError, match="degree"):
        cheb.approximation_alpha("chebyshev_sigmoid", 2.5)
    with pytest.raises(ValueError, match="piecewise"):
        cheb.approximation_alpha("piecewise", 3)
