"""Tests for tfdpmech.ledger: releases, claimed vs provable totals, formatting and persistence."""

from __future__ import annotations

import json
import math
import os

import pytest

from tfdpmech.accounting.ledger import NONE_PROVEN, PrivacyLedger, Release, format_epsilon


def _rel(component="relevance", claimed=0.1, provable=0.1, **kwargs):
    kwargs.setdefault("basis", "Laplace mechanism")
    return Release(component, kwargs.pop("mechanism", "laplace"), claimed, provable, **kwargs)


def _adlm_like_ledger():
    """Three releases in the shape AdLM records them, MNIST values: ε1/ε2/ε3 = 0.075/0.075/0.15 (the
    authors' public MNIST script), |L| = 1,800 (AdLM §IV), Δ_R, Δ_h0, Δ_F from AdLM Lemmas 1, 3 and 5."""
    led = PrivacyLedger()
    led.record(_rel("relevance", 0.075, 0.075, sensitivity=0.02613, noise_scale=0.3484))
    led.record(_rel("first_layer_inputs", 0.075, 10.8, basis="per-record Laplace, post-processing",
                    sensitivity=9800.0, noise_scale=72.59, details={"policy": "reference_code", "beta_sum": 784.0}))
    led.record(_rel("loss_coefficients", 0.15, 0.2979, sensitivity=1812.5, noise_scale=6.713))
    return led


# ------------------------------------------------------------------------------------------------
# Release
# ------------------------------------------------------------------------------------------------


def test_release_guarantee_labels():
    assert _rel(provable=0.3).guarantee == "proven"
    assert _rel(provable=0.0).guarantee == "proven"  # ε = 0 is a (trivial) proof
    assert _rel(provable=None).guarantee == "claimed"
    inf = _rel(provable=math.inf)
    assert inf.epsilon_provable is None and inf.guarantee == "claimed"  # ∞ means no guarantee
    d = _rel(provable=None).to_dict()
    assert d["guarantee"] == "claimed" and d["epsilon_provable"] is None


@pytest.mark.parametrize("claimed", [-0.1, math.nan, math.inf])
def test_release_rejects_bad_claimed_epsilon(claimed):
    with pytest.raises(ValueError, match="epsilon_claimed must be finite and >= 0"):
        _rel(claimed=claimed)


@pytest.mark.parametrize("provable", [-0.1, math.nan])
def test_release_rejects_bad_provable_epsilon(provable):
    with pytest.raises(ValueError, match="epsilon_provable must be >= 0 or None"):
        _rel(provable=provable)


def test_release_is_frozen():
    r = _rel()
    with pytest.raises(Exception):
        r.epsilon_claimed = 5.0  # type: ignore[misc]


# ------------------------------------------------------------------------------------------------
# totals
# ------------------------------------------------------------------------------------------------


def test_totals_use_basic_composition():
    led = _adlm_like_ledger()
    assert len(led) == 3
    assert led.epsilon_claimed() == pytest.approx(0.3)  # ε1 + ε2 + ε3 (Theorem 1 as claimed)
    assert led.epsilon_provable() == pytest.approx(0.075 + 10.8 + 0.2979)
    assert led.delta() == 0.0
    assert [r.component for r in led.releases] == ["relevance", "first_layer_inputs", "loss_coefficients"]


def test_empty_ledger_totals_are_zero():
    led = PrivacyLedger()
    assert led.epsilon_claimed() == 0.0 and led.epsilon_provable() == 0.0 and led.delta() == 0.0
    assert len(led) == 0


def test_provable_total_is_none_when_any_release_lacks_a_proof():
    led = _adlm_like_ledger()
    led.record(_rel("first_layer_shared", 0.075, None, basis="no proof: shared noise"))
    assert led.epsilon_provable() is None
    assert led.epsilon_claimed() == pytest.approx(0.375)  # the claimed total still adds up
    # one unproven release poisons the total even if it claims nothing
    led2 = PrivacyLedger([_rel(claimed=0.5, provable=0.5), _rel(claimed=0.0, provable=math.inf)])
    assert led2.epsilon_provable() is None


def test_delta_adds_up():
    led = PrivacyLedger([_rel(claimed=1.0, provable=1.0, delta=1e-5, mechanism="gaussian"),
                         _rel(claimed=2.0, provable=2.0, delta=2e-5, mechanism="gaussian")])
    assert led.delta() == pytest.approx(3e-5)


def test_per_epoch_releases_scale_with_epochs():
    led = PrivacyLedger()
    led.record(_rel("relevance", 0.1, 0.1))
    led.record(_rel("inputs_per_step", 0.2, 0.25, per_epoch=True, delta=1e-6))
    assert led.epsilon_claimed(epochs=1) == pytest.approx(0.3)
    # ε1 + E·ε2: AdLM Lemmas 3–4 bound one batch, so noise redrawn every step composes over the E epochs
    assert led.epsilon_claimed(epochs=3) == pytest.approx(0.1 + 3 * 0.2)
    assert led.epsilon_provable(epochs=3) == pytest.approx(0.1 + 3 * 0.25)
    assert led.delta(epochs=4) == pytest.approx(4e-6)
    assert led.epsilon_claimed(epochs=0) == pytest.approx(0.1)


def test_per_epoch_releases_require_epochs():
    led = PrivacyLedger([_rel("relevance"), _rel("inputs_per_step", 0.2, 0.2, per_epoch=True)])
    for total in (led.epsilon_claimed, led.epsilon_provable, led.delta):
        with pytest.raises(ValueError, match=r"'inputs_per_step' composes per epoch; pass epochs="):
            total()
    with pytest.raises(ValueError, match="epochs="):
        led.summary()
    # without per-epoch releases, epochs changes nothing
    once = _adlm_like_ledger()
    assert once.epsilon_claimed(epochs=50) == pytest.approx(once.epsilon_claimed())


def test_record_and_extend():
    led = PrivacyLedger()
    r = _rel()
    assert led.record(r) is r
    with pytest.raises(TypeError, match="release must be a tfdpmech.accounting.ledger.Release, got dict"):
        led.record({"component": "x"})
    other = _adlm_like_ledger()
    led.extend(other)
    assert len(led) == 4 and len(other) == 3
    assert led.epsilon_claimed() == pytest.approx(0.4)
    # releases is a read-only snapshot
    snapshot = led.releases
    assert isinstance(snapshot, tuple)
    led.record(_rel())
    assert len(snapshot) == 4 and len(led) == 5


# ------------------------------------------------------------------------------------------------
# formatting
# ------------------------------------------------------------------------------------------------


def test_format_epsilon_shows_both_numbers():
    assert format_epsilon(0.3, 11.2) == "claimed ε=0.3 | provable ε=11.2"
    # both ε are upper bounds: rounded up to two decimals, never to nearest (11.23456 is not 11.23)
    assert format_epsilon(0.3, 11.23456) == "claimed ε=0.3 | provable ε=11.24"
    assert format_epsilon(1.1113, 0.9999) == "claimed ε=1.12 | provable ε=1"
    assert format_epsilon(0.1 + 0.2, 0.3) == "claimed ε=0.3 | provable ε=0.3"  # float noise is not rounded up
    assert format_epsilon(1.0, 2.0, 1e-5) == "claimed ε=1 | provable ε=2, δ=1e-05"
    assert format_epsilon(1.0, 2.0, 1.5e-6) == "claimed ε=1 | provable ε=2, δ=1.5e-06"  # δ keeps its digits


def test_format_epsilon_says_none_proven():
    assert NONE_PROVEN == "none proven"
    assert format_epsilon(0.3, None) == "claimed ε=0.3 | provable none proven"
    # a provable ε of 0 is a number, not "none"
    assert format_epsilon(0.3, 0.0) == "claimed ε=0.3 | provable ε=0"


def test_summary_lists_every_release_and_the_totals():
    led = _adlm_like_ledger()
    text = led.summary()
    lines = text.splitlines()
    assert sum(line.startswith("- ") for line in lines) == 3
    assert "- first_layer_inputs (laplace, proven): claimed ε=0.075 | provable ε=10.8" in text
    assert "basis: per-record Laplace, post-processing" in text
    assert lines[-1] == "total: claimed ε=0.3 | provable ε=11.18"  # 11.1729, rounded up
    assert "reproduction" not in text


def test_summary_mentions_reproduction_mode_and_none_proven():
    led = PrivacyLedger()
    led.record(_rel("relevance", 0.075, 0.075))
    led.record(_rel("inputs_shared_per_step", 0.075, None, basis="shared noise: no per-record proof",
                    per_epoch=True, reproduction=True))
    assert led.is_reproduction
    assert not _adlm_like_ledger().is_reproduction
    text = led.summary(epochs=4)
    assert "- inputs_shared_per_step (laplace, claimed) [reproduction mode]: " in text
    assert "claimed ε=0.075 | provable none proven ×4 epochs" in text
    assert "- relevance (laplace, proven): claimed ε=0.075 | provable ε=0.075\n" in text  # no tag there
    assert text.splitlines()[-1] == "total: claimed ε=0.38 | provable none proven"  # 0.375, rounded up


def test_repr_shows_both_totals():
    assert repr(_adlm_like_ledger()) == "PrivacyLedger(3 releases; claimed ε=0.3 | provable ε=11.18)"


def test_to_dict_totals():
    d = _adlm_like_ledger().to_dict()
    assert d["epsilon_claimed"] == pytest.approx(0.3)
    assert d["epsilon_provable"] == pytest.approx(11.1729)
    assert d["epochs"] is None and len(d["releases"]) == 3
    # per-epoch ledgers have no total without epochs, but one with them
    led = PrivacyLedger([_rel("x", 0.2, 0.2, per_epoch=True)])
    assert "epsilon_claimed" not in led.to_dict()
    assert led.to_dict(epochs=5)["epsilon_claimed"] == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------------
# persistence
# ------------------------------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path):
    led = _adlm_like_ledger()
    led.record(_rel("inputs_per_step", 0.05, None, basis="no proof", per_epoch=True, reproduction=True,
                    delta=0.0, details={"fingerprint": "abc123", "shape": [28, 28, 1]}))
    path = tmp_path / "ledger.json"
    led.save(path)
    assert sorted(os.listdir(tmp_path)) == ["ledger.json", "ledger.json.lock"]  # the temporary file is gone
    back = PrivacyLedger.load(path)
    assert back.releases == led.releases  # dataclass equality, field by field
    assert back.releases[1].details == {"policy": "reference_code", "beta_sum": 784.0}
    assert back.releases[3].epsilon_provable is None and back.releases[3].per_epoch
    assert back.is_reproduction
    assert back.epsilon_claimed(epochs=2) == pytest.approx(led.epsilon_claimed(epochs=2))
    assert back.summary(epochs=2) == led.summary(epochs=2)
    # the file is plain JSON with the guarantee labels
    data = json.loads(path.read_text())
    assert [r["guarantee"] for r in data["releases"]] == ["proven", "proven", "proven", "claimed"]
    # str paths work too
    led.save(str(tmp_path / "again.json"))
    assert PrivacyLedger.load(str(tmp_path / "again.json")).releases == led.releases


def test_save_overwrites_atomically_and_failed_save_keeps_old_file(tmp_path):
    path = tmp_path / "ledger.json"
    _adlm_like_ledger().save(path)
    before = path.read_text()
    bad = _adlm_like_ledger()
    bad.record(_rel(details={"not_json": object()}))
    with pytest.raises(TypeError):
        bad.save(path)
    assert path.read_text() == before  # never half-written
    assert sorted(os.listdir(tmp_path)) == ["ledger.json", "ledger.json.lock"]  # no stray temporary file
    # a ledger that does not hold the file's releases never replaces them silently
    with pytest.raises(ValueError, match="holds releases this ledger does not"):
        PrivacyLedger([_rel("only", 1.0, 1.0)]).save(path)
    assert path.read_text() == before
    # the same ledger with more releases may; another one only with overwrite=True
    grown = _adlm_like_ledger()
    grown.record(_rel("more", 0.5, 0.5))
    grown.save(path)
    assert len(PrivacyLedger.load(path)) == 4
    PrivacyLedger([_rel("only", 1.0, 1.0)]).save(path, overwrite=True)
    assert [r.component for r in PrivacyLedger.load(path).releases] == ["only"]
    assert sorted(os.listdir(tmp_path)) == ["ledger.json", "ledger.json.lock"]


@pytest.mark.parametrize("content", ['{"releases": [{"component": "x", ', "", "not json at all"])
def test_load_corrupt_file_raises_value_error(tmp_path, content):
    path = tmp_path / "ledger.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"ledger file .*ledger.json"):
        PrivacyLedger.load(path)


@pytest.mark.parametrize("content", ["{}", "[]", '{"releases": [{"component": "x"}]}', '{"releases": 3}',
                                     '{"releases": [null]}', '{"releases": [], "format": 99}'])
def test_load_valid_json_that_is_not_a_ledger_raises_value_error(tmp_path, content):
    path = tmp_path / "ledger.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"ledger file .*ledger.json"):
        PrivacyLedger.load(path)


def test_load_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        PrivacyLedger.load(tmp_path / "nope.json")


def test_repr_does_not_guess_an_epoch_count():
    ledger = PrivacyLedger([Release("inputs", "laplace", 0.1, None, "none", per_epoch=True)])
    assert "summary(epochs=...)" in repr(ledger)


# ------------------------------------------------------------------------------------------------
# composition on dp_accounting events
# ------------------------------------------------------------------------------------------------
dp_accounting = pytest.importorskip("dp_accounting")
from dp_accounting.pld import privacy_loss_mechanism  # noqa: E402

from tfdpmech.accounting.gaussian import gaussian_epsilon  # noqa: E402
from tfdpmech.accounting.ledger import Guarantee, NoneProven, check_epochs  # noqa: E402

DELTA = 1e-5


def _gauss(sigma, delta=DELTA, component="gaussian_release", **kwargs):
    event = dp_accounting.GaussianDpEvent(sigma)
    return Release(component, "gaussian", 1.0, gaussian_epsilon(sigma, delta), "Gaussian mechanism",
                   delta=delta, event=event, **kwargs)


def test_k_gaussian_events_compose_to_dp_accountings_own_number():
    sigmas = [2.0, 3.0, 4.0, 5.0]
    ledger = PrivacyLedger([_gauss(s) for s in sigmas], target_delta=DELTA)
    g = ledger.provable()
    assert isinstance(g, Guarantee) and g.delta == DELTA and ledger.delta() == DELTA
    # k Gaussian mechanisms compose to one with 1/σ² = Σ 1/σ_i²: dp_accounting's exact curve
    sigma_eff = sum(s ** -2 for s in sigmas) ** -0.5
    exact = privacy_loss_mechanism.GaussianPrivacyLoss(sigma_eff, sensitivity=1.0)
    assert ledger.epsilon_provable() == pytest.approx(gaussian_epsilon(sigma_eff, DELTA), rel=1e-9)
    assert exact.get_delta_for_epsilon(ledger.epsilon_provable()) <= DELTA * (1 + 1e-9)  # never below the truth
    assert exact.get_delta_for_epsilon(ledger.epsilon_provable() * 0.999) > DELTA  # and tight
    # dp_accounting's accountants on the same events: the ledger's RDP / PLD modes equal them, "best" is no larger
    composed = dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(s) for s in sigmas])
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(composed)
    pld = dp_accounting.pld.PLDAccountant()
    pld.compose(composed)
    rdp_ledger = PrivacyLedger(ledger.releases, target_delta=DELTA, accountant="rdp")
    assert rdp_ledger.epsilon_provable() == pytest.approx(rdp.get_epsilon(DELTA), rel=1e-12)
    pld_ledger = PrivacyLedger(ledger.releases, target_delta=DELTA, accountant="pld")
    assert pld.get_epsilon(DELTA) <= pld_ledger.epsilon_provable() <= pld.get_epsilon(DELTA) * 1.01
    assert ledger.epsilon_provable() <= min(rdp.get_epsilon(DELTA), pld.get_epsilon(DELTA))
    # composing beats adding up the four (ε, δ) guarantees
    assert ledger.epsilon_provable() < sum(r.epsilon_provable for r in ledger.releases)
    assert "exact privacy curve" in ledger.provable_basis()


def test_default_delta_is_the_sum_and_basic_composition_is_a_fallback():
    ledger = PrivacyLedger([_gauss(2.0), _gauss(3.0, delta=2e-5)])
    assert ledger.delta() == pytest.approx(3e-5)
    basic = sum(r.epsilon_provable for r in ledger.releases)
    assert ledger.epsilon_provable() <= basic
    # an event no accountant supports: the releases' own (ε, δ) add up
    swor = dp_accounting.SampledWithoutReplacementDpEvent(1000, 10, dp_accounting.GaussianDpEvent(1.0))
    odd = Release("swor", "gaussian", 1.0, 2.0, "subsampled Gaussian (stated)", delta=1e-6, event=swor)
    mixed = PrivacyLedger([odd, odd])
    assert mixed.epsilon_provable() == pytest.approx(4.0) and mixed.delta() == pytest.approx(2e-6)


def test_poisson_subsampled_events_use_the_tighter_accountant_and_never_undercut_the_truth():
    q, sigma, steps = 0.01, 1.1, 500
    step = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(step, steps)
    eps_rdp = rdp.get_epsilon(DELTA)
    release = Release("dpsgd_step", "dpsgd", eps_rdp, eps_rdp, "Poisson DP-SGD, RDP", delta=DELTA,
                      event=dp_accounting.SelfComposedDpEvent(step, steps))
    best = PrivacyLedger([release]).epsilon_provable()
    assert best <= eps_rdp
    # the optimistic PLD estimate is (up to discretisation) a lower bound on the true ε: the ledger stays above it
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    optimistic = pld_lib.from_gaussian_mechanism(sigma, sampling_prob=q, pessimistic_estimate=False,
                                                 value_discretization_interval=1e-4).self_compose(steps)
    assert best >= optimistic.get_epsilon_for_delta(DELTA)


def test_per_epoch_events_compose_with_the_epoch_count():
    per_epoch = _gauss(4.0, per_epoch=True)
    ledger = PrivacyLedger([per_epoch], target_delta=DELTA)
    three = ledger.epsilon_provable(epochs=3)
    assert three == pytest.approx(gaussian_epsilon(4.0 / 3 ** 0.5, DELTA), rel=1e-9)  # 3 Gaussians = σ/√3
    assert ledger.epsilon_provable(epochs=1) < three < 3 * ledger.epsilon_provable(epochs=1)
    assert ledger.epsilon_provable(epochs=0) == 0.0
    assert ledger.epsilon_claimed(epochs=3) == pytest.approx(3.0)


def test_pure_releases_add_and_mix_with_composed_events():
    lap = Release("relevance", "laplace", 0.2, 0.2, "Laplace", event=dp_accounting.LaplaceDpEvent(5.0))
    pure = PrivacyLedger([lap, _rel(claimed=0.3, provable=0.3)])
    assert pure.epsilon_provable() == pytest.approx(0.5) and pure.delta() == 0.0
    assert "pure-ε" in pure.provable_basis()
    mixed = PrivacyLedger([lap, _gauss(2.0), _gauss(2.0)], target_delta=DELTA)
    assert mixed.epsilon_provable() == pytest.approx(0.2 + gaussian_epsilon(2.0 / 2 ** 0.5, DELTA), rel=1e-9)
    assert mixed.delta() == DELTA


def test_a_none_proven_release_makes_the_total_none_proven_with_the_reason():
    ledger = PrivacyLedger([_gauss(2.0), _rel("first_layer_shared", 0.075, None, basis="shared noise: no proof")])
    g = ledger.provable()
    assert isinstance(g, NoneProven) and not g and str(g) == NONE_PROVEN
    assert "first_layer_shared: shared noise: no proof" in g.reason
    assert ledger.epsilon_provable() is None and ledger.provable_basis() == g.reason
    d = ledger.to_dict()
    assert d["epsilon_provable"] is None and "shared noise: no proof" in d["provable_basis"]
    assert json.loads(json.dumps(d))["epsilon_provable"] is None  # JSON null
    assert d["epsilon_claimed"] == pytest.approx(1.075)  # claimed totals still add up
    assert format_epsilon(1.0, g) == "claimed ε=1 | provable none proven"


def test_ledger_with_events_round_trips_through_json(tmp_path):
    step = dp_accounting.PoissonSampledDpEvent(0.02, dp_accounting.GaussianDpEvent(1.3))
    ledger = PrivacyLedger(target_delta=DELTA)
    ledger.record(Release("relevance", "laplace", 0.1, 0.1, "Laplace", event=dp_accounting.LaplaceDpEvent(10.0)))
    ledger.record(_gauss(3.0, per_epoch=True))
    ledger.record(Release("dpsgd", "dpsgd", 2.0, 2.0, "Poisson DP-SGD", delta=1e-6, neighbours="replace_one",
                          event=dp_accounting.SelfComposedDpEvent(step, 100)))  # one relation: the total exists
    ledger.record(Release("nested", "gaussian", 1.0, 50.0, "composed", delta=1e-7, event=dp_accounting.ComposedDpEvent(
        [dp_accounting.GaussianDpEvent(1.0), dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(2.0), 3)])))
    path = tmp_path / "ledger.json"
    ledger.save(path)
    back = PrivacyLedger.load(path)
    assert back.releases == ledger.releases  # events included (dp_accounting events compare by value)
    assert back.target_delta == DELTA and back.accountant == "best"
    assert ledger.epsilon_provable(epochs=4) is not None
    assert back.epsilon_provable(epochs=4) == pytest.approx(ledger.epsilon_provable(epochs=4), rel=1e-12)
    data = json.loads(path.read_text())
    assert data["releases"][2]["event"] == {
        "type": "SelfComposedDpEvent", "count": 100,
        "event": {"type": "PoissonSampledDpEvent", "sampling_probability": 0.02,
                  "event": {"type": "GaussianDpEvent", "noise_multiplier": 1.3}}}
    assert PrivacyLedger.from_dict(ledger.to_dict(epochs=2)).releases == ledger.releases


def test_release_event_must_match_its_stated_guarantee():
    with pytest.raises(ValueError, match="gives ε=.*at that δ"):  # understating a Gaussian's ε
        Release("x", "gaussian", 1.0, 0.5 * gaussian_epsilon(2.0, DELTA), "b", delta=DELTA,
                event=dp_accounting.GaussianDpEvent(2.0))
    with pytest.raises(ValueError, match="no pure-ε guarantee"):
        Release("x", "gaussian", 1.0, 100.0, "b", delta=0.0, event=dp_accounting.GaussianDpEvent(2.0))
    with pytest.raises(ValueError, match="gives ε=0.5"):
        Release("x", "laplace", 0.1, 0.1, "b", event=dp_accounting.LaplaceDpEvent(2.0))
    with pytest.raises(ValueError, match="no epsilon_provable"):
        Release("x", "gaussian", 1.0, None, "b", delta=DELTA, event=dp_accounting.GaussianDpEvent(2.0))
    with pytest.raises(TypeError, match="Release.event must be a dp_accounting.DpEvent"):
        Release("x", "gaussian", 1.0, 1.0, "b", event={"type": "GaussianDpEvent"})


def test_target_delta_and_accountant_are_checked():
    with pytest.raises(ValueError, match="target_delta must lie in"):
        PrivacyLedger(target_delta=1.5)
    with pytest.raises(TypeError, match="target_delta"):
        PrivacyLedger(target_delta="1e-5")
    with pytest.raises(ValueError, match="accountant must be one of"):
        PrivacyLedger(accountant="moments")


# ------------------------------------------------------------------------------------------------
# never under-report: epochs, field types, files
# ------------------------------------------------------------------------------------------------
def test_fractional_epochs_round_up():
    led = PrivacyLedger([_rel("inputs", 0.2, 0.25, per_epoch=True)])
    assert led.epsilon_claimed(epochs=2.5) == pytest.approx(3 * 0.2)  # not 2 epochs
    assert led.epsilon_provable(epochs=2.5) == pytest.approx(3 * 0.25)
    assert led.epsilon_claimed(epochs=2.0) == pytest.approx(2 * 0.2)
    assert led.epsilon_claimed(epochs=0.01) == pytest.approx(0.2)
    assert led.to_dict(epochs=2.5)["epochs"] == 3
    assert check_epochs(2.5) == 3 and check_epochs(7) == 7 and check_epochs(None) is None


@pytest.mark.parametrize("epochs, exc", [(-3, ValueError), (-0.5, ValueError), (math.nan, ValueError),
                                         (math.inf, ValueError), ("no", TypeError), (True, TypeError),
                                         ([2], TypeError), (-(10 ** 400), ValueError), (10 ** 400, ValueError),
                                         (1e300, ValueError)])
def test_bad_epochs_are_refused_naming_the_argument(epochs, exc):
    led = PrivacyLedger([_rel("inputs", 0.2, 0.25, per_epoch=True)])
    for total in (led.epsilon_claimed, led.epsilon_provable, led.delta, led.summary, led.to_dict):
        with pytest.raises(exc, match="epochs"):
            total(epochs)


@pytest.mark.parametrize("field, value, exc, match", [
    ("epsilon_claimed", "1", TypeError, r"Release.epsilon_claimed must be a real number, got str '1'; pass a float"),
    ("epsilon_claimed", True, TypeError, "Release.epsilon_claimed must be a real number"),
    ("epsilon_claimed", 10 ** 400, ValueError, "Release.epsilon_claimed is too large"),
    ("epsilon_provable", "0.5", TypeError, "Release.epsilon_provable must be a real number or None"),
    ("epsilon_provable", False, TypeError, "Release.epsilon_provable"),
    ("delta", "0", TypeError, "Release.delta"),
    ("delta", 1.0, ValueError, r"Release.delta must lie in \[0, 1\)"),
    ("delta", -1e-5, ValueError, "Release.delta"),
    ("sensitivity", math.nan, ValueError, "Release.sensitivity"),
    ("noise_scale", "2", TypeError, "Release.noise_scale"),
    ("per_epoch", "no", TypeError, "Release.per_epoch must be True or False, got str 'no'"),
    ("reproduction", 1, TypeError, "Release.reproduction must be True or False"),
    ("details", [1], TypeError, "Release.details must be a dict"),
    ("component", 3, TypeError, "Release.component must be a str"),
    ("basis", None, TypeError, "Release.basis must be a str"),
])
def test_release_fields_are_type_checked(field, value, exc, match):
    kwargs = dict(component="x", mechanism="laplace", epsilon_claimed=0.1, epsilon_provable=0.1, basis="b")
    kwargs[field] = value
    with pytest.raises(exc, match=match):
        Release(**kwargs)


def test_numpy_numbers_are_accepted():
    np = pytest.importorskip("numpy")
    r = Release("x", "laplace", np.float32(0.5), np.float64(0.5), "b", per_epoch=np.bool_(True))
    assert type(r.epsilon_claimed) is float and r.per_epoch is True


def _ledger_file(tmp_path, release_overrides=None, **top):
    data = PrivacyLedger([_rel("relevance", 0.1, 0.1)]).to_dict()
    data["releases"][0].update(release_overrides or {})
    data.update(top)
    return data


@pytest.mark.parametrize("overrides, match", [
    ({"per_epoch": "no"}, "per_epoch must be True or False"),           # a string for a boolean: not "true"
    ({"reproduction": 0}, "reproduction must be True or False"),
    ({"epsilon_claimed": True}, "epsilon_claimed must be a real number"),  # `true` is not ε = 1
    ({"epsilon_provable": True}, "epsilon_provable must be a real number"),
    ({"epsilon_claimed": "0.1"}, "epsilon_claimed must be a real number"),
    ({"epsilon_claimed": -1}, "epsilon_claimed must be finite and >= 0"),
    ({"delta": 2}, r"delta must lie in \[0, 1\)"),
    ({"guarantee": "proven", "epsilon_provable": None}, "labelled 'proven'"),
    ({"sneaky": 1}, "unknown fields"),
    ({"event": {"type": "os.system", "noise_multiplier": 1.0}}, "event.type must be one of"),
    ({"event": {"type": "GaussianDpEvent", "noise_multiplier": "1"}}, "must be a number"),
    ({"event": {"type": "GaussianDpEvent"}}, "lacks fields"),
])
def test_every_field_is_validated_on_load(tmp_path, overrides, match):
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps(_ledger_file(tmp_path, overrides)))
    with pytest.raises(ValueError, match=match) as info:
        PrivacyLedger.load(path)
    assert "ledger.json" in str(info.value)


@pytest.mark.parametrize("text, match", [
    ('"epsilon_claimed": ' + "9" * 400, "too large"),   # a 400-digit number: no OverflowError
    ('"epsilon_claimed": 1e400', "finite"),             # parses as inf
    ('"epsilon_claimed": NaN', "non-finite number NaN"),
    ('"epsilon_claimed": Infinity', "non-finite number Infinity"),
    ('"epsilon_claimed": ' + "9" * 5000, "not valid JSON"),  # beyond Python's digit limit
])
def test_huge_and_non_finite_numbers_in_a_file_are_value_errors(tmp_path, text, match):
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps(_ledger_file(tmp_path)).replace('"epsilon_claimed": 0.1', text, 1))
    assert text in path.read_text()
    with pytest.raises(ValueError, match=match) as info:
        PrivacyLedger.load(path)
    assert "ledger.json" in str(info.value)


def test_non_utf8_ledger_file_is_a_value_error_naming_the_file(tmp_path):
    path = tmp_path / "ledger.json"
    path.write_bytes(b'{"releases": [], "x": "\xff\xfe"}')
    with pytest.raises(ValueError, match=r"ledger file .*ledger.json is not UTF-8"):
        PrivacyLedger.load(path)


def test_saving_non_finite_details_fails_before_touching_the_file(tmp_path):
    path = tmp_path / "ledger.json"
    led = _adlm_like_ledger()
    led.save(path)
    before = path.read_text()
    led.record(_rel(details={"ratio": math.inf}))
    with pytest.raises(ValueError):
        led.save(path)
    assert path.read_text() == before


# ------------------------------------------------------------------------------------------------
# a ledger bound to a file (PrivacyLedger.open)
# ------------------------------------------------------------------------------------------------
def test_open_appends_and_sees_other_writers(tmp_path):
    path = tmp_path / "shared.json"
    a = PrivacyLedger.open(path)
    b = PrivacyLedger.open(path)
    a.record(_rel("a1"))
    b.record(_rel("b1"))  # re-reads under the lock: a1 is kept
    a.record(_rel("a2"))
    assert [r.component for r in PrivacyLedger.load(path).releases] == ["a1", "b1", "a2"]
    assert [r.component for r in a.releases] == ["a1", "b1", "a2"]
    b.refresh()
    assert len(b) == 3 and b.path == os.fspath(path)
    b.extend(PrivacyLedger([_rel("c1"), _rel("c2")]))
    assert len(PrivacyLedger.load(path)) == 5


def test_open_refuses_a_replaced_file_and_other_settings(tmp_path):
    path = tmp_path / "shared.json"
    a = PrivacyLedger.open(path)
    a.record(_rel("a1"))
    PrivacyLedger([_rel("other")]).save(path, overwrite=True)
    with pytest.raises(ValueError, match="no longer starts with the 1 releases"):
        a.record(_rel("a2"))
    assert [r.component for r in PrivacyLedger.load(path).releases] == ["other"]  # nothing written
    with pytest.raises(ValueError, match="open it with its own settings"):
        PrivacyLedger.open(path, target_delta=1e-5)
    os.unlink(path)
    with pytest.raises(ValueError, match="has disappeared"):
        a.record(_rel("a3"))


def test_ledger_or_new_shares_a_ledger_creates_one_or_names_the_fix():
    from tfdpmech.accounting.ledger import ledger_or_new

    shared = PrivacyLedger()
    assert ledger_or_new(shared) is shared
    fresh = ledger_or_new(None)
    assert isinstance(fresh, PrivacyLedger) and fresh is not shared and not fresh.releases
    with pytest.raises(TypeError, match=r"ledger must be a tfdpmech.PrivacyLedger or None, got dict; pass"):
        ledger_or_new({"releases": []})


# ---------------------------------------------------------------------------------------------------------------
# the scope of a guarantee: neighbour relation and what is protected
# ---------------------------------------------------------------------------------------------------------------
def test_scope_fields_default_from_the_mechanism_and_are_validated():
    assert _rel().neighbours == "replace_one" and _rel().protects == "record"
    assert _rel(mechanism="dpsgd").neighbours == "add_remove"  # DP-SGD's accountants state add-or-remove ε
    assert _rel(neighbours="add_remove", protects="features").protects == "features"
    with pytest.raises(ValueError, match=r"neighbours='swap'.*add_remove"):
        _rel(neighbours="swap")
    with pytest.raises(ValueError, match=r"protects='labels'.*record"):
        _rel(protects="labels")
    with pytest.raises(TypeError, match="Release.protects must be a str"):
        _rel(protects=1)


def test_scope_fields_survive_save_and_load(tmp_path):
    led = PrivacyLedger([_rel(neighbours="add_remove", protects="features")])
    led.save(tmp_path / "l.json")
    (back,) = PrivacyLedger.load(tmp_path / "l.json").releases
    assert (back.neighbours, back.protects) == ("add_remove", "features")


def test_an_old_ledger_file_without_the_fields_loads_as_unstated_never_guessed(tmp_path):
    data = PrivacyLedger([_rel(mechanism="dpsgd")]).to_dict()
    for r in data["releases"]:
        del r["neighbours"], r["protects"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    led = PrivacyLedger.load(path)
    (back,) = led.releases
    assert (back.neighbours, back.protects) == ("unstated", "unstated")  # not the derived "add_remove"
    assert led.scope() == ("unstated", "unstated")
    assert "neighbours of the total: neighbours unstated, protects unstated" in led.summary()
    with pytest.raises(ValueError, match="neighbours='sideways'"):
        PrivacyLedger.from_dict({"releases": [{**data["releases"][0], "neighbours": "sideways"}]})


def test_releases_of_different_neighbour_relations_have_no_total_but_zero_releases_do_not_count():
    free = _rel("features:public", 0.0, 0.0, mechanism="none")
    led = PrivacyLedger([free, _rel("dpsgd_training", 1.0, 1.0, mechanism="dpsgd")])
    assert led.epsilon_provable() == pytest.approx(1.0) and led.scope() == ("add_remove", "record")
    led.record(_rel("head", 0.5, 0.5))
    assert led.epsilon_provable() is None and led.scope()[0] == "mixed"
    assert "different neighbour relations" in led.provable_basis()
    assert "dpsgd_training: add_remove" in led.provable_basis() and "head: replace_one" in led.provable_basis()
    assert led.epsilon_claimed() == pytest.approx(1.5)  # the claim is still shown


def test_summary_states_each_release_scope_and_the_weakest_protection_wins():
    led = PrivacyLedger([_rel("a", 0.5, 0.5), _rel("b", 0.5, 0.5, protects="features")])
    assert led.scope() == ("replace_one", "features")
    lines = led.summary().splitlines()
    assert "    neighbours: replace-one, record" in lines
    assert "    neighbours: replace-one, features only (labels public)" in lines
    assert lines[-2] == "neighbours of the total: replace-one, features only (labels public)"
