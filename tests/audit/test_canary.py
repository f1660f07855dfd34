"""One-run canary audit (Steinke, Nasr & Jagielski 2023): the bound, its calibration and its power."""

import math

import numpy as np
import pytest
from scipy import stats

from tfdpmech.audit import canary
from tfdpmech.audit.canary import (
    CanaryAudit,
    VERDICT_BUG,
    VERDICT_REFUTED,
    audit_scores,
    audit_verdict,
    ball_canaries,
    canary_audit,
    digits_canaries,
    draw_membership,
    epsilon_lower_bound,
    guess_membership,
    loss_scores,
    margin_scores,
    mislabel,
    noise_canaries,
    p_value,
)

BETA = 0.05
M = 1000


def _q(eps):
    return 1.0 / (1.0 + math.exp(-eps))


# --- the bound ----------------------------------------------------------------------------------
@pytest.mark.parametrize("v,r,m,eps", [(120, 200, 1000, 0.3), (190, 200, 500, 2.0), (0, 10, 10, 1.0), (50, 50, 50, 4.0)])
def test_pure_dp_p_value_is_the_binomial_tail(v, r, m, eps):
    assert p_value(v, r, m, eps) == pytest.approx(stats.binom.sf(v - 1, r, _q(eps)), rel=1e-12)


@pytest.mark.parametrize("v,r,m,eps,delta", [(120, 200, 1000, 0.3, 1e-5), (60, 80, 100, 1.0, 1e-3), (7, 9, 20, 0.5, 0.01)])
def test_approximate_dp_p_value_matches_theorem_3_over_all_i(v, r, m, eps, delta):
    """The maximum over i = 1..m of Theorem 3, written out directly (no truncation at i = v)."""
    f = lambda u: stats.binom.sf(u - 1, r, _q(eps))  # P[Binomial(r, q) >= u]; f(u) = 1 for u <= 0
    direct = f(v) + 2 * m * delta * max((f(v - i) - f(v)) / i for i in range(1, m + 1))
    assert p_value(v, r, m, eps, delta) == pytest.approx(min(direct, 1.0), rel=1e-9)
    assert p_value(v, r, m, eps, delta) > p_value(v, r, m, eps)


@pytest.mark.parametrize("v,r,m,delta", [(600, 1000, 1000, 0.0), (600, 1000, 1000, 1e-5), (200, 200, 1000, 1e-5),
                                         (45, 50, 1000, 0.0), (300, 500, 2000, 1e-4)])
def test_bound_is_the_first_epsilon_whose_p_value_reaches_beta(v, r, m, delta):
    lb = epsilon_lower_bound(v, r, m, delta=delta, confidence=1 - BETA)
    assert lb > 0
    for eps in np.linspace(0, lb, 25):  # every ε below the bound is rejected
        assert p_value(v, r, m, float(eps), delta) < BETA
    assert p_value(v, r, m, lb + 1e-4, delta) >= BETA


def test_bound_grows_with_correct_guesses_and_shrinks_with_delta_and_confidence():
    bounds = [epsilon_lower_bound(v, 500, 1000) for v in (260, 300, 400, 480, 500)]
    assert bounds == sorted(bounds) and bounds[0] < bounds[-1]
    assert epsilon_lower_bound(400, 500, 1000, delta=1e-3) < epsilon_lower_bound(400, 500, 1000)
    assert epsilon_lower_bound(400, 500, 1000, confidence=0.99) < epsilon_lower_bound(400, 500, 1000)
    # all 1,000 guesses right: the largest bound m = 1,000 canaries can give at 95 % (q^1000 = 0.05)
    q = 0.05 ** (1 / 1000)
    assert epsilon_lower_bound(1000, 1000, 1000) == pytest.approx(math.log(q / (1 - q)), abs=1e-5)
    assert epsilon_lower_bound(250, 500, 1000) == 0.0  # chance level rejects nothing


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0])
def test_exact_level_on_randomized_response(eps):
    """ε-DP randomized response on every canary, all m guessed: W ~ Binomial(m, q(ε)) exactly.

    P[bound > ε] is then an exact binomial tail: at most β, and close to β for large m (the
    bound is not needlessly conservative).
    """
    for m in (50, 200, 1000):
        q = _q(eps)
        v0 = next((v for v in range(m + 1) if p_value(v, m, m, eps) < BETA), None)
        if v0 is None:  # not even m/m correct would exceed ε
            assert epsilon_lower_bound(m, m, m) <= eps
            continue
        assert epsilon_lower_bound(v0, m, m) > eps >= epsilon_lower_bound(v0 - 1, m, m)
        level = stats.binom.sf(v0 - 1, m, q)
        assert level <= BETA
        if m == 1000:
            assert level >= 0.5 * BETA


# --- calibration on mechanisms with known ε -----------------------------------------------------
def _audit_many(noise, eps, *, k, delta, seeds):
    bounds = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        member = draw_membership(M, rng)
        scores = member + noise(rng)  # the mechanism releases each canary's presence, noised
        bounds.append(audit_scores(scores, member, k_plus=k, k_minus=k, delta=delta).epsilon_lower_bound)
    return np.array(bounds)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0])
def test_laplace_mechanism_calibration_and_power(eps):
    """Presence + Laplace(1/ε) is ε-DP per canary. k₊ = k₋ = m/4 (the default rule), 100 seeds.

    Laplace is the mechanism where the one-run audit is tight (in its tails every guess is
    randomized response at ε), so a 95 % bound exceeds ε in about 5 % of seeds, not never;
    measured 3–5 of 100. The test allows what a correct 95 % bound does (13 or more of 100 has
    probability 0.0015 at rate 0.05) and requires power: median bound ≥ ε/2 at m = 1,000.
    """
    bounds = _audit_many(lambda rng: rng.laplace(0.0, 1.0 / eps, M), eps, k=M // 4, delta=0.0, seeds=range(100))
    assert np.sum(bounds > eps) <= 12
    assert np.median(bounds) >= eps / 2


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0])
def test_gaussian_mechanism_calibration_and_power(eps):
    """Presence + N(0, σ²), σ from dp_accounting for (ε, 1e-5)-DP; audited with δ = 1e-5, k₊ = k₋ = 50.

    The Gaussian mechanism's (ε, δ) comes from tails a one-run audit with m = 1,000 cannot see:
    measured medians 0.0, 0.26, 0.70, 1.54 for ε = 0.5, 1, 2, 4 (0.39ε at best), never above ε
    in 200 seeds. Power asserted: median ≥ ε/4 for ε ≥ 2.
    """
    from dp_accounting.pld import common, privacy_loss_mechanism

    sigma = privacy_loss_mechanism.GaussianPrivacyLoss.from_privacy_guarantee(
        common.DifferentialPrivacyParameters(eps, 1e-5), sensitivity=1.0).standard_deviation
    bounds = _audit_many(lambda rng: rng.normal(0.0, sigma, M), eps, k=50, delta=1e-5, seeds=range(50))
    assert np.sum(bounds > eps) <= 8  # P[Binomial(50, 0.05) >= 9] = 0.0015
    if eps >= 2:
        assert np.median(bounds) >= eps / 4


def test_scores_independent_of_membership_give_a_bound_near_zero():
    bounds = []
    for seed in range(100):
        rng = np.random.default_rng(seed)
        member = draw_membership(M, rng)
        bounds.append(audit_scores(rng.normal(size=M), member).epsilon_lower_bound)
    bounds = np.array(bounds)
    assert np.sum(bounds > 0) <= 12  # a positive bound at ε = 0 is a false rejection: rate ≤ β
    assert np.median(bounds) == 0.0 and bounds.max() < 0.3
    constant = audit_scores(np.zeros(M), draw_membership(M, 1))  # ties: guesses by index
    assert constant.epsilon_lower_bound < 0.3


# --- guesses, scores, the audit API ---------------------------------------------------------------
def test_guesses_take_the_highest_and_lowest_scores():
    g = guess_membership([0.1, 5.0, -3.0, 2.0, 0.0], k_plus=2, k_minus=1)
    assert g.tolist() == [0, 1, -1, 1, 0]
    assert guess_membership([1.0, 1.0, 1.0], 1, 1).tolist() == [1, 0, -1]  # ties: by index


def test_audit_counts_correct_guesses():
    scores = np.array([9.0, 8.0, 7.0, 1.0, 0.0, -1.0])
    member = np.array([True, True, False, True, False, False])
    a = audit_scores(scores, member, k_plus=3, k_minus=3)
    assert (a.correct, a.m, a.k_plus, a.k_minus) == (4, 6, 3, 3)
    assert a.epsilon_lower_bound == epsilon_lower_bound(4, 6, 6)
    assert set(a.as_record()) == {"epsilon_lower_bound", "m", "k_plus", "k_minus", "correct", "confidence"}


def test_loss_and_margin_scores():
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.0, 1.0, 0.0]])
    labels = np.array([0, 0, 1])
    np.testing.assert_allclose(loss_scores(p, labels), np.log([0.7, 0.1, 1.0]))
    np.testing.assert_allclose(margin_scores(p, np.eye(3)[labels]), np.log([0.7 / 0.2, 0.1 / 0.8, np.inf]))
    assert loss_scores(p, np.array([1, 0, 0]))[2] == -np.inf  # kept, ranked lowest
    with pytest.raises(ValueError, match="logits"):
        loss_scores(np.array([[3.0, -1.0]]), np.array([0]))
    with pytest.raises(ValueError, match="NaN"):
        margin_scores(np.array([[np.nan, 0.5]]), np.array([0]))


def test_canary_audit_trains_once_on_the_included_canaries_and_is_reproducible():
    eps = 2.0
    x, y = noise_canaries(400, shape=(3,), seed=0)
    calls = []

    def train_fn(x_in, y_in):  # a "method": Laplace-noised presence of each canary
        calls.append(len(x_in))
        present = {tuple(row) for row in x_in}
        return np.array([float(tuple(row) in present) for row in x]) + np.random.default_rng(7).laplace(0, 1 / eps, len(x))

    def score_fn(released, cx, cy):
        assert cx is x and cy is y
        return released

    a = canary_audit(train_fn, score_fn, x, y, seed=3)
    b = canary_audit(train_fn, score_fn, x, y, seed=3)
    assert calls == [int(a.membership.sum())] * 2 and 150 < calls[0] < 250
    assert a.as_record() == b.as_record() and np.array_equal(a.membership, draw_membership(400, 3))
    assert (a.k_plus, a.k_minus) == canary.default_k(400) == (100, 100)
    assert 0.5 < a.epsilon_lower_bound <= eps


@pytest.mark.parametrize("kwargs,err,match", [
    (dict(k_plus=600, k_minus=500), ValueError, "k_plus \\+ k_minus"),
    (dict(k_plus=0, k_minus=0), ValueError, "k_plus"),
    (dict(k_plus=-1, k_minus=5), ValueError, "k_plus"),
    (dict(k_plus=2.5, k_minus=5), TypeError, "k_plus"),
    (dict(confidence=1.0), ValueError, "confidence"),
    (dict(confidence=0.0), ValueError, "confidence"),
    (dict(confidence=95), ValueError, "confidence"),
    (dict(confidence="0.95"), TypeError, "confidence"),
    (dict(delta=1.0), ValueError, "delta"),
    (dict(delta=-1e-5), ValueError, "delta"),
])
def test_bad_audit_input_is_refused_before_training(kwargs, err, match):
    x, y = noise_canaries(M, shape=(2,), seed=0)

    def train_fn(*_):
        raise AssertionError("trained despite bad input")

    with pytest.raises(err, match=match):
        canary_audit(train_fn, lambda *a: None, x, y, **kwargs)
    with pytest.raises(err, match=match):
        audit_scores(np.zeros(M), np.zeros(M, bool), **{"k_plus": 10, "k_minus": 10, **kwargs})


def test_bad_counts_scores_and_membership():
    with pytest.raises(ValueError, match="correct=11 exceeds guesses=10"):
        epsilon_lower_bound(11, 10, 100)
    with pytest.raises(ValueError, match="guesses=101 exceeds .* m=100"):
        epsilon_lower_bound(50, 101, 100)
    with pytest.raises(TypeError, match="correct"):
        epsilon_lower_bound(5.0, 10, 100)
    with pytest.raises(ValueError, match="epsilon"):
        p_value(5, 10, 100, -0.1)
    with pytest.raises(ValueError, match="NaN"):
        audit_scores(np.array([0.0, np.nan, 1.0]), np.array([True, False, True]), k_plus=1, k_minus=1)
    with pytest.raises(ValueError, match="membership must have shape"):
        audit_scores(np.zeros(4), np.zeros(3, bool), k_plus=1, k_minus=1)
    with pytest.raises(ValueError, match="same number"):
        canary_audit(lambda *a: None, lambda *a: None, np.zeros((5, 2)), np.zeros((4, 10)))


def test_verdict_against_claimed_and_provable_epsilon():
    assert audit_verdict(2.5, claimed=1.0, provable=2.0) == VERDICT_BUG
    assert audit_verdict(2.5, claimed=1.0, provable=None) == VERDICT_REFUTED  # none proven, claim too small
    assert audit_verdict(2.5, claimed=1.0, provable=8.0) == VERDICT_REFUTED
    assert audit_verdict(0.9, claimed=1.0, provable=1.0) is None
    assert audit_verdict(4.0, claimed=None, provable=None) is None  # no privacy: nothing to refute
    assert audit_verdict(None, claimed=1.0, provable=1.0) is None
    # ε per query: the audit read m answers, so it refutes only what exceeds m·ε
    assert audit_verdict(2.5, claimed=1.0, provable=None, per="query", queries=1000) is None
    assert audit_verdict(2.5, claimed=0.001, provable=None, per="query", queries=1000) == VERDICT_REFUTED
    with pytest.raises(ValueError, match="per"):
        audit_verdict(1.0, claimed=1.0, provable=1.0, per="run")


# --- canaries -----------------------------------------------------------------------------------
def test_mislabel_gives_every_canary_a_wrong_label():
    pool_y = np.arange(300) % 10
    pool = np.random.default_rng(0).random((300, 4)).astype(np.float32)
    x, y = mislabel(pool, pool_y, 200, num_classes=10, seed=1)
    x2, y2 = mislabel(pool, np.eye(10)[pool_y], 200, num_classes=10, seed=1)
    assert x.shape == (200, 4) and y.shape == (200, 10) and np.array_equal(y, y2) and np.array_equal(x, x2)
    picked = [int(np.flatnonzero((pool == row).all(axis=1))[0]) for row in x]
    assert len(set(picked)) == 200  # without replacement
    assert not np.any(np.argmax(y, axis=1) == pool_y[picked])
    with pytest.raises(ValueError, match="pool of 300"):
        mislabel(pool, pool_y, 301, num_classes=10)


def test_digits_and_noise_canaries():
    x, y = digits_canaries(1000, seed=0)
    assert x.shape == (1000, 28, 28, 1) and x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1
    assert x[:, :4].max() == 0 and x[:, 24:].max() == 0  # centred, MNIST-style border
    assert np.allclose(y.sum(axis=1), 1)
    with pytest.raises(ValueError, match="1797"):
        digits_canaries(1798)
    n, ny = noise_canaries(50, seed=0)
    assert n.shape == (50, 28, 28, 1) and 0 <= n.min() and n.max() <= 1 and ny.shape == (50, 10)
    b, by = ball_canaries(2000, 3, radius=2.0, num_classes=3, seed=0)
    norms = np.linalg.norm(b, axis=1)
    assert b.shape == (2000, 3) and norms.max() < 2.0 and by.shape == (2000, 3)
    assert abs(np.mean(norms < 1.0) - 1 / 8) < 0.03  # uniform in the ball: P[‖x‖ < R/2] = 2^-3
    with pytest.raises(ValueError, match="radius"):
        ball_canaries(10, 3, radius=0.0)


# --- real training ------------------------------------------------------------------------------
@pytest.mark.slow
def test_non_private_mlp_on_mnist_sample_has_a_lower_bound_above_one():
    """The audit has power on real training: 1,000 noise canaries, a softmax MLP, 15 epochs."""
    import keras
    import tensorflow as tf

    from tfdpmech import data, models

    splits = data.load("mnist_sample")
    x_private, y_private = splits.x_train[1000:], splits.y_train[1000:]
    cx, cy = noise_canaries(M, seed=1000)

    def train_fn(x_in, y_in):
        keras.utils.set_random_seed(0)
        model = models.standard_mlp(10)
        model.compile(keras.optimizers.Adam(5e-3), loss=keras.losses.CategoricalCrossentropy(from_logits=True))
        model.fit(np.concatenate([x_private, x_in]), np.concatenate([y_private, y_in]), epochs=15,
                  batch_size=200, verbose=0)
        return model

    def score_fn(model, x, y):
        return loss_scores(tf.nn.softmax(model.predict(x, verbose=0)).numpy(), y)

    result = canary_audit(train_fn, score_fn, cx, cy, seed=0)
    assert isinstance(result, CanaryAudit)
    assert result.epsilon_lower_bound >= 1.0, str(result)
