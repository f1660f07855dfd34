"""The DP-ERM methods through the runner: claimed vs proven for input perturbation, Kifer and DP-SGD."""

import sys

import pytest

from tfdpmech.mechanisms.dpsgd.runs.paths import resolve_engine
from tfdpmech.experiments import preset_config, run_comparison
from tfdpmech.experiments.registry import METHODS


def _runs(methods, **kw):
    config = preset_config("dp_erm", quick=True, datasets=("iris",), methods=methods, audit=(), verbose=0, **kw)
    return {r["method"]: r for r in run_comparison(config)["runs"]}


def test_input_perturbation_reference_is_claimed_private_is_proven():
    runs = _runs(("ip_reference", "ip_private"), epochs=5)
    assert runs["ip_reference"]["epsilon_provable"] is None and runs["ip_reference"]["epsilon_claimed"] == 1.0
    assert runs["ip_private"]["epsilon_provable"] == pytest.approx(1.0, rel=1e-6)
    # δ = 1/n², n = 108 private Iris rows: the 120 training rows less the 12 public ones that standardise them
    assert runs["ip_private"]["delta"] == pytest.approx(1 / 108**2)
    # labels are public in ip_private: its ε protects the features only; Kang et al.'s claim, too
    assert {r["protects"] for run in runs.values() for r in run["ledger"]["releases"]} == {"features"}
    # the release is made by the first fit (make_private): the notes still hold what it calibrated
    assert runs["ip_private"]["notes"]["sigma"] > runs["ip_reference"]["notes"]["sigma"] > 0


@pytest.mark.dpsgd
def test_dpsgd_has_both_numbers():
    runs = _runs(("dpsgd",))
    assert runs["dpsgd"]["epsilon_claimed"] <= 1.0 and runs["dpsgd"]["epsilon_provable"] is not None
    assert runs["dpsgd"]["notes"]["engine"] == resolve_engine("auto")  # tensorflow-privacy, else tfdpmech's own


@pytest.mark.skipif(METHODS["kifer"].unavailable() is not None,
                    reason="tensorflow-privacy-only method: Kifer objective perturbation is its KiferRegularizer, "
                           "which imports on the TensorFlow 2.15 stack only")
def test_kifer_is_claimed():
    runs = _runs(("kifer",))
    assert runs["kifer"]["epsilon_provable"] is None and runs["kifer"]["epsilon_claimed"] == 1.0
    assert "exact minimiser" in runs["kifer"]["provable_basis"]


def test_kifer_is_refused_by_name_where_tensorflow_privacy_does_not_import(monkeypatch):
    for name in [m for m in list(sys.modules) if m.startswith("tensorflow_privacy.")] + ["tensorflow_privacy"]:
        monkeypatch.setitem(sys.modules, name, None)
    reason = METHODS["kifer"].unavailable()
    assert reason.startswith("method 'kifer' needs tensorflow_privacy") and "pip install 'tfdpmech[tfprivacy]'" in reason
    with pytest.raises(ValueError, match="method 'kifer' needs tensorflow_privacy"):
        preset_config("dp_erm", quick=True, datasets=("iris",), methods=("kifer",), audit=(), verbose=0).validate()
