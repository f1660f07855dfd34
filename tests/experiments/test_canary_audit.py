"""The canary audit inside `tfdpmech compare`: a deliberately broken method is caught, a false claim is refuted."""

import json

import keras
import pytest

from tfdpmech.accounting.ledger import PrivacyLedger, Release
from tfdpmech.audit.canary import VERDICT_BUG, VERDICT_REFUTED
from tfdpmech.cli import AUDIT_BUG_EXIT, main
from tfdpmech.experiments import METHODS, Prepared, register_method


def _unprotected(claimed, provable):
    """Plain softmax training whose ledger states an ε it does not have (a planted bug)."""

    def prepare(ctx, epsilon, seed):
        model = ctx.build("standard")
        model.compile(keras.optimizers.Adam(5e-3), loss=keras.losses.CategoricalCrossentropy(from_logits=True))
        release = Release("weights", "none", claimed, provable, "planted for the audit test: nothing is noised")

        def fit(epochs, callbacks):
            model.fit(ctx.x_private, ctx.y_private, epochs=8, batch_size=100, verbose=0, callbacks=callbacks)

        return Prepared(model, fit=fit, ledger=PrivacyLedger([release]))

    return prepare


@pytest.fixture(scope="module", autouse=True)
def planted_methods():
    register_method("test_false_proof", _unprotected(0.5, 0.5), "test: claims and 'proves' ε = 0.5, noises nothing",
                    mode="private")
    register_method("test_false_claim", _unprotected(0.5, None), "test: claims ε = 0.5, proves nothing",
                    mode="reference")
    yield
    METHODS.pop("test_false_proof")
    METHODS.pop("test_false_claim")


def _compare(tmp_path, method, capsys, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = tmp_path / method
    status = main(["compare", "--quick", "--methods", method, "--epsilons", "0.5", "--audit", "canary",
                   "--public", "0", "--out", str(out), "--quiet"])
    return status, json.loads((out / "results.json").read_text()), (out / "results.md").read_text(), capsys.readouterr()


@pytest.mark.slow
def test_lower_bound_above_a_provable_epsilon_fails_the_run_in_red(tmp_path, capsys, monkeypatch):
    status, results, md, captured = _compare(tmp_path, "test_false_proof", capsys, monkeypatch)
    canary = results["runs"][0]["canary"]
    assert set(canary) == {"epsilon_lower_bound", "m", "k_plus", "k_minus", "correct", "confidence"}
    assert canary["epsilon_lower_bound"] > 0.5
    assert status == AUDIT_BUG_EXIT
    assert "\033[1;31m" in captured.err and "AUDIT FAILED" in captured.err
    assert "🔴 **BUG" in md and results["summary"][0]["audit_verdict"] == VERDICT_BUG


@pytest.mark.slow
def test_lower_bound_above_a_claim_without_proof_refutes_it(tmp_path, capsys, monkeypatch):
    status, results, md, captured = _compare(tmp_path, "test_false_claim", capsys, monkeypatch)
    assert status == 0
    assert results["summary"][0]["audit_verdict"] == VERDICT_REFUTED
    assert "claim refuted by audit" in md and "claim refuted by audit" in captured.err
    assert "AUDIT FAILED" not in captured.err
