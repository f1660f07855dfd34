"""Group privacy from a record-level (ε, δ): (m·ε, δ·Σ_{i<m} e^{iε}), checked against the chain it comes from."""

import math

import pytest

from tfdpmech.accounting.group_privacy import group_epsilon_delta


def test_one_record_is_the_guarantee_itself():
    assert group_epsilon_delta(1.5, 1e-5, 1) == (1.5, 1e-5)


@pytest.mark.parametrize("eps,delta,m", [(1.0, 1e-5, 2), (3.0, 1e-5, 4), (0.5, 1e-6, 10), (0.0, 1e-5, 7)])
def test_the_group_guarantee_is_the_chain_of_m_one_record_steps(eps, delta, m):
    # chain: P0 <= e^eps P1 + delta, applied m times: delta_m = delta + e^eps * delta_{m-1}
    delta_m = 0.0
    for _ in range(m):
        delta_m = delta + math.exp(eps) * delta_m
    got_eps, got_delta = group_epsilon_delta(eps, delta, m)
    assert got_eps == pytest.approx(m * eps)
    assert got_delta == pytest.approx(delta_m, rel=1e-12)
    assert got_delta <= m * math.exp((m - 1) * eps) * delta * (1 + 1e-12)  # the usual closed bound


def test_pure_dp_groups_have_no_delta_and_a_large_group_can_lose_every_guarantee():
    assert group_epsilon_delta(0.2, 0.0, 50) == (pytest.approx(10.0), 0.0)
    eps_m, delta_m = group_epsilon_delta(3.0, 1e-5, 20)
    assert eps_m == 60.0 and delta_m > 1  # nothing proven for a person with 20 records at ε = 3
    assert group_epsilon_delta(3.0, 1e-5, 10_000)[1] == math.inf


@pytest.mark.parametrize("args,named", [((-1.0, 1e-5, 2), "epsilon"), ((1.0, 2.0, 2), "delta"),
                                        ((1.0, 1e-5, 0), "records"), ((1.0, 1e-5, 2.5), "records"),
                                        ((True, 1e-5, 2), "epsilon")])
def test_bad_arguments_are_refused_naming_them(args, named):
    with pytest.raises(ValueError, match=named):
        group_epsilon_delta(*args)
