"""The RDP orders tfdpmech requests give dp_accounting's default-order ε, without its convergence warnings."""

import logging

import pytest

dp_accounting = pytest.importorskip("dp_accounting")

from tfdpmech.accounting import dpsgd as dpsgd_accounting  # noqa: E402
from tfdpmech.accounting import poisson_dpsgd  # noqa: E402
from tfdpmech.accounting.events import compose_events  # noqa: E402
from tfdpmech.accounting.rdp_orders import ALWAYS_SETTLES_FROM, order_floor, rdp_epsilon, rdp_orders  # noqa: E402

NOT_SETTLED = "failed to converge"


class _Captured(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def absl_warnings():
    """The messages dp_accounting logs through absl while the test runs."""
    handler = _Captured()
    logger = logging.getLogger("absl")
    logger.addHandler(handler)
    yield handler.messages
    logger.removeHandler(handler)


def _event(q, sigma, steps):
    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)


def _default_epsilon(event, delta):
    return float(dp_accounting.rdp.RdpAccountant().compose(event).get_epsilon(delta))


@pytest.mark.parametrize("q, sigma, steps, delta", [
    (0.25, 1.0, 160, 1e-5),    # the demo's DP-SGD shape: low fractional orders do not settle
    (0.25, 0.45, 40, 1e-5),    # a large ε, where the low orders that settle give the minimum
    (0.001, 0.3, 1000, 1e-5),  # small q and σ: ε = 22 comes from an order below 2.5
    (0.05, 0.3, 100, 1e-3),
    (0.5, 4.0, 10, 1e-2),
    (0.01, 1.1, 5000, 1e-6),
])
def test_epsilon_equals_the_default_orders(q, sigma, steps, delta):
    event = _event(q, sigma, steps)
    assert rdp_epsilon(dp_accounting, event, delta) == pytest.approx(_default_epsilon(event, delta), rel=1e-12)


def test_default_orders_warn_where_the_requested_orders_do_not(absl_warnings):
    if not hasattr(dp_accounting.rdp.rdp_privacy_accountant, "_MAX_STEPS_LOG_A_FRAC"):
        pytest.skip("this dp_accounting sums the fractional-order series to the end: it has no warning to avoid")
    event = _event(0.25, 2.0, 40)  # ε = 4.4: no order below 2.5 can give less
    _default_epsilon(event, 1e-5)
    assert any(NOT_SETTLED in m for m in absl_warnings), "the default orders no longer warn here: revisit rdp_orders"
    absl_warnings.clear()
    rdp_epsilon(dp_accounting, event, 1e-5)
    assert not absl_warnings


def test_calibrations_and_totals_log_no_warning(absl_warnings):
    """The package's RDP paths at the demo's DP-SGD shape (q = 0.25, ε = 0.25 ... 8)."""
    totals = []
    for epsilon in (0.25, 1.0, 8.0):
        sigma = dpsgd_accounting.dpsgd_noise_multiplier(epsilon, 1e-5, n=7000, batch_size=1750, epochs=40)
        assert dpsgd_accounting.dpsgd_epsilon(sigma, 1e-5, n=7000, batch_size=1750, epochs=40) <= epsilon
        poisson = poisson_dpsgd.poisson_dpsgd_noise_multiplier(epsilon, 1e-5, q=0.25, steps=160, accountant="rdp")
        assert poisson_dpsgd.poisson_dpsgd_epsilon(poisson, 1e-5, q=0.25, steps=160, accountant="rdp") <= epsilon
        totals.append((sigma, compose_events([_event(0.25, sigma, 160)], 1e-5, accountant="rdp")[0]))
    assert not [m for m in absl_warnings if NOT_SETTLED in m]
    for sigma, total in totals:
        assert total == pytest.approx(_default_epsilon(_event(0.25, sigma, 160), 1e-5), rel=1e-12)


def test_calibrated_sigma_is_unchanged():
    """The calibration asks only for the orders that can reach its target: the same σ as the default orders'."""
    q, steps, delta, target = 0.25, 160, 1e-5, 1.0
    sigma = dpsgd_accounting.dpsgd_noise_multiplier(target, delta, n=7000, batch_size=1750, epochs=40)
    assert _default_epsilon(_event(q, sigma, steps), delta) <= target
    assert _default_epsilon(_event(q, sigma * (1 - 1e-4), steps), delta) > target


def test_at_most_is_exact_below_and_above_the_bound_otherwise():
    event = _event(0.25, 0.6, 100)
    exact = rdp_epsilon(dp_accounting, event, 1e-5)
    assert rdp_epsilon(dp_accounting, event, 1e-5, at_most=exact * 1.01) == pytest.approx(exact, rel=1e-12)
    assert rdp_epsilon(dp_accounting, event, 1e-5, at_most=exact / 2) > exact / 2


def test_orders_left_out_cannot_give_less_than_the_bound():
    delta, bound = 1e-5, 8.0
    kept = set(rdp_orders(dp_accounting, delta, bound))
    left_out = [a for a in dp_accounting.rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS if float(a) not in kept]
    assert left_out and all(a < ALWAYS_SETTLES_FROM and order_floor(a, delta) > bound for a in left_out)
    # the library's ε at one order is never below its floor, and reaches it as the noise grows
    for alpha in (1.5, 2.0, 2.2, 3.5):
        single = [float(dp_accounting.rdp.RdpAccountant(orders=[alpha]).compose(_event(0.01, s, 10)).get_epsilon(delta))
                  for s in (5.0, 50.0, 500.0)]
        assert all(e >= order_floor(alpha, delta) for e in single)
        assert single[-1] == pytest.approx(order_floor(alpha, delta), rel=1e-3)
