"""Constants of L2-regularised logistic regression from public quantities (G, β, Δ, D)."""

import math

import numpy as np
import pytest

from tfdpmech.mechanisms.input_perturbation import erm_optimum, logistic_constants

from .helpers import synthetic


# --- constants ------------------------------------------------------------------------------------------
def test_logistic_constants():
    k = logistic_constants(0.01, 1.0)
    assert k.theta_bound == pytest.approx(11.774100, rel=1e-7)
    assert k.G == pytest.approx(1.1177410, rel=1e-7)
    assert k.beta == pytest.approx(0.26, rel=1e-12)
    assert k.strong_convexity == 0.01 and k.phi2 == 0.25 and k.keras_l2 == 0.005
    # the Keras convention: L2(0.005) adds 0.005·‖w‖² = (0.01/2)‖w‖²
    assert logistic_constants(0.005, l2_convention="keras") == k
    assert logistic_constants(0.01, g_convention="data_term").G == 1.0
    k2 = logistic_constants(0.01, 2.0)
    assert k2.G == pytest.approx(2.0 + 0.01 * k.theta_bound) and k2.beta == pytest.approx(1.01)
    m = logistic_constants(0.01, num_classes=3)
    assert m.theta_bound == pytest.approx(math.sqrt(2 * math.log(3) / 0.01))
    assert m.G == pytest.approx(math.sqrt(2) + 0.01 * m.theta_bound) and m.beta == pytest.approx(0.51)
    for bad in (dict(l2=0), dict(l2=-1), dict(l2=0.01, feature_norm_bound=0), dict(l2=0.01, num_classes=1),
                dict(l2=0.01, g_convention="x"), dict(l2=0.01, l2_convention="x")):
        with pytest.raises(ValueError):
            logistic_constants(**bad)


def test_theta_bound_holds_at_the_optimum():
    # D = sqrt(2 ln M / λ) bounds the regularised optimum for any data, noisy data included
    x, y = synthetic(300, 4, seed=3, scale=50.0)
    for num_classes, labels in ((2, y), (3, (x[:, 0] > 0).astype(int) + (x[:, 1] > 0.3))):
        theta, _ = erm_optimum(x * 5.0, labels, 0.01, num_classes)  # even beyond the unit ball
        assert np.linalg.norm(theta) <= logistic_constants(0.01, num_classes=num_classes).theta_bound
