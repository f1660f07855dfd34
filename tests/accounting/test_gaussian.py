"""Tests for tfdpmech.accounting.gaussian: one Gaussian mechanism's ε ↔ σ with dp_accounting."""

import math

import pytest

from tfdpmech.accounting.gaussian import gaussian_epsilon, local_gaussian_epsilon, sigma_local_gaussian


def test_local_gaussian_calibration_is_exact_and_scales():
    sigma = sigma_local_gaussian(1.0, 1e-5, 1.0)  # exact privacy curve of one Gaussian mechanism
    eps = local_gaussian_epsilon(sigma, 1e-5, 1.0)
    assert eps <= 1.0 and eps == pytest.approx(1.0, rel=1e-4)
    assert sigma_local_gaussian(1.0, 1e-5, 2.0) == pytest.approx(2 * sigma, rel=1e-6)  # scales with R
    assert sigma_local_gaussian(0.5, 1e-5) > sigma and sigma_local_gaussian(1.0, 1e-8) > sigma
    # exact, so tighter than RDP, itself tighter than the classic 2R·sqrt(2 ln(1.25/δ))/ε; PLD agrees
    assert sigma < sigma_local_gaussian(1.0, 1e-5, accountant="rdp") < 2 * math.sqrt(2 * math.log(1.25 / 1e-5))
    assert local_gaussian_epsilon(sigma, 1e-5, accountant="pld") == pytest.approx(1.0, rel=0.02)
    assert local_gaussian_epsilon(sigma, 1e-5, accountant="rdp") > 1.0
    # small ε at small δ: RDP's bound levels off at ln(1/δ)/(max order) and cannot certify it
    with pytest.raises(ValueError, match="cannot certify"):
        sigma_local_gaussian(0.01, 1 / 20000**2, accountant="rdp")
    tiny = sigma_local_gaussian(0.01, 1 / 20000**2)
    assert 800 < tiny < 900 and local_gaussian_epsilon(tiny, 1 / 20000**2) <= 0.01 + 1e-9


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
@pytest.mark.parametrize("epsilon", [0.5, 8.0])
def test_accountant_calibration_starts_at_the_exact_sigma_and_certifies_the_target(accountant, epsilon):
    """A large ε needs little noise; the search never evaluates an accountant below the exact σ (a PLD grid
    there would not fit in memory) and returns a σ at most a few per cent above it that meets ε."""
    exact = sigma_local_gaussian(epsilon, 1e-5)
    sigma = sigma_local_gaussian(epsilon, 1e-5, accountant=accountant)
    assert exact <= sigma < (1.1 if accountant == "pld" else 1.6) * exact
    assert local_gaussian_epsilon(sigma, 1e-5, accountant=accountant) <= epsilon * (1 + 1e-9)


def test_gaussian_epsilon_of_the_classic_calibration():
    # σ = sqrt(2 ln(1.25/δ))/ε is (ε, δ)-DP for ε < 1 (Dwork & Roth, Thm. A.1): the exact ε is below ε
    for eps in (0.2, 0.5, 0.9):
        multiplier = math.sqrt(2 * math.log(1.25 / 1e-5)) / eps
        assert gaussian_epsilon(multiplier, 1e-5) < eps
    assert gaussian_epsilon(1.0, 1e-5) > gaussian_epsilon(2.0, 1e-5)  # more noise, smaller ε
    with pytest.raises(ValueError, match="accountant"):
        gaussian_epsilon(1.0, 1e-5, "moments")
    with pytest.raises(ValueError, match="multiplier"):
        gaussian_epsilon(0.0, 1e-5)
