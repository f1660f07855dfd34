"""The paper's calibration of input perturbation (Theorems 1 / 3, Eqs. 9 / 12) and its accountant."""

import math

import pytest

from tfdpmech.mechanisms.input_perturbation import (
    InputPerturbation,
    epsilon_paper_accountant,
    paper_constant,
    sigma_input_perturbation,
)


ANCHOR = dict(epsilon=0.1, delta=1e-5, n=1000, T=50, G=1.0, curvature=0.01)


def args(a):
    return (a["epsilon"], a["delta"], a["n"], a["T"], a["G"], a["curvature"])


# --- calibration vector ------------------------------------------------------------------------------
def test_calibration_vector():
    assert paper_constant(0.1, 1e-5) == pytest.approx(8.0347436, rel=1e-7)
    sigma = sigma_input_perturbation(*args(ANCHOR))
    assert sigma**2 == pytest.approx(4.6298000, rel=1e-7)
    assert sigma == pytest.approx(2.1516970, rel=1e-7)
    s1 = sigma_input_perturbation(*args(ANCHOR), c=1.0)
    assert s1**2 == pytest.approx(0.57622250, rel=1e-7)
    assert s1 == pytest.approx(0.75909321, rel=1e-7)
    # the accountant inverted at the optimal moment order: σ² = 2TG²/(n(n−1)κ√Δ·s²), s = √(ln(1/δ)+ε) − √ln(1/δ)
    s = math.sqrt(math.log(1e5) + 0.1) - math.sqrt(math.log(1e5))
    sigma_inv = math.sqrt(2 * 50 * 1.0 / (1000 * 999 * math.sqrt(0.01) * s**2))
    assert sigma_inv**2 == pytest.approx(4.6297783, rel=1e-7)
    assert epsilon_paper_accountant(sigma_inv, 1e-5, 1000, 50, 1.0, 0.01) == pytest.approx(0.1, rel=1e-9)
    eps_back = epsilon_paper_accountant(sigma, 1e-5, 1000, 50, 1.0, 0.01)
    assert eps_back == pytest.approx(0.0999998, abs=1e-7) and eps_back <= 0.1
    literal = sigma_input_perturbation(*args(ANCHOR), condition="pl", paper_literal_pl=True)
    assert literal**2 == pytest.approx(0.46298000, rel=1e-7)
    # strong convexity implies PL with μ = Δ: keeping √μ in Kang et al. Eq. 12 (Eq. 51 before it is
    # absorbed into the constant) gives the same σ as Theorem 1
    assert sigma_input_perturbation(*args(ANCHOR), condition="pl") == pytest.approx(sigma, rel=1e-12)
    assert epsilon_paper_accountant(sigma, 1e-5, 1000, 0, 1.0, 0.01) == 0.0
    with pytest.raises(ValueError, match="paper_literal_pl"):
        sigma_input_perturbation(*args(ANCHOR), paper_literal_pl=True)


def test_calibration_rejects_bad_parameters():
    a = dict(ANCHOR)
    with pytest.raises(ValueError, match="n must be >= 2"):
        sigma_input_perturbation(a["epsilon"], a["delta"], 1, 50, 1.0, 0.01)
    for delta in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="delta"):
            sigma_input_perturbation(0.1, delta, 1000, 50, 1.0, 0.01)
    for eps in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="epsilon"):
            sigma_input_perturbation(eps, 1e-5, 1000, 50, 1.0, 0.01)
    with pytest.raises(TypeError, match="epsilon"):
        sigma_input_perturbation("0.1", 1e-5, 1000, 50, 1.0, 0.01)
    for bad in (dict(G=0), dict(curvature=-1), dict(c=0), dict(kappa=0), dict(T=0)):
        kw = dict(ANCHOR)
        kw.update({k: v for k, v in bad.items() if k in kw})
        with pytest.raises(ValueError):
            sigma_input_perturbation(*args(kw), **{k: v for k, v in bad.items() if k not in kw})
    with pytest.raises(ValueError, match="epsilon"):
        InputPerturbation(0, 1e-5, 10)
    with pytest.raises(ValueError, match="delta"):
        InputPerturbation(0.1, 1.0, 10)


# --- monotonicity ---------------------------------------------------------------------------------------
def test_monotonicity():
    base = sigma_input_perturbation(*args(ANCHOR))

    def with_(**kw):
        a = dict(ANCHOR, **{k: v for k, v in kw.items() if k in ANCHOR})
        return sigma_input_perturbation(*args(a), kappa=kw.get("kappa", 1.0))

    assert with_(epsilon=0.2) < base and with_(n=2000) < base and with_(curvature=0.1) < base
    assert with_(kappa=2.0) < base
    assert with_(T=100) > base and with_(G=2.0) > base and with_(delta=1e-8) > base
    eps = [epsilon_paper_accountant(base, 1e-5, 1000, t, 1.0, 0.01) for t in range(0, 60, 5)]
    assert all(a < b for a, b in zip(eps, eps[1:]))
