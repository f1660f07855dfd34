"""pCDBN's monomial algebra: tables, counts and the expansion against direct evaluation of the energy."""

import math

import numpy as np
import pytest
import tensorflow as tf

import tfdpmech
from tfdpmech.mechanisms.pcdbn.conv_rbm import ConvRBM
from tfdpmech.mechanisms.pcdbn import energy_orders, monomial_count, monomial_table, multinomial_factors
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


# --- monomial algebra and the expansion of pCDBN Eq. 14 ------------------------------------
def test_monomial_tables_and_counts():
    t = monomial_table(4, 3)
    assert len(t) == math.comb(6, 3) and np.all(np.diff(t, axis=1) >= 0)
    np.testing.assert_allclose(multinomial_factors(np.array([[0, 0, 1], [0, 1, 2], [2, 2, 2]])), [3, 6, 1])
    assert energy_orders(tfdpmech.mechanisms.pcdbn.chebyshev.PAPER_SMOOTHSTEP[7]) == [1, 2, 4, 6, 8]
    assert monomial_count(26, tfdpmech.mechanisms.pcdbn.chebyshev.PAPER_SMOOTHSTEP[3]) == 26 + 351 + 23751  # C(d+m−1, m), m ∈ {1, 2, 4}


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
