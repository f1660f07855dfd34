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
    """Three releases in the shape AdLM records them (values from the spec's MNIST config)."""
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
    assert led.epsilon_claimed(epochs=3) == pytest.approx(0.1 + 3 * 0.2)  # ε1 + E·ε2 (spec §9 A13)
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
    assert format_epsilon(0.3, 11.23456) == "claimed ε=0.3 | provable ε=11.23"  # 4 significant digits
    assert format_epsilon(1.0, 2.0, 1e-5) == "claimed ε=1 | provable ε=2, δ=1e-05"


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
    assert lines[-1] == "total: claimed ε=0.3 | provable ε=11.17"
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
    assert text.splitlines()[-1] == "total: claimed ε=0.375 | provable none proven"


def test_repr_shows_both_totals():
    assert repr(_adlm_like_ledger()) == "PrivacyLedger(3 releases; claimed ε=0.3 | provable ε=11.17)"


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
    assert os.listdir(tmp_path) == ["ledger.json"]  # the temporary file is gone
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
    bad = PrivacyLedger([_rel(details={"not_json": object()})])
    with pytest.raises(TypeError):
        bad.save(path)
    assert path.read_text() == before  # never half-written
    assert sorted(os.listdir(tmp_path)) == ["ledger.json"]  # no stray temporary file
    # a good save replaces the file
    PrivacyLedger([_rel("only", 1.0, 1.0)]).save(path)
    assert [r.component for r in PrivacyLedger.load(path).releases] == ["only"]
    assert sorted(os.listdir(tmp_path)) == ["ledger.json"]


@pytest.mark.parametrize("content", ['{"releases": [{"component": "x", ', "", "not json at all"])
def test_load_corrupt_file_raises_value_error(tmp_path, content):
    path = tmp_path / "ledger.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"ledger file .*ledger.json"):
        PrivacyLedger.load(path)


@pytest.mark.parametrize("content", ["{}", "[]", '{"releases": [{"component": "x"}]}', '{"releases": 3}'])
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
