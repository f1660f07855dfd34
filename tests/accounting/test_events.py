"""Tests for tfdpmech.accounting.events: the JSON form of dp_accounting events and their composition."""

from __future__ import annotations

import json
import math

import pytest

dp_accounting = pytest.importorskip("dp_accounting")

from tfdpmech.accounting.events import compose_events, event_from_json, event_to_json  # noqa: E402
from tfdpmech.accounting.gaussian import gaussian_epsilon  # noqa: E402

EVENTS = [
    dp_accounting.GaussianDpEvent(1.5),
    dp_accounting.LaplaceDpEvent(2.0),
    dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1)),
    dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(3.0), 7),
    dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(1.0), dp_accounting.LaplaceDpEvent(4.0)]),
    dp_accounting.SampledWithoutReplacementDpEvent(1000, 10, dp_accounting.GaussianDpEvent(1.0)),
    dp_accounting.NoOpDpEvent(),
    dp_accounting.NonPrivateDpEvent(),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_events_round_trip_through_json(event):
    data = json.loads(json.dumps(event_to_json(event)))
    assert data["type"] == type(event).__name__
    assert event_from_json(data) == event


@pytest.mark.parametrize("data, match", [
    ({"type": "GaussianDpEvent", "noise_multiplier": -1.0}, ">= 0"),
    ({"type": "GaussianDpEvent", "noise_multiplier": True}, "must be a number"),
    ({"type": "GaussianDpEvent", "noise_multiplier": 10 ** 400}, "too large"),
    ({"type": "SelfComposedDpEvent", "count": 2.5, "event": {"type": "NoOpDpEvent"}}, "non-negative integer"),
    ({"type": "GaussianDpEvent", "noise_multiplier": 1.0, "extra": 1}, "unknown fields"),
    ({"type": "DpEvent"}, "type must be one of"),
    ({"type": "__import__"}, "type must be one of"),
    ("GaussianDpEvent", "JSON object"),
])
def test_bad_event_json_is_refused(data, match):
    with pytest.raises(ValueError, match=match):
        event_from_json(data)


def test_compose_events_picks_the_smallest_valid_bound():
    delta = 1e-5
    events = [dp_accounting.GaussianDpEvent(2.0)] * 3
    eps, how = compose_events(events, delta)
    assert eps == pytest.approx(gaussian_epsilon(2.0 / 3 ** 0.5, delta), rel=1e-9)
    rdp_eps, rdp_how = compose_events(events, delta, "rdp")
    assert "RDP" in rdp_how and rdp_eps > eps
    assert compose_events([], delta) == (0.0, "no events")
    swor = dp_accounting.SampledWithoutReplacementDpEvent(1000, 10, dp_accounting.GaussianDpEvent(1.0))
    assert compose_events([swor], delta) is None  # no accountant supports it


def test_gaussian_mu_is_the_gdp_of_gaussian_only_events():
    from tfdpmech.accounting.events import gaussian_mu

    g = dp_accounting.GaussianDpEvent(2.0)
    assert gaussian_mu([g]) == pytest.approx(0.5)
    assert gaussian_mu([dp_accounting.SelfComposedDpEvent(g, 4), g]) == pytest.approx(math.sqrt(5) / 2)
    assert gaussian_mu([dp_accounting.LaplaceDpEvent(1.0)]) is None
    assert compose_events([g], 1e-5, "gaussian")[0] == pytest.approx(gaussian_epsilon(2.0, 1e-5), rel=1e-12)
