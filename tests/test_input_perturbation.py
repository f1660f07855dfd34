"""Input perturbation for DP-ERM (Kang et al. 2020): spec seed_002 §8 anchors and the issue's bad input."""

import gc
import math
import weakref

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdpmech import PrivacyLedger
from tfdpmech.mechanisms.dp_erm import (
    L2BallConstraint,
    erm_objective,
    erm_optimum,
    linear_model,
    paper_mlp,
)
from tfdpmech.mechanisms.input_perturbation import (
    InputPerturbation,
    check_labels_in_classes,
    clip_rows,
    epsilon_paper_accountant,
    keras_l2_factor,
    logistic_constants,
    paper_constant,
    perturb_record,
    randomized_response,
    sigma_input_perturbation,
    sigma_paper_accountant,
)

ANCHOR = dict(epsilon=0.1, delta=1e-5, n=1000, T=50, G=1.0, curvature=0.01)


def synthetic(n=400, d=5, seed=0, scale=3.0):
    """Spec §8.12 data: rows N(0, I) clipped to the unit ball, labels from a logistic model."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
    w0 = rng.normal(size=d)
    y = (scale * x @ w0 + rng.logistic(size=n) > 0).astype(np.int64)
    return x, y


def args(a):
    return (a["epsilon"], a["delta"], a["n"], a["T"], a["G"], a["curvature"])


# --- §8.1 calibration vector ------------------------------------------------------------------------
def test_calibration_vector():
    assert paper_constant(0.1, 1e-5) == pytest.approx(8.0347436, rel=1e-7)
    sigma = sigma_input_perturbation(*args(ANCHOR))
    assert sigma**2 == pytest.approx(4.6298000, rel=1e-7)
    assert sigma == pytest.approx(2.1516970, rel=1e-7)
    s1 = sigma_input_perturbation(*args(ANCHOR), c=1.0)
    assert s1**2 == pytest.approx(0.57622250, rel=1e-7)
    assert s1 == pytest.approx(0.75909321, rel=1e-7)
    assert sigma_paper_accountant(*args(ANCHOR)) ** 2 == pytest.approx(4.6297783, rel=1e-7)
    eps_back = epsilon_paper_accountant(sigma, 1e-5, 1000, 50, 1.0, 0.01)
    assert eps_back == pytest.approx(0.0999998, abs=1e-7) and eps_back <= 0.1
    literal = sigma_input_perturbation(*args(ANCHOR), condition="pl", paper_literal_pl=True)
    assert literal**2 == pytest.approx(0.46298000, rel=1e-7)
    # strong convexity implies PL with μ = Δ: the consistent PL reading gives the same σ (spec §4)
    assert sigma_input_perturbation(*args(ANCHOR), condition="pl") == pytest.approx(sigma, rel=1e-12)
    assert epsilon_paper_accountant(sigma, 1e-5, 1000, 0, 1.0, 0.01) == 0.0
    with pytest.raises(ValueError, match="paper_literal_pl"):
        sigma_input_perturbation(*args(ANCHOR), paper_literal_pl=True)


# --- §8.2 constants ------------------------------------------------------------------------------------
def test_logistic_constants():
    k = logistic_constants(0.01, 1.0)
    assert k.theta_bound == pytest.approx(11.774100, rel=1e-7)
    assert k.G == pytest.approx(1.1177410, rel=1e-7)
    assert k.beta == pytest.approx(0.26, rel=1e-12)
    assert k.strong_convexity == 0.01 and k.phi2 == 0.25 and k.keras_l2 == 0.005
    # the Keras convention: L2(0.005) adds 0.005·‖w‖² = (0.01/2)‖w‖²
    assert logistic_constants(0.005, l2_convention="keras") == k
    assert keras_l2_factor(0.01) == 0.005
    assert logistic_constants(0.01, g_convention="data_term").G == 1.0
    k2 = logistic_constants(0.01, 2.0)
    assert k2.G == pytest.approx(2.0 + 0.01 * k.theta_bound) and k2.beta == pytest.approx(1.01)
    m = logistic_constants(0.01, num_classes=3)
    assert m.theta_bound == pytest.approx(math.sqrt(2 * math.log(3) / 0.01))
    assert m.G == pytest.approx(math.sqrt(2) + 0.01 * m.theta_bound) and m.beta == pytest.approx(0.51)
    for bad in (dict(l2=0), dict(l2=-1), dict(l2=0.01, feature_norm_bound=0), dict(l2=0.01, num_classes=1),
                dict(l2=0.01, g_convention="x"), dict(l2=0.01, l2_convention="x")):
        with pytest.raises(ValueError):
            logistic_constants(**bad)


def test_theta_bound_holds_at_the_optimum():
    # D = sqrt(2 ln M / λ) bounds the regularised optimum for any data, noisy data included
    x, y = synthetic(300, 4, seed=3, scale=50.0)
    for num_classes, labels in ((2, y), (3, (x[:, 0] > 0).astype(int) + (x[:, 1] > 0.3))):
        theta, _ = erm_optimum(x * 5.0, labels, 0.01, num_classes)  # even beyond the unit ball
        assert np.linalg.norm(theta) <= logistic_constants(0.01, num_classes=num_classes).theta_bound


# --- §8.3 monotonicity ---------------------------------------------------------------------------------
def test_monotonicity():
    base = sigma_input_perturbation(*args(ANCHOR))

    def with_(**kw):
        a = dict(ANCHOR, **{k: v for k, v in kw.items() if k in ANCHOR})
        return sigma_input_perturbation(*args(a), kappa=kw.get("kappa", 1.0))

    assert with_(epsilon=0.2) < base and with_(n=2000) < base and with_(curvature=0.1) < base
    assert with_(kappa=2.0) < base
    assert with_(T=100) > base and with_(G=2.0) > base and with_(delta=1e-8) > base
    eps = [epsilon_paper_accountant(base, 1e-5, 1000, t, 1.0, 0.01) for t in range(0, 60, 5)]
    assert all(a < b for a, b in zip(eps, eps[1:]))


# --- §8.4 validation / bad input ----------------------------------------------------------------------
def test_calibration_rejects_bad_parameters():
    a = dict(ANCHOR)
    with pytest.raises(ValueError, match="n must be >= 2"):
        sigma_input_perturbation(a["epsilon"], a["delta"], 1, 50, 1.0, 0.01)
    for delta in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="delta"):
            sigma_input_perturbation(0.1, delta, 1000, 50, 1.0, 0.01)
    for eps in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="epsilon"):
            sigma_input_perturbation(eps, 1e-5, 1000, 50, 1.0, 0.01)
    with pytest.raises(TypeError, match="epsilon"):
        sigma_input_perturbation("0.1", 1e-5, 1000, 50, 1.0, 0.01)
    for bad in (dict(G=0), dict(curvature=-1), dict(c=0), dict(kappa=0), dict(T=0)):
        kw = dict(ANCHOR)
        kw.update({k: v for k, v in bad.items() if k in kw})
        with pytest.raises(ValueError):
            sigma_input_perturbation(*args(kw), **{k: v for k, v in bad.items() if k not in kw})
    with pytest.raises(ValueError, match="epsilon"):
        InputPerturbation(0, 1e-5, 10)
    with pytest.raises(ValueError, match="delta"):
        InputPerturbation(0.1, 1.0, 10)


def test_perturb_rejects_bad_data():
    x, y = synthetic(50, 3)
    with pytest.raises(ValueError, match="n >= 2"):
        InputPerturbation(0.1, 1e-3, 5, seed=0).perturb(x[:1], y[:1])
    with pytest.raises(ValueError, match="declared with n=60"):
        InputPerturbation(0.1, 1e-3, 5, n=60, seed=0).perturb(x, y)
    with pytest.raises(ValueError, match=r"not in the declared binary classes"):
        InputPerturbation(0.1, 1e-3, 5, seed=0).perturb(x, np.where(y > 0, 2, 0))
    with pytest.raises(ValueError, match="outside the declared classes 0..2"):
        InputPerturbation(0.1, 1e-3, 5, num_classes=3, seed=0).perturb(x, y * 3)
    with pytest.raises(ValueError, match="x has 50 records but y has 49"):
        InputPerturbation(0.1, 1e-3, 5, seed=0).perturb(x, y[:-1])
    x_nan = x.copy()
    x_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        InputPerturbation(0.1, 1e-3, 5, seed=0).perturb(x_nan, y)
    with pytest.raises(ValueError, match="2-D"):
        InputPerturbation(0.1, 1e-3, 5, seed=0).perturb(x.reshape(50, 3, 1), y)
    with pytest.raises(ValueError, match="per_record"):
        InputPerturbation(0.1, 1e-3, 5, calibration="local_gaussian", noise_structure="shared")
    with pytest.raises(ValueError, match="label_epsilon"):
        InputPerturbation(0.1, 1e-3, 5, label_epsilon=0.05)


def test_row_norm_above_bound_raises_or_clips_and_records():
    x, y = synthetic(40, 3)
    x[0] = [1.5, 0.0, 0.0]  # norm 1.5 > R = 1
    with pytest.raises(ValueError, match="feature_norm_bound=1"):
        InputPerturbation(0.1, 1e-3, 5, seed=0).perturb(x, y)
    ip = InputPerturbation(0.1, 1e-3, 5, clip=True, seed=0)
    ip.perturb(x, y)
    assert "clipped" in ip.release.details["clip"] and ip.rows_clipped == 1
    assert x[0, 0] == 1.5  # the caller's array is not modified
    clipped, count = clip_rows(x, 1.0)
    assert count == 1 and np.linalg.norm(clipped, axis=1).max() <= 1.0 + 1e-12
    assert np.allclose(clipped[1:], x[1:])
    # within the float slack: accepted without clipping
    x[0] = [1.0 + 1e-9, 0.0, 0.0]
    InputPerturbation(0.1, 1e-3, 5, seed=0).perturb(x, y)


def test_labels_mapping():
    assert check_labels_in_classes(np.array([-1, 1, 1]), 2).tolist() == [0, 1, 1]
    assert check_labels_in_classes(np.array([0, 1, 0]), 2).tolist() == [0, 1, 0]
    assert check_labels_in_classes(np.eye(3)[[2, 0, 1]], 3).tolist() == [2, 0, 1]
    with pytest.raises(ValueError, match="declared"):
        check_labels_in_classes(np.array([-1, 0, 1]), 2)
    with pytest.raises(ValueError):
        check_labels_in_classes(np.array([0.5, 1.0]), 3)


def test_minibatch_is_an_error_in_strict_mode():
    x, y = synthetic(60, 3)
    with pytest.raises(ValueError, match="full-batch"):
        InputPerturbation(0.1, 1e-3, 5, batch_size=20, seed=0).perturb(x, y)
    ip = InputPerturbation(0.1, 1e-3, 5, batch_size=20, strict=False, seed=0)
    with pytest.warns(UserWarning, match="extrapolate"):
        ip.perturb(x, y)
    assert ip.n_effective == 20 and ip.T_effective == 15  # n -> B, T -> all optimizer steps (spec P2)
    ip = InputPerturbation(0.1, 1e-3, 3, seed=0)
    xn, yn = ip.perturb(x, y)
    model = ip.make_linear_model()
    with pytest.raises(ValueError, match="full-batch"):
        ip.fit(model, xn, yn, batch_size=20)
    model.compile(keras.optimizers.SGD(0.1), loss=keras.losses.BinaryCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match="full-batch"):  # the callback alone also refuses it
        model.fit(xn, yn, batch_size=20, epochs=1, verbose=0, callbacks=[ip.budget_callback()])
    for bad in ("validation_split", "sample_weight", "class_weight"):
        with pytest.raises(ValueError, match="spec P1/P3"):
            ip.fit(ip.make_linear_model(), xn, yn, **{bad: 0.1})


# --- §8.5 freezing, once-only, no raw data ------------------------------------------------------------
def test_noise_is_frozen_across_epochs():
    x, y = synthetic(64, 4)
    ip = InputPerturbation(0.5, 1e-3, 3, seed=1)
    xn, yn = ip.perturb(x, y)
    model = ip.make_linear_model()
    model.compile(keras.optimizers.SGD(0.5), loss=keras.losses.BinaryCrossentropy(from_logits=True),
                  run_eagerly=True)
    seen = []
    inner = model.train_step

    def spy(data):
        seen.append(np.array(data[0]))
        return inner(data)

    model.train_step = spy
    ip.fit(model, xn, yn)
    assert len(seen) == 3
    assert np.array_equal(seen[0], seen[2]) and np.array_equal(seen[0], xn)
    assert not np.allclose(seen[0], x)


def test_second_perturbation_needs_new_budget():
    x, y = synthetic(30, 3)
    ledger = PrivacyLedger()
    ip = InputPerturbation(0.2, 1e-3, 5, seed=0, ledger=ledger)
    x1, _ = ip.perturb(x, y)
    with pytest.raises(RuntimeError, match="charge_new_budget=True"):
        ip.perturb(x, y)
    x2, _ = ip.perturb(x, y, charge_new_budget=True)
    assert not np.array_equal(x1, x2)
    assert len(ledger) == 2 and ledger.epsilon_claimed() == pytest.approx(0.4)
    assert ledger.releases[1].details["charged_new_budget"] is True


def test_raw_data_not_kept():
    x, y = synthetic(30, 3)
    refs = [weakref.ref(x), weakref.ref(y)]
    ip = InputPerturbation(0.2, 1e-3, 5, seed=0)
    xn, _ = ip.perturb(x, y)
    del x, y
    gc.collect()
    assert all(r() is None for r in refs)
    assert not any(isinstance(v, np.ndarray) and v.size > 3 for v in vars(ip).values())


# --- §8.6 distribution --------------------------------------------------------------------------------
def test_noise_distribution_per_record_and_shared():
    n, d = 20_000, 5
    x = np.zeros((n, d))
    y = np.arange(n) % 2
    ip = InputPerturbation(0.5, 1e-6, 10, seed=2)
    z = ip.perturb(x, y)[0].astype(np.float64)
    sigma = ip.sigma
    assert abs(z.std() / sigma - 1.0) < 0.01
    assert abs(z.mean()) < 4 * sigma / math.sqrt(n * d)
    # rows are independent: correlation between row pairs ~ 0 (|r| < 4/sqrt(pairs·d) whp; fixed seed)
    a, b = z[0::2].ravel(), z[1::2].ravel()
    assert abs(np.corrcoef(a, b)[0, 1]) < 4 / math.sqrt(a.size)
    shared = InputPerturbation(0.5, 1e-6, 10, noise_structure="shared", seed=2)
    with pytest.warns(UserWarning, match="no per-record protection"):
        zs = shared.perturb(x, y)[0]
    assert np.all(zs == zs[0]) and np.any(zs[0] != 0)
    assert shared.release.reproduction and shared.release.epsilon_provable is None


# --- §8.7 reproducibility -------------------------------------------------------------------------------
def test_reproducibility():
    x, y = synthetic(40, 3)
    a = InputPerturbation(0.2, 1e-3, 5, seed=7).perturb(x, y)[0]
    b = InputPerturbation(0.2, 1e-3, 5, seed=7).perturb(x, y)[0]
    c = InputPerturbation(0.2, 1e-3, 5).perturb(x, y)[0]
    d = InputPerturbation(0.2, 1e-3, 5).perturb(x, y)[0]
    assert np.array_equal(a, b) and not np.array_equal(c, d) and not np.array_equal(a, c)
    assert not np.array_equal(perturb_record(x[0], 1.0), perturb_record(x[0], 1.0))
    assert np.array_equal(perturb_record(x[0], 1.0, 3), perturb_record(x[0], 1.0, 3))


# --- §8.8 Keras equivalence ---------------------------------------------------------------------------
@pytest.mark.parametrize("num_classes", [2, 3])
def test_keras_objective_matches_numpy(num_classes):
    lam = 0.05
    rng = np.random.default_rng(4)
    x, y = synthetic(200, 6, seed=4)
    if num_classes == 3:
        y = rng.integers(0, 3, size=200)
    model = linear_model(6, num_classes, l2=lam)
    loss_fn = (keras.losses.BinaryCrossentropy(from_logits=True) if num_classes == 2
               else keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    kernel = model.layers[-1].kernel
    xt = tf.constant(x, tf.float32)
    yt = tf.constant(y.reshape(-1, 1) if num_classes == 2 else y, tf.float32)
    for _ in range(3):
        theta = rng.normal(size=tuple(kernel.shape)) * 0.7
        kernel.assign(theta.astype(np.float32))
        with tf.GradientTape() as tape:
            value = loss_fn(yt, model(xt)) + tf.add_n(model.losses)
        grad = tape.gradient(value, kernel).numpy()
        ref, ref_grad = erm_objective(kernel.numpy(), x.astype(np.float32), y, lam, num_classes, return_grad=True)
        assert float(value) == pytest.approx(ref, abs=1e-6)
        np.testing.assert_allclose(grad, ref_grad, atol=1e-6)


# --- §8.9 projection -------------------------------------------------------------------------------------
def test_projection_after_every_step():
    x, y = synthetic(80, 4, scale=30.0)
    constraint = L2BallConstraint(0.3)
    w = tf.constant([[3.0], [4.0]])
    assert float(tf.norm(constraint(w))) == pytest.approx(0.3, rel=1e-6)
    assert np.array_equal(constraint(w * 0.01).numpy(), (w * 0.01).numpy())
    assert L2BallConstraint.from_config(constraint.get_config()).radius == 0.3
    with pytest.raises(ValueError, match="radius"):
        L2BallConstraint(0)

    ip = InputPerturbation(1.0, 1e-3, 6, l2=20.0, seed=0)  # D = sqrt(2 ln2 / 20) = 0.263
    xn, yn = ip.perturb(x, y)
    model = ip.make_linear_model()
    norms = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            norms.append(float(np.linalg.norm(model.layers[-1].kernel.numpy())))

    ip.fit(model, xn, yn, learning_rate=50.0, callbacks=[Record()])
    D = ip.constants.theta_bound
    assert len(norms) == 6 and max(norms) <= D * (1 + 1e-6) and max(norms) > 0.99 * D  # active


# --- §8.10 shared noise + unregularised intercept: zero privacy -----------------------------------------
def test_shared_noise_with_free_intercept_leaves_weights_noise_free():
    from scipy.optimize import minimize

    rng = np.random.default_rng(0)
    n, d, lam = 500, 5, 0.01
    x = rng.normal(size=(n, d))
    s = np.where(x @ rng.normal(size=d) + rng.logistic(size=n) > 0, 1.0, -1.0)

    def fit(features):
        def fun(p):
            w, b = p[:d], p[d]
            m = s * (features @ w + b)
            value = np.mean(np.logaddexp(0, -m)) + 0.5 * lam * w @ w  # the bias is not regularised
            coef = -s / (1 + np.exp(m)) / n
            return value, np.concatenate([features.T @ coef + lam * w, [coef.sum()]])
        return minimize(fun, np.zeros(d + 1), jac=True, method="L-BFGS-B",
                        options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 5000}).x

    clean = fit(x)
    for sigma in (0.5, 5.0):
        noisy = fit(x + rng.normal(size=d) * sigma)  # one z shared by all rows
        np.testing.assert_allclose(noisy[:d], clean[:d], atol=1e-4)  # weights untouched by the noise

    ip = InputPerturbation(0.1, 1e-3, 3, noise_structure="shared", seed=0)
    x01, y01 = synthetic(40, 3)
    with pytest.warns(UserWarning, match="shared"):
        xn, yn = ip.perturb(x01, y01)
    with pytest.raises(ValueError, match="zero privacy"):
        ip.make_linear_model(use_bias=True, regularize_bias=False)
    free_bias = linear_model(3, use_bias=True, regularize_bias=False)
    with pytest.raises(ValueError, match="zero privacy"):
        ip.fit(free_bias, xn, yn)
    free_bias.compile(keras.optimizers.SGD(0.1), loss=keras.losses.BinaryCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match="zero privacy"):
        free_bias.fit(xn, yn, batch_size=40, epochs=1, verbose=0, callbacks=[ip.budget_callback()])
    ip.make_linear_model(use_bias=True, regularize_bias=True)  # allowed: the bias is regularised


# --- §8.11 callback --------------------------------------------------------------------------------------
def test_callback_stops_at_T_and_logs_epsilon():
    x, y = synthetic(100, 4)
    T = 4
    ip = InputPerturbation(0.3, 1e-4, T, seed=0)
    xn, yn = ip.perturb(x, y)
    model = ip.make_linear_model()
    history = ip.fit(model, xn, yn, epochs=T + 5)
    eps = history.history["ip_epsilon"]
    assert len(eps) == T and ip.steps_taken == T
    assert eps[-1] <= 0.3 and eps[-1] == pytest.approx(0.3, rel=1e-4)
    assert all(a < b for a, b in zip(eps, eps[1:]))
    assert history.history["epsilon_claimed"][-1] == 0.3 and math.isnan(history.history["epsilon_provable"][-1])
    with pytest.raises(RuntimeError, match="T=4"):  # a further fit would take step T+1
        model.fit(xn, yn, batch_size=len(xn), epochs=1, verbose=0, callbacks=[ip.budget_callback()])
    with pytest.raises(ValueError, match="fingerprint"):
        ip.fit(ip.make_linear_model(), xn + 1.0, yn)


def test_callback_warns_for_non_sgd_and_requires_perturbation():
    x, y = synthetic(40, 3)
    ip = InputPerturbation(0.3, 1e-3, 2, seed=0)
    with pytest.raises(RuntimeError, match="perturb"):
        ip.fit(linear_model(3), x, y)
    xn, yn = ip.perturb(x, y)
    model = ip.make_linear_model()
    model.compile(keras.optimizers.Adam(0.1), loss=keras.losses.BinaryCrossentropy(from_logits=True))
    with pytest.warns(UserWarning, match="not plain SGD"):
        ip.fit(model, xn, yn)


# --- ledger, report, models --------------------------------------------------------------------------
def test_ledger_paper_is_claimed_and_report():
    x, y = synthetic(50, 3)
    ip = InputPerturbation(0.2, 1e-3, 10, seed=0)
    ip.perturb(x, y)
    r = ip.release
    assert r.guarantee == "claimed" and r.epsilon_claimed == 0.2 and r.epsilon_provable is None
    assert "Kang et al. 2020 Theorem 1" in r.basis and not r.reproduction
    assert r.noise_scale == ip.sigma == pytest.approx(
        sigma_input_perturbation(0.2, 1e-3, 50, 10, ip.G, 0.01), rel=1e-12)
    rep = ip.report()
    for key in ("sigma", "c", "kappa", "G", "strong_convexity", "theta_bound", "beta", "epsilon", "delta", "T",
                "n", "noise_structure", "calibration", "guarantee"):
        assert key in rep
    assert "claimed by Kang et al. 2020 Thm 1" in rep["guarantee"]
    pl = InputPerturbation(0.2, 1e-3, 10, condition="pl", pl_constant=0.05, seed=0)
    pl.perturb(x, y)
    assert "Theorem 3" in pl.release.basis
    assert pl.sigma == pytest.approx(sigma_input_perturbation(0.2, 1e-3, 50, 10, pl.G, 0.05, condition="pl"))


def test_multinomial_and_mlp_models_train():
    rng = np.random.default_rng(0)
    x, _ = synthetic(90, 4)
    y = rng.integers(0, 3, size=90)
    ip = InputPerturbation(1.0, 1e-3, 3, num_classes=3, seed=0)
    xn, yn = ip.perturb(x, np.eye(3)[y])
    assert yn.dtype == np.int32 and np.array_equal(yn, y)
    model = ip.make_linear_model()
    assert model.output_shape == (None, 3)
    ip.fit(model, xn, yn)
    assert "margin form" in ip.release.details["warning"]
    ip2 = InputPerturbation(1.0, 1e-3, 2, seed=0)
    xb, yb = ip2.perturb(*synthetic(40, 4))
    with pytest.warns(UserWarning, match="MLP"):
        mlp = ip2.make_mlp()
    assert [layer.units for layer in mlp.layers] == [4, 1]
    ip2.fit(mlp, xb, yb, learning_rate=0.1)
    assert paper_mlp(5, 3).output_shape == (None, 3)


def test_randomized_response_rates():
    rng = np.random.default_rng(0)
    labels = np.zeros(40_000, dtype=int)
    out = randomized_response(labels, math.log(3.0), 2, rng)  # keep with probability 3/4
    assert abs((out == 0).mean() - 0.75) < 0.01
    out = randomized_response(labels, 1.0, 4, rng)
    keep = math.e / (math.e + 3)
    assert abs((out == 0).mean() - keep) < 0.01 and set(np.unique(out)) == {0, 1, 2, 3}


# --- the sound calibration (needs dp_accounting) ------------------------------------------------------
def test_local_gaussian_is_proven():
    pytest.importorskip("dp_accounting", reason="the local_gaussian calibration computes ε with dp_accounting")
    from tfdpmech.mechanisms.input_perturbation import local_gaussian_epsilon, sigma_local_gaussian

    sigma = sigma_local_gaussian(1.0, 1e-5, 1.0)  # exact privacy curve of one Gaussian mechanism
    eps = local_gaussian_epsilon(sigma, 1e-5, 1.0)
    assert eps <= 1.0 and eps == pytest.approx(1.0, rel=1e-4)
    assert sigma_local_gaussian(1.0, 1e-5, 2.0) == pytest.approx(2 * sigma, rel=1e-6)  # scales with R
    assert sigma_local_gaussian(0.5, 1e-5) > sigma and sigma_local_gaussian(1.0, 1e-8) > sigma
    # exact, so tighter than RDP, itself tighter than the classic 2R·sqrt(2 ln(1.25/δ))/ε; PLD agrees
    assert sigma < sigma_local_gaussian(1.0, 1e-5, accountant="rdp") < 2 * math.sqrt(2 * math.log(1.25 / 1e-5))
    assert local_gaussian_epsilon(sigma, 1e-5, accountant="pld") == pytest.approx(1.0, rel=0.02)
    assert local_gaussian_epsilon(sigma, 1e-5, accountant="rdp") > 1.0
    # small ε at small δ: RDP's bound levels off at ln(1/δ)/(max order) and cannot certify it
    with pytest.raises(ValueError, match="cannot certify"):
        sigma_local_gaussian(0.01, 1 / 20000**2, accountant="rdp")
    tiny = sigma_local_gaussian(0.01, 1 / 20000**2)
    assert 800 < tiny < 900 and local_gaussian_epsilon(tiny, 1 / 20000**2) <= 0.01 + 1e-9
    x, y = synthetic(60, 3)
    ip = InputPerturbation(1.0, 1e-5, 5, calibration="local_gaussian", seed=0)
    ip.perturb(x, y)
    r = ip.release
    assert r.guarantee == "proven" and r.epsilon_provable <= 1.0 and "labels public" in r.details["adjacency"]
    assert ip.report()["guarantee"].startswith("formal")
    ip_lab = InputPerturbation(1.0, 1e-5, 5, calibration="local_gaussian", label_epsilon=0.2, seed=0)
    ip_lab.perturb(x, y)
    assert ip_lab.release.epsilon_provable == pytest.approx(0.2 + local_gaussian_epsilon(ip_lab.sigma, 1e-5))
    assert ip_lab.release.epsilon_provable <= 1.0 + 1e-9
    # the paper calibration's noise, read as a local mechanism, gives a (much larger) feature-level ε
    paper = InputPerturbation(1.0, 1e-5, 5, seed=0)
    paper.perturb(x, y)
    assert paper.release.details["implied_local_epsilon"] > 1.0
    # mini-batches are fine for a post-processing guarantee
    InputPerturbation(1.0, 1e-5, 5, calibration="local_gaussian", batch_size=10, seed=0).perturb(x, y)


# --- §8.12 integration (synthetic) ---------------------------------------------------------------------
@pytest.mark.slow
def test_integration_synthetic_logistic():
    n, d, T, lam = 20_000, 10, 100, 0.01
    x_all, y_all = synthetic(n + 5000, d, seed=11)
    x, y, x_test, y_test = x_all[:n], y_all[:n], x_all[n:], y_all[n:]
    _, L_star = erm_optimum(x, y, lam)

    def run(epsilon, seed):
        ip = InputPerturbation(epsilon, 1.0 / n**2, T, l2=lam, seed=seed)
        xn, yn = ip.perturb(x, y)
        model = ip.make_linear_model()
        ip.fit(model, xn, yn)
        theta = model.layers[-1].kernel.numpy()
        acc = float(np.mean((x_test @ theta[:, 0] > 0) == y_test))
        return acc, erm_objective(theta, x, y, lam) - L_star

    # the non-private recipe: the same model and T steps on clean data
    clean = linear_model(d, l2=lam, theta_bound=logistic_constants(lam).theta_bound)
    clean.compile(keras.optimizers.SGD(1.0 / (0.25 * np.linalg.eigvalsh(x.T @ x / n)[-1] + lam)),
                  loss=keras.losses.BinaryCrossentropy(from_logits=True))
    clean.fit(x, y.astype(np.float32), batch_size=n, epochs=T, verbose=0, shuffle=False)
    acc_clean = float(np.mean((x_test @ clean.layers[-1].kernel.numpy()[:, 0] > 0) == y_test))
    (acc_hi, gap_hi), (_, gap_lo) = run(0.25, 0), run(0.01, 0)
    assert abs(acc_hi - acc_clean) < 0.02 and gap_hi < 0.05
    assert gap_lo > gap_hi


# --- the comparison module ------------------------------------------------------------------------------
def test_experiment_main_writes_table_and_json(tmp_path, capsys):
    import json

    from tfdpmech.experiments import dp_erm as experiment

    assert experiment.main(["--quick", "--datasets", "iris", "--methods", "nonprivate,ip_paper", "--seeds", "1",
                            "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| iris | linear | ip_paper | 0.01 | 1 |" in out and "none proven" in out
    results = json.loads((tmp_path / "dp_erm_results.json").read_text())
    rows = results["summary"]
    assert {r["method"] for r in rows} == {"nonprivate", "ip_paper"} and len(rows) == 4
    assert all(0.0 <= r["accuracy_mean"] <= 1.0 for r in rows)
    assert (tmp_path / "dp_erm_table.md").read_text().startswith("| dataset |")
    data = experiment.load_dataset("breast_cancer")
    assert np.linalg.norm(data["x_train"], axis=1).max() <= 1.0 + 1e-12 and data["num_classes"] == 2
    with pytest.raises(ValueError, match="unknown dataset"):
        experiment.load_dataset("adult")


@pytest.mark.dpsgd
def test_experiment_baselines_run():
    pytest.importorskip("tensorflow_privacy", reason="Kifer objective perturbation and DP-SGD need tensorflow-privacy")
    from tfdpmech.experiments import dp_erm as experiment

    config = experiment.ExperimentConfig(datasets=("iris",), methods=("kifer", "dpsgd"), epsilons=(1.0,), seeds=(0,),
                                         dpsgd_epochs=2, kifer_steps=40)
    results = experiment.run_experiment(config, log=None)
    by_method = {r["method"]: r for r in results["summary"]}
    assert by_method["kifer"]["epsilon_provable"] is None and by_method["kifer"]["epsilon_claimed"] == 1.0
    dpsgd = by_method["dpsgd"]
    assert dpsgd["epsilon_claimed"] <= 1.0 and dpsgd["epsilon_provable"] is not None
    assert "add/remove" in dpsgd["adjacency"]
