"""The one σ search: the smallest σ with ε(σ) <= target, for any decreasing ε(σ)."""

import math

import pytest

from tfdpmech.accounting.sigma_search import NotCertifiableError, smallest_sigma


def _refuse(reached):
    return NotCertifiableError(f"not certifiable (smallest ε reached {reached:.4g})")


@pytest.mark.parametrize("target", [0.01, 0.3, 1.0, 7.5, 4000.0])
def test_finds_the_root_of_a_known_curve_on_its_certified_side(target):
    def eps_of(sigma):
        return 2.0 / sigma  # root at σ = 2 / target

    sigma = smallest_sigma(eps_of, target, max_sigma=1e6, max_shrinks=60, tol=1e-9, relative_tol=0.25,
                           not_certifiable=_refuse)
    assert eps_of(sigma) <= target
    assert sigma == pytest.approx(2.0 / target, rel=1e-5)


def test_a_bracket_that_starts_elsewhere_and_grows_by_four_finds_the_same_root():
    sigma = smallest_sigma(lambda s: 3.0 / s, 0.5, lower=1e-3, factor=4.0, max_sigma=1e6, max_shrinks=60,
                           relative_tol=1e-9, not_certifiable=_refuse)
    assert 3.0 / sigma <= 0.5
    assert sigma == pytest.approx(6.0, rel=1e-6)


def test_gives_up_past_max_sigma_with_the_smallest_epsilon_reached():
    with pytest.raises(NotCertifiableError, match=r"reached 0\.5"):  # ε levels off at 0.5 + 1/σ
        smallest_sigma(lambda s: 0.5 + 1.0 / s, 0.4, max_sigma=2.0 ** 40, max_shrinks=60, relative_tol=0.25,
                       not_certifiable=_refuse)


def test_gives_up_as_soon_as_the_bound_levels_off_when_asked():
    calls = []

    def eps_of(sigma):
        calls.append(sigma)
        return 0.5 + 1e-4 / sigma

    with pytest.raises(NotCertifiableError):
        smallest_sigma(eps_of, 0.4, max_sigma=2.0 ** 60, max_shrinks=60, relative_tol=0.5, stop_on_level_off=True,
                       not_certifiable=_refuse)
    assert max(calls) == 2.0  # one growth, then the level-off check stops the search


def test_numerical_errors_of_the_accountant_count_as_infinite_epsilon():
    def eps_of(sigma):
        if sigma >= 4.0:
            raise ValueError("the accountant's numerics break down")
        return 1.0 / sigma

    with pytest.raises(NotCertifiableError, match=r"reached 0\.5"):  # σ = 2 is the last finite ε
        smallest_sigma(eps_of, 0.1, max_sigma=1e3, max_shrinks=60, relative_tol=0.25, not_certifiable=_refuse)


def test_a_target_met_with_almost_no_noise_returns_the_last_certified_sigma():
    sigma = smallest_sigma(lambda s: 0.0, 1.0, max_sigma=1e6, max_shrinks=10, relative_tol=0.25,
                           not_certifiable=_refuse)
    assert sigma == 2.0 ** -10
    assert not math.isnan(sigma)
