"""Tests for tfdpmech's own membership-inference attacks (tfdpmech.audit.mia_attacks) and their dispatch.

Everything here runs on every stack except the cross-check against tensorflow-privacy's own attack
code, which exists only where tensorflow-privacy installs (TensorFlow 2.15).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tfdpmech.audit import mia_attacks
from tfdpmech.audit.mia_run import (
    mia_attack_floor,
    mia_attacks_available,
    mia_implementation,
    run_mia_attacks,
    tf_privacy_attacks_available,
)

TF_MIA_MODULE = "tensorflow_privacy.privacy.privacy_tests.membership_inference_attack"


def _two_class(p_true, label=0):
    """Probability vectors over 2 classes whose true class ``label`` has probability ``p_true``."""
    p_true = np.asarray(p_true, dtype=np.float64)
    probs = np.empty((p_true.size, 2))
    probs[:, label], probs[:, 1 - label] = p_true, 1 - p_true
    return probs, np.full(p_true.size, label)


def _random_outputs(n, c, rng, concentration=1.0):
    return rng.dirichlet(np.full(c, concentration), size=n), rng.integers(0, c, n)


# --- known inputs, every stack --------------------------------------------------------------------


def test_hand_computed_threshold_attack():
    # p[y] of members 0.9, 0.6, 0.3 and non-members 0.8, 0.2, 0.1. Member-over-non-member pairs:
    # 0.9 beats 3, 0.6 beats 2, 0.3 beats 2 -> AUC 7/9. Best threshold "p[y] >= 0.3": TPR 1, FPR 1/3.
    pin, yin = _two_class([0.9, 0.6, 0.3])
    pout, yout = _two_class([0.8, 0.2, 0.1])
    res = mia_attacks.threshold_attack(pin, pout, yin, yout)
    assert res["auc"] == pytest.approx(7 / 9, abs=1e-12)
    assert res["advantage"] == pytest.approx(2 / 3, abs=1e-12)
    # the labels pick the column: the same numbers with the true class in column 1
    pin1, yin1 = _two_class([0.9, 0.6, 0.3], label=1)
    pout1, yout1 = _two_class([0.8, 0.2, 0.1], label=1)
    assert mia_attacks.threshold_attack(pin1, pout1, yin1, yout1) == res
    # one-hot labels are read as their argmax
    assert mia_attacks.threshold_attack(pin1, pout1, np.eye(2)[yin1], np.eye(2)[yout1]) == res


def test_loss_and_roc_metrics_on_known_values():
    probs = np.array([[0.25, 0.75], [1.0, 0.0], [0.5, 0.5]])
    loss = mia_attacks.cross_entropy_loss(probs, np.array([1, 1, 0]))
    np.testing.assert_allclose(loss, [-np.log(0.75), -np.log(1e-8), np.log(2)], rtol=1e-15)
    # a score that ranks every non-member above every member: AUC 0, but |TPR - FPR| reaches 1
    # (the advantage is tensorflow-privacy's max |TPR - FPR|, which counts the inverted attack)
    assert mia_attacks.roc_metrics([0.1, 0.2], [0.3, 0.4]) == {"advantage": 1.0, "auc": 0.0}
    # all scores tied: the only thresholds give TPR = FPR
    assert mia_attacks.roc_metrics([1.0, 1.0], [1.0, 1.0, 1.0]) == {"advantage": 0.0, "auc": 0.5}


def test_separable_members_give_auc_one_and_advantage_one():
    rng = np.random.default_rng(0)
    pin, yin = _two_class(rng.uniform(0.9, 0.99, 150))
    pout, yout = _two_class(rng.uniform(0.2, 0.6, 120))
    res = run_mia_attacks(pin, pout, yin, yout, implementation="tfdpmech", seed=0)
    assert list(res) == ["THRESHOLD_ATTACK", "LOGISTIC_REGRESSION"]
    for name, r in res.items():
        assert r == {"advantage": 1.0, "auc": 1.0, "implementation": "tfdpmech"}, name


def test_identical_distributions_give_auc_near_one_half():
    """Members and non-members drawn from one distribution: AUC 0.5 ± 0.04, advantage < 0.08.

    With 2,000 + 2,000 records the AUC's null standard deviation is sqrt((n+m+1)/(12nm)) ≈ 0.009,
    so 0.04 is over 4 standard deviations; the advantage is a two-sample Kolmogorov–Smirnov
    statistic, whose 99.9 % null quantile at these sizes is 1.95·sqrt(2/2000) ≈ 0.062.
    """
    rng = np.random.default_rng(1)
    probs, labels = _random_outputs(4000, 10, rng)
    res = run_mia_attacks(probs[:2000], probs[2000:], labels[:2000], labels[2000:], implementation="tfdpmech",
                          seed=1)
    for name, r in res.items():
        assert abs(r["auc"] - 0.5) < 0.04, (name, r)
        assert 0 < r["advantage"] < 0.08, (name, r)


def test_trained_attack_finds_a_signal_only_in_the_probability_vector():
    # the true class's probability is identically distributed; members put the remaining mass on
    # class 1, non-members on class 2. The loss threshold sees nothing, the logistic regression does.
    rng = np.random.default_rng(2)
    n = 300
    p_true = rng.uniform(0.3, 0.9, 2 * n)
    probs = np.zeros((2 * n, 3))
    probs[:, 0] = p_true
    probs[:n, 1] = 1 - p_true[:n]
    probs[n:, 2] = 1 - p_true[n:]
    labels = np.zeros(2 * n, dtype=int)
    res = run_mia_attacks(probs[:n], probs[n:], labels[:n], labels[n:], implementation="tfdpmech", seed=0)
    assert abs(res["THRESHOLD_ATTACK"]["auc"] - 0.5) < 0.1
    assert res["LOGISTIC_REGRESSION"]["auc"] > 0.99
    assert res["LOGISTIC_REGRESSION"]["advantage"] > 0.95


def test_trained_attack_is_reproducible_by_seed_and_scores_the_surplus():
    rng = np.random.default_rng(3)
    pin, yin = _random_outputs(40, 3, rng, concentration=0.3)
    pout, yout = _random_outputs(100, 3, rng)
    a = mia_attacks.logistic_regression_attack(pin, pout, yin, yout, seed=7)
    b = mia_attacks.logistic_regression_attack(pin, pout, yin, yout, seed=7)
    assert a == b
    # unbalanced either way: the surplus gets a score too (an unscored record would be NaN -> ValueError)
    c = mia_attacks.logistic_regression_attack(pout, pin, yout, yin, seed=7)
    assert 0 <= c["advantage"] <= 1 and 0 <= c["auc"] <= 1
    with pytest.raises(TypeError, match="seed must be None, an int or a numpy RandomState"):
        mia_attacks.logistic_regression_attack(pin, pout, yin, yout, seed=1.5)
    with pytest.raises(TypeError, match="seed must be None or an int"):
        run_mia_attacks(pin, pout, yin, yout, implementation="tfdpmech", seed="0")


def test_implementation_is_recorded_and_auto_falls_back(monkeypatch):
    assert mia_attacks_available()
    assert mia_implementation("auto") == ("tensorflow_privacy" if tf_privacy_attacks_available() else "tfdpmech")
    rng = np.random.default_rng(4)
    pin, yin = _random_outputs(30, 3, rng)
    pout, yout = _random_outputs(30, 3, rng)
    auto = run_mia_attacks(pin, pout, yin, yout, seed=0)
    assert {r["implementation"] for r in auto.values()} == {mia_implementation("auto")}
    # where tensorflow-privacy's attack module does not import, "auto" runs tfdpmech's attacks
    monkeypatch.setitem(sys.modules, TF_MIA_MODULE, None)
    assert mia_implementation("auto") == "tfdpmech"
    fallback = run_mia_attacks(pin, pout, yin, yout, seed=0)
    assert {r["implementation"] for r in fallback.values()} == {"tfdpmech"}
    assert fallback == run_mia_attacks(pin, pout, yin, yout, seed=0, implementation="tfdpmech")
    with pytest.raises(ImportError, match="tf_privacy_mia_addon"):
        run_mia_attacks(pin, pout, yin, yout, implementation="tensorflow_privacy")
    with pytest.raises(ValueError, match="implementation must be one of"):
        run_mia_attacks(pin, pout, yin, yout, implementation="sklearn")


def test_floor_of_tfdpmech_attacks_shrinks_with_the_sample():
    small = mia_attack_floor(100, 100, 2, repeats=5, seed=0, implementation="tfdpmech")
    large = mia_attack_floor(2000, 2000, 10, repeats=2, seed=0, implementation="tfdpmech")
    assert small["implementation"] == large["implementation"] == "tfdpmech"
    assert 0.05 < small["mean"] < 0.3 and small["max"] >= small["mean"]  # no signal, still positive
    assert 0 < large["mean"] < small["mean"] / 2
    assert mia_attack_floor(100, 100, 2, repeats=2, seed=0, implementation="tfdpmech") == \
        mia_attack_floor(100, 100, 2, repeats=2, seed=0, implementation="tfdpmech")


def test_attack_names():
    rng = np.random.default_rng(5)
    pin, yin = _random_outputs(20, 2, rng)
    pout, yout = _random_outputs(20, 2, rng)
    only = run_mia_attacks(pin, pout, yin, yout, ("THRESHOLD_ATTACK",), implementation="tfdpmech")
    assert list(only) == ["THRESHOLD_ATTACK"]
    with pytest.raises(ValueError, match=r"attack_types has unknown names \['RANDOM_FOREST'\]; choose from "
                                         r"\['LOGISTIC_REGRESSION', 'THRESHOLD_ATTACK'\]"):
        run_mia_attacks(pin, pout, yin, yout, ("RANDOM_FOREST",), implementation="tfdpmech")
    with pytest.raises(ValueError, match=r"attack_types has unknown names \(none given\)"):
        run_mia_attacks(pin, pout, yin, yout, (), implementation="tfdpmech")
    with pytest.raises(TypeError, match=r"attack_types must be a sequence of names.*pass \('THRESHOLD_ATTACK',\)"):
        run_mia_attacks(pin, pout, yin, yout, "THRESHOLD_ATTACK", implementation="tfdpmech")


# --- bad input: ValueError naming the argument and the fix, for either implementation ---------------

_P = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.5, 0.25, 0.25]])
_Y = np.array([0, 1, 2, 0])


def _nan_probs():
    p = _P.copy()
    p[1, 1] = np.nan
    return p


BAD_INPUTS = [
    ("nan", (_nan_probs(), _P, _Y, _Y), r"probs_train contains 1 NaN or infinite value\(s\); remove or impute"),
    ("logits", (_P, np.log(_P) * 3, _Y, _Y), r"probs_test must hold probabilities in \[0, 1\].*softmax"),
    ("empty", (_P, np.zeros((0, 3)), _Y, _Y), r"probs_test is empty.*pass at least one record"),
    ("empty-labels", (_P, _P, np.array([], dtype=int), _Y), r"labels_train is empty"),
    ("one-column", (_P[:, :1], _P[:, :1], _Y * 0, _Y * 0), r"probs_train must have shape.*np.column_stack"),
    ("columns", (_P, _P[:, :2], _Y, np.array([0, 1, 1, 0])), r"probs_train has 3 columns but probs_test has 2"),
    ("lengths", (_P, _P, _Y[:3], _Y), r"labels_train has 3 labels but probs_train has 4 rows; pass one label per row"),
    ("range", (_P, _P, _Y, np.array([0, 5, 1, 2])),
     r"labels_test holds labels in \[0, 5\], outside \[0, 2\] \(the columns of probs_test\)"),
    ("negative", (_P, _P, np.array([-1, 0, 1, 2]), _Y), r"labels_train holds labels in \[-1, 2\]"),
    ("fractional", (_P, _P, _Y + 0.5, _Y), r"labels_train holds non-integer values; pass integer class labels"),
    ("soft-labels", (_P, _P, _P, _Y), r"labels_train has shape \(4, 3\) but is not one-hot"),
]


@pytest.mark.parametrize("implementation", ["tfdpmech", "auto"])
@pytest.mark.parametrize("case,args,message", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_raises_value_error_naming_the_argument(case, args, message, implementation):
    with pytest.raises(ValueError, match=message):
        run_mia_attacks(*args, ("THRESHOLD_ATTACK",), implementation=implementation)


def test_trained_attack_needs_six_of_each():
    rng = np.random.default_rng(6)
    pin, yin = _random_outputs(5, 2, rng)
    pout, yout = _random_outputs(50, 2, rng)
    with pytest.raises(ValueError, match=r"needs at least 6 members and non-members \(probs_train has 5 rows"):
        run_mia_attacks(pin, pout, yin, yout, implementation="tfdpmech")
    assert set(run_mia_attacks(pin, pout, yin, yout, ("THRESHOLD_ATTACK",), implementation="tfdpmech")) == \
        {"THRESHOLD_ATTACK"}


# --- cross-check against tensorflow-privacy's own code (TensorFlow 2.15 stack) -----------------------

CROSS_CHECK_CASES = [
    # (n_members, n_non_members, num_classes, Dirichlet concentration of members): balanced, surplus of
    # members, surplus of non-members, a real signal, and 10 classes
    (200, 200, 2, 1.0),
    (300, 170, 10, 0.5),
    (150, 260, 5, 1.0),
    (250, 250, 10, 0.2),
]


@pytest.mark.parametrize("n_in,n_out,c,conc", CROSS_CHECK_CASES)
def test_equals_tensorflow_privacy_on_the_same_inputs(n_in, n_out, c, conc):
    """tfdpmech's numbers equal tensorflow-privacy's to 1e-9, for both attacks.

    The threshold attack is deterministic. The trained attack draws its balancing subsample and its
    shuffle from numpy's legacy generator in the same order as tensorflow-privacy draws them from the
    global ``np.random`` state; ``run_mia_attacks(seed=s)`` seeds that state with ``s`` for
    tensorflow-privacy's call, so both fit the same logistic regressions on the same halves.
    """
    pytest.importorskip(TF_MIA_MODULE + ".membership_inference_attack",
                        reason="tensorflow-privacy's attack code installs only on the TensorFlow 2.15 stack")
    rng = np.random.default_rng(c * 1000 + n_in)
    pin, yin = _random_outputs(n_in, c, rng, concentration=conc)
    pout, yout = _random_outputs(n_out, c, rng)
    np.random.seed(123)
    global_state = np.random.get_state()
    for seed in (0, 11):
        ours = run_mia_attacks(pin, pout, yin, yout, implementation="tfdpmech", seed=seed)
        theirs = run_mia_attacks(pin, pout, yin, yout, implementation="tensorflow_privacy", seed=seed)
        assert list(theirs) == list(ours) == ["THRESHOLD_ATTACK", "LOGISTIC_REGRESSION"]
        for name in ours:
            assert theirs[name]["implementation"] == "tensorflow_privacy"
            for metric in ("advantage", "auc"):
                assert ours[name][metric] == pytest.approx(theirs[name][metric], abs=1e-9), (seed, name, metric)
    # the seeded tensorflow-privacy call leaves numpy's global generator where it was
    after = np.random.get_state()
    assert after[0] == global_state[0] and np.array_equal(after[1], global_state[1]) and after[2:] == global_state[2:]
    # and a different seed is a different split: the seed is used, not ignored
    other = run_mia_attacks(pin, pout, yin, yout, ("LOGISTIC_REGRESSION",), implementation="tfdpmech", seed=1)
    assert other["LOGISTIC_REGRESSION"]["auc"] != ours["LOGISTIC_REGRESSION"]["auc"]
