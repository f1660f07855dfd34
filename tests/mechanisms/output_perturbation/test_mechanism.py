"""Tests for DPPredictor: answers charged before they are computed, ledger per batch, threads, export."""

from __future__ import annotations

import json
import os
import threading

import keras
import numpy as np
import pytest

from tfdpmech.accounting.gaussian import gdp_epsilon
from tfdpmech.accounting.query_budget import BudgetExhaustedError, QueryBudgetAccountant
from tfdpmech.mechanisms.output_perturbation import EXPORT_WARNING, DPPredictor, compute_bounds
from tfdpmech.mechanisms.output_perturbation.convexified_mlp import convexified_mlp


# ------------------------------------------------------------------------------------- predictor
@pytest.fixture(scope="module")
def trained():
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (200, 6)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[np.argmax(x[:, :3], 1)]
    model = convexified_mlp(6, 3, hidden_units=16, l2=0.001, learning_rate=0.02)
    model.fit(x, y, epochs=10, batch_size=50, verbose=0)
    return model, x, y


def _predictor(trained, acct, **kw):
    model = trained[0]
    return DPPredictor(model, compute_bounds(model, n_train=200), acct, seed=0, **kw)


def test_predictor_answers_and_records_claimed_only_in_reference_mode(trained):
    acct = QueryBudgetAccountant(10.0, max_queries=100)
    pred = _predictor(trained, acct, noise="laplace", mode="reference")
    probs = pred.predict_proba(trained[1][:5])
    assert probs.shape == (5, 3) and np.allclose(probs.sum(1), 1.0)
    assert pred.predict_labels(trained[1][:2]).shape == (2,)
    assert acct.queries_answered == 7
    rel = pred.ledger.releases[0]
    assert rel.epsilon_claimed == pytest.approx(0.5) and rel.epsilon_provable is None
    assert "contested" in rel.basis and rel.reproduction
    assert pred.ledger.epsilon_provable() is None


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_private_mode_is_none_proven_because_its_sensitivity_is_not(trained, noise):
    acct = QueryBudgetAccountant(1.0, max_queries=10, composition="basic")
    pred = _predictor(trained, acct, noise=noise, mode="private")
    pred.predict_proba(trained[1][:2])
    rel = pred.ledger.releases[0]
    assert rel.epsilon_provable is None and rel.guarantee == "claimed" and rel.event is None
    assert pred.ledger.epsilon_provable() is None
    assert rel.basis.startswith("none proven") and "sensitivity_mode='paper'" in rel.basis
    assert "no proof" in rel.basis and "OutputPerturbationHead" in rel.basis
    assert rel.details["unproven_premise"] == "sensitivity bound Δz_T" and "conditional_on" not in rel.details
    assert (rel.neighbours, rel.protects) == ("add_remove", "record")  # Lu et al. §3: X and X^(−i)
    assert rel.epsilon_claimed == pytest.approx(0.2)
    if noise == "laplace":
        assert rel.details["epsilon_if_the_bound_held"] == pytest.approx(0.2)
    else:
        assert rel.details["epsilon_if_the_bound_held"] == pytest.approx(gdp_epsilon(0.2, 1e-5))
    # release(k) describes k queries without answering: the same entry the answered batch recorded
    described = pred.release(2)
    assert described == rel and len(pred.ledger) == 1 and acct.queries_answered == 2
    with pytest.raises(ValueError, match="k must be"):
        pred.release(0)


def test_gaussian_answers_keep_the_would_be_gdp_composition_in_details_only(trained):
    acct = QueryBudgetAccountant(1.0, max_queries=100, composition="gdp")
    pred = _predictor(trained, acct, noise="gaussian", mode="private")
    pred.predict_proba(trained[1][:4])
    pred.predict_proba(trained[1][4:13])
    eps_q = acct.per_query  # μ per query
    first, second = pred.ledger.releases
    assert first.details["mu"] == pytest.approx(2 * eps_q) and second.details["mu"] == pytest.approx(3 * eps_q)
    assert pred.ledger.epsilon_provable() is None and "none proven" in pred.ledger.provable_basis()


def test_refused_query_computes_and_releases_nothing(trained):
    acct = QueryBudgetAccountant(1.0, max_queries=3)
    pred = _predictor(trained, acct, mode="reference")
    calls = []
    original = pred._answer
    pred._answer = lambda x: calls.append(len(x)) or original(x)
    pred.predict_proba(trained[1][:3])
    with pytest.raises(BudgetExhaustedError):
        pred.predict_proba(trained[1][:1])
    assert calls == [3] and len(pred.ledger) == 1


def test_bad_queries_refused_before_charging(trained):
    acct = QueryBudgetAccountant(1.0, max_queries=10)
    pred = _predictor(trained, acct, mode="reference")
    with pytest.raises(ValueError, match="outside the assumed range"):
        pred.predict_proba(np.full((1, 6), 1.5, np.float32))
    with pytest.raises(ValueError, match="NaN"):
        pred.predict_proba(np.full((1, 6), np.nan, np.float32))
    with pytest.raises(ValueError, match="shape"):
        pred.predict_proba(np.zeros((1, 5), np.float32))
    assert acct.queries_answered == 0
    pred.predict_proba(np.zeros(6, np.float32))  # one row without a batch axis
    assert acct.queries_answered == 1


def test_predictor_configuration_errors(trained):
    model = trained[0]
    bounds = compute_bounds(model, n_train=200)
    with pytest.raises(ValueError, match="GDP composition"):
        DPPredictor(model, bounds, QueryBudgetAccountant(1.0, max_queries=4, composition="gdp"), noise="laplace")
    with pytest.raises(ValueError, match="noise"):
        DPPredictor(model, bounds, QueryBudgetAccountant(1.0, max_queries=4), noise="uniform")
    other = convexified_mlp(5, 3, hidden_units=16, compile=False)
    with pytest.raises(ValueError, match="compute the bounds on this model"):
        DPPredictor(other, bounds, QueryBudgetAccountant(1.0, max_queries=4))
    with pytest.raises(TypeError, match="bounds"):
        DPPredictor(model, {"delta_z": 1}, QueryBudgetAccountant(1.0, max_queries=4))


def test_cache_identical_queries_and_evaluation_mode(trained):
    acct = QueryBudgetAccountant(1.0, max_queries=3)
    pred = _predictor(trained, acct, cache_identical_queries=True, mode="reference")
    x = trained[1][:2]
    a = pred.predict_proba(x)
    b = pred.predict_proba(np.concatenate([x, x]))
    np.testing.assert_array_equal(b, np.concatenate([a, a]))
    assert acct.queries_answered == 2
    with pred.evaluation_mode():
        pred.predict_proba(trained[1][:50])
    assert acct.queries_answered == 2 and len(pred.ledger) == 1


def test_export_warns_that_budget_does_not_travel(trained, tmp_path):
    pred = _predictor(trained, QueryBudgetAccountant(1.0, max_queries=3), mode="reference")
    with pytest.warns(UserWarning, match="budget enforcement does NOT travel"):
        exported = pred.as_keras_model()
    assert "does NOT travel" in EXPORT_WARNING
    exported.save(tmp_path / "dp.keras")
    loaded = keras.models.load_model(tmp_path / "dp.keras")
    x = trained[1][:4]
    out = loaded.predict(x, verbose=0)
    assert np.allclose(out.sum(1), 1.0, atol=1e-5)
    assert not np.allclose(out, loaded.predict(x, verbose=0))


@pytest.fixture
def state_dir(tmp_path):
    """A tmpfs folder when there is one: 1,000 fsync'd charges take seconds on a real disk."""
    import shutil
    import tempfile
    from pathlib import Path

    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        folder = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="tfdpmech-budget-"))
        yield folder
        shutil.rmtree(folder, ignore_errors=True)
    else:
        yield tmp_path


def test_eight_threads_ten_thousand_queries_budget_of_one_thousand(trained, state_dir):
    path = state_dir / "budget.json"
    acct = QueryBudgetAccountant(10.0, max_queries=1000, state_path=path)
    pred = _predictor(trained, acct, mode="private")
    row = trained[1][:1]
    answered, refused = [0] * 8, [0] * 8
    start = threading.Barrier(8)

    def worker(i):
        start.wait()
        for _ in range(1250):
            try:
                probs = pred.predict_proba(row)
            except BudgetExhaustedError:
                refused[i] += 1
            else:
                assert probs.shape == (1, 3)
                answered[i] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(answered) == 1000 and sum(refused) == 9000
    state = json.loads(path.read_text())
    assert state["queries_answered"] == 1000 and state["spent"] == pytest.approx(10.0)
    assert len(pred.ledger) == 1000 and pred.ledger.epsilon_claimed() == pytest.approx(10.0)
    restarted = QueryBudgetAccountant(10.0, max_queries=1000, state_path=path)
    assert restarted.remaining_queries == 0
    with pytest.raises(BudgetExhaustedError):
        restarted.charge()
