"""Tests for the membership-inference audit in tfdpmech.audit (Shokri shadow models, tensorflow-privacy's attacks)."""

from __future__ import annotations

import sys

import keras
import numpy as np
import pytest

from tfdpmech.accounting.query_budget import QueryBudgetAccountant
from tfdpmech.audit import (
    ShadowModelAttack,
    accuracy_loss,
    membership_advantage,
    run_tf_privacy_attacks,
    shadow_attack_data,
    split_target_and_shadows,
    tf_privacy_attack_floor,
    tf_privacy_attacks_available,
)
from tfdpmech.mechanisms.output_perturbation import DPPredictor, compute_bounds
from tfdpmech.mechanisms.output_perturbation.convexified_mlp import convexified_mlp


def test_split_is_disjoint_and_sized():
    split = split_target_and_shadows(1000, 100, 3, seed=0)
    assert len(split.target_in) == len(split.target_out) == 100
    target = set(split.target_in) | set(split.target_out)
    assert len(target) == 200
    for s_in, s_out in split.shadows:
        assert len(s_in) == len(s_out) == 100
        assert not (set(s_in) | set(s_out)) & target
        assert not set(s_in) & set(s_out)
    again = split_target_and_shadows(1000, 100, 3, seed=0)
    np.testing.assert_array_equal(again.target_in, split.target_in)
    with pytest.raises(ValueError, match="too small"):
        split_target_and_shadows(300, 100, 1)
    with pytest.raises(ValueError, match="n"):
        split_target_and_shadows(300, 0, 1)


def test_metrics_are_raw():
    assert membership_advantage([1, 1, 0, 1], [0, 1, 0, 0]) == pytest.approx(0.5)
    assert membership_advantage([0, 0], [1, 0]) == pytest.approx(-0.5)  # not clipped: TPR − FPR can be negative
    assert accuracy_loss(0.45, 0.9) == pytest.approx(0.5)
    assert accuracy_loss(0.95, 0.9) < 0
    with pytest.raises(ValueError):
        accuracy_loss(0.5, 0.0)


def test_attack_learns_a_planted_signal():
    rng = np.random.default_rng(0)

    def outputs(member, k):
        conf = rng.uniform(0.9, 1.0, k) if member else rng.uniform(0.5, 0.8, k)
        labels = rng.integers(0, 2, k)
        probs = np.where(labels[:, None] == np.arange(2), conf[:, None], 1 - conf[:, None])
        return probs, labels

    p_in, y_in = outputs(True, 300)
    p_out, y_out = outputs(False, 300)
    attack = ShadowModelAttack(2, epochs=30, seed=0).fit(
        np.concatenate([p_in, p_out]), np.concatenate([y_in, y_out]), np.r_[np.ones(300), np.zeros(300)])
    t_in, ty_in = outputs(True, 200)
    t_out, ty_out = outputs(False, 200)
    assert attack.advantage(t_in, ty_in, t_out, ty_out) > 0.8
    constant = ShadowModelAttack(2).fit(p_in, y_in, np.ones(300))  # one membership value per class
    assert np.all(constant.predict_membership(t_out, ty_out) == 1)
    with pytest.raises(ValueError, match="num_classes"):
        ShadowModelAttack(3).fit(p_in, y_in, np.ones(300))


@pytest.mark.slow
def test_shadow_attack_on_output_perturbation_smoke():
    """Lu et al. §5.4.3, Findings 2–3: leak(baseline) > leak(Alg. 1 at ε = 0.01) ≥ about 0;
    accuracy loss large at ε = 0.01 (the paper's maximum is about 0.5) and about 0 at a very large ε."""
    rng = np.random.default_rng(1)
    n, m = 60, 40
    x = rng.uniform(-1, 1, (8 * n, m)).astype(np.float32)
    y = np.eye(2, dtype=np.float32)[(x[:, :8].sum(1) + rng.normal(0, 0.5, len(x)) > 0).astype(int)]
    split = split_target_and_shadows(len(x), n, 2, seed=2)

    def train(xs, ys):
        keras.utils.set_random_seed(3)
        model = convexified_mlp(m, 2, hidden_units=64, l2=1e-4, learning_rate=0.01)
        model.fit(xs, ys, epochs=60, batch_size=20, verbose=0)
        return model

    def softmax_of(model, xs):
        z = np.asarray(model(xs)).astype(np.float64)
        e = np.exp(z - z.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    probs, labels, member = shadow_attack_data(train, softmax_of, x, y, split)
    attack = ShadowModelAttack(2, epochs=40, seed=4).fit(probs, labels, member)
    target = train(x[split.target_in], y[split.target_in])
    xi, yi, xo, yo = x[split.target_in], y[split.target_in], x[split.target_out], y[split.target_out]
    base_in, base_out = softmax_of(target, xi), softmax_of(target, xo)
    leak_base = attack.advantage(base_in, yi, base_out, yo)
    acc_base = np.mean(np.argmax(base_out, 1) == np.argmax(yo, 1))
    bounds = compute_bounds(target, n_train=n)
    results = {}
    for eps in (0.01, 1e6):  # Δz_T is large at n = 60, so 'ε → ∞' needs a large ε
        pred = DPPredictor(target, bounds, QueryBudgetAccountant(eps, max_queries=1), seed=5, mode="reference")
        with pred.evaluation_mode():
            p_in, p_out = pred.predict_proba(xi), pred.predict_proba(xo)
        results[eps] = (attack.advantage(p_in, yi, p_out, yo),
                        accuracy_loss(np.mean(np.argmax(p_out, 1) == np.argmax(yo, 1)), acc_base))
    assert leak_base > 0.15
    assert leak_base > results[0.01][0] > -0.15
    assert abs(results[1e6][1]) < 0.05
    assert acc_base > 0.7
    assert results[0.01][1] > 0.15  # C = 2: the DP label is a coin flip


@pytest.mark.dpsgd
def test_tf_privacy_attacks_on_the_same_outputs():
    pytest.importorskip("tensorflow_privacy", reason="tensorflow-privacy needs the TensorFlow 2.15 stack")
    if not tf_privacy_attacks_available():
        pytest.skip("tensorflow_privacy.privacy.privacy_tests is not installed (the 0.9.0 wheel omits it)")
    rng = np.random.default_rng(0)
    conf_in, conf_out = rng.uniform(0.9, 1, 200), rng.uniform(0.4, 0.8, 200)
    p_in = np.stack([conf_in, 1 - conf_in], 1)
    p_out = np.stack([conf_out, 1 - conf_out], 1)
    res = run_tf_privacy_attacks(p_in, p_out, np.zeros(200, int), np.zeros(200, int))
    assert set(res) == {"THRESHOLD_ATTACK", "LOGISTIC_REGRESSION"}
    assert res["THRESHOLD_ATTACK"]["advantage"] > 0.5
    assert res["THRESHOLD_ATTACK"]["auc"] > 0.95
    # members and non-members from one distribution: nothing to find
    same = np.stack([rng.uniform(0.4, 0.8, 400), np.zeros(400)], 1)
    same[:, 1] = 1 - same[:, 0]
    res = run_tf_privacy_attacks(same[:200], same[200:], np.zeros(200, int), np.zeros(200, int))
    assert res["THRESHOLD_ATTACK"]["advantage"] < 0.2
    with pytest.raises(ValueError, match="attack_types has unknown names \\['NOPE'\\]"):
        run_tf_privacy_attacks(p_in, p_out, np.zeros(200, int), np.zeros(200, int), attack_types=("NOPE",))
    with pytest.raises(TypeError, match="attack_types must be a sequence"):
        run_tf_privacy_attacks(p_in, p_out, np.zeros(200, int), np.zeros(200, int), attack_types="THRESHOLD_ATTACK")


@pytest.mark.dpsgd
def test_tf_privacy_attack_floor_shrinks_with_the_sample():
    if not tf_privacy_attacks_available():
        pytest.skip("tensorflow_privacy.privacy.privacy_tests is not installed")
    small = tf_privacy_attack_floor(100, 100, 2, repeats=5, seed=0)
    large = tf_privacy_attack_floor(2000, 2000, 10, repeats=3, seed=0)
    assert 0.05 < small["mean"] < 0.3 and small["max"] >= small["mean"]  # no signal, still positive
    assert 0 < large["mean"] < small["mean"] / 2
    with pytest.raises(ValueError, match="num_classes"):
        tf_privacy_attack_floor(10, 10, 1)


def test_tf_privacy_attacks_missing_module_message(monkeypatch):
    # None in sys.modules makes the import fail, as on a plain tensorflow-privacy 0.9.0 install
    monkeypatch.setitem(sys.modules, "tensorflow_privacy.privacy.privacy_tests.membership_inference_attack", None)
    assert not tf_privacy_attacks_available()
    with pytest.raises(ImportError, match="tf_privacy_mia_addon"):
        run_tf_privacy_attacks(np.full((2, 2), 0.5), np.full((2, 2), 0.5), [0, 1], [0, 1])
