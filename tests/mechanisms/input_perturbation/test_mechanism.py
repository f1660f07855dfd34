"""InputPerturbation (Kang et al. 2020): once-only noise, frozen data, ledger, modes and bad input."""

import gc
import math
import weakref

import keras
import numpy as np
import pytest

from tfdpmech import PrivacyLedger
from tfdpmech.accounting.gaussian import local_gaussian_epsilon
from tfdpmech.mechanisms.input_perturbation import (
    InputPerturbation,
    InputPerturbationAssumptions,
    clip_rows,
    erm_objective,
    erm_optimum,
    logistic_constants,
    perturb_record,
    sigma_input_perturbation,
)
from tfdpmech.mechanisms.input_perturbation.models import linear_model, paper_mlp

from .helpers import synthetic


# --- validation / bad input ----------------------------------------------------------------------------
def test_perturb_rejects_bad_data():
    x, y = synthetic(50, 3)
    with pytest.raises(ValueError, match="n >= 2"):
        InputPerturbation(0.1, 1e-3, 5, seed=0, mode="reference").perturb(x[:1], y[:1])
    with pytest.raises(ValueError, match="declared with n=60"):
        InputPerturbation(0.1, 1e-3, 5, n=60, seed=0, mode="reference").perturb(x, y)
    with pytest.raises(ValueError, match=r"not in the declared binary classes"):
        InputPerturbation(0.1, 1e-3, 5, seed=0, mode="reference").perturb(x, np.where(y > 0, 2, 0))
    with pytest.raises(ValueError, match="outside the declared classes 0..2"):
        InputPerturbation(0.1, 1e-3, 5, num_classes=3, seed=0, mode="reference").perturb(x, y * 3)
    with pytest.raises(ValueError, match="x has 50 records but y has 49"):
        InputPerturbation(0.1, 1e-3, 5, seed=0, mode="reference").perturb(x, y[:-1])
    x_nan = x.copy()
    x_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        InputPerturbation(0.1, 1e-3, 5, seed=0, mode="reference").perturb(x_nan, y)
    with pytest.raises(ValueError, match="2-D"):
        InputPerturbation(0.1, 1e-3, 5, seed=0, mode="reference").perturb(x.reshape(50, 3, 1), y)
    with pytest.raises(ValueError, match="per_record"):
        InputPerturbation(0.1, 1e-3, 5, mode="private",
                          assumptions=InputPerturbationAssumptions(noise_structure="shared"))
    with pytest.raises(ValueError, match="label_epsilon"):
        InputPerturbation(0.1, 1e-3, 5, label_epsilon=0.05, mode="reference")


def test_row_norm_above_bound_raises_or_clips_and_records():
    x, y = synthetic(40, 3)
    x[0] = [1.5, 0.0, 0.0]  # norm 1.5 > R = 1
    with pytest.raises(ValueError, match="feature_norm_bound=1"):
        InputPerturbation(0.1, 1e-3, 5, seed=0, mode="reference").perturb(x, y)
    ip = InputPerturbation(0.1, 1e-3, 5, clip=True, seed=0, mode="reference")
    ip.perturb(x, y)
    assert "clipped" in ip.release.details["clip"] and ip.rows_clipped == 1
    assert x[0, 0] == 1.5  # the caller's array is not modified
    clipped, count = clip_rows(x, 1.0)
    assert count == 1 and np.linalg.norm(clipped, axis=1).max() <= 1.0 + 1e-12
    assert np.allclose(clipped[1:], x[1:])
    # within the float slack: accepted without clipping
    x[0] = [1.0 + 1e-9, 0.0, 0.0]
    InputPerturbation(0.1, 1e-3, 5, seed=0, mode="reference").perturb(x, y)


def test_minibatch_is_an_error_in_strict_mode():
    x, y = synthetic(60, 3)
    with pytest.raises(ValueError, match="full-batch"):
        InputPerturbation(0.1, 1e-3, 5, batch_size=20, seed=0, mode="reference").perturb(x, y)
    ip = InputPerturbation(0.1, 1e-3, 5, batch_size=20, seed=0, mode="reference",
                           assumptions=InputPerturbationAssumptions(strict=False))
    with pytest.warns(UserWarning, match="extrapolate"):
        ip.perturb(x, y)
    assert ip.n_effective == 20 and ip.T_effective == 15  # n -> B, T -> all optimizer steps
    ip = InputPerturbation(0.1, 1e-3, 3, seed=0, mode="reference")
    xn, yn = ip.perturb(x, y)
    model = ip.make_linear_model()
    with pytest.raises(ValueError, match="full-batch"):
        ip.fit(model, xn, yn, batch_size=20)
    model.compile(keras.optimizers.SGD(0.1), loss=keras.losses.BinaryCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match="full-batch"):  # the callback alone also refuses it
        model.fit(xn, yn, batch_size=20, epochs=1, verbose=0, callbacks=[ip.callback()])
    for bad in ("validation_split", "sample_weight", "class_weight"):
        with pytest.raises(ValueError, match="Eq. 9 assumes n equally weighted records"):
            ip.fit(ip.make_linear_model(), xn, yn, **{bad: 0.1})


# --- freezing, once-only, no raw data ------------------------------------------------------------------
def test_noise_is_frozen_across_epochs():
    x, y = synthetic(64, 4)
    ip = InputPerturbation(0.5, 1e-3, 3, seed=1, mode="reference")
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
    ip = InputPerturbation(0.2, 1e-3, 5, seed=0, ledger=ledger, mode="reference")
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
    ip = InputPerturbation(0.2, 1e-3, 5, seed=0, mode="reference")
    xn, _ = ip.perturb(x, y)
    del x, y
    gc.collect()
    assert all(r() is None for r in refs)
    assert not any(isinstance(v, np.ndarray) and v.size > 3 for v in vars(ip).values())


# --- distribution --------------------------------------------------------------------------------------
def test_noise_distribution_per_record_and_shared():
    n, d = 20_000, 5
    x = np.zeros((n, d))
    y = np.arange(n) % 2
    ip = InputPerturbation(0.5, 1e-6, 10, seed=2, mode="reference")
    z = ip.perturb(x, y)[0].astype(np.float64)
    sigma = ip.sigma
    assert abs(z.std() / sigma - 1.0) < 0.01
    assert abs(z.mean()) < 4 * sigma / math.sqrt(n * d)
    # rows are independent: correlation between row pairs ~ 0 (|r| < 4/sqrt(pairs·d) whp; fixed seed)
    a, b = z[0::2].ravel(), z[1::2].ravel()
    assert abs(np.corrcoef(a, b)[0, 1]) < 4 / math.sqrt(a.size)
    shared = InputPerturbation(0.5, 1e-6, 10, seed=2, mode="reference",
                               assumptions=InputPerturbationAssumptions(noise_structure="shared"))
    with pytest.warns(UserWarning, match="no per-record protection"):
        zs = shared.perturb(x, y)[0]
    assert np.all(zs == zs[0]) and np.any(zs[0] != 0)
    assert shared.release.reproduction and shared.release.epsilon_provable is None


# --- reproducibility -------------------------------------------------------------------------------------
def test_reproducibility():
    x, y = synthetic(40, 3)
    a = InputPerturbation(0.2, 1e-3, 5, seed=7, mode="reference").perturb(x, y)[0]
    b = InputPerturbation(0.2, 1e-3, 5, seed=7, mode="reference").perturb(x, y)[0]
    c = InputPerturbation(0.2, 1e-3, 5, mode="reference").perturb(x, y)[0]
    d = InputPerturbation(0.2, 1e-3, 5, mode="reference").perturb(x, y)[0]
    assert np.array_equal(a, b) and not np.array_equal(c, d) and not np.array_equal(a, c)
    assert not np.array_equal(perturb_record(x[0], 1.0), perturb_record(x[0], 1.0))
    assert np.array_equal(perturb_record(x[0], 1.0, 3), perturb_record(x[0], 1.0, 3))


# --- shared noise + unregularised intercept: zero privacy -----------------------------------------------
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

    ip = InputPerturbation(0.1, 1e-3, 3, seed=0, mode="reference",
                           assumptions=InputPerturbationAssumptions(noise_structure="shared"))
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
        free_bias.fit(xn, yn, batch_size=40, epochs=1, verbose=0, callbacks=[ip.callback()])
    ip.make_linear_model(use_bias=True, regularize_bias=True)  # allowed: the bias is regularised


# --- ledger, report, models --------------------------------------------------------------------------
def test_ledger_paper_is_claimed_and_report():
    x, y = synthetic(50, 3)
    ip = InputPerturbation(0.2, 1e-3, 10, seed=0, mode="reference")
    ip.perturb(x, y)
    r = ip.release
    assert r.guarantee == "claimed" and r.epsilon_claimed == 0.2 and r.epsilon_provable is None
    assert "Kang et al. 2020 Theorem 1" in r.basis and not r.reproduction
    assert r.noise_scale == ip.sigma == pytest.approx(
        sigma_input_perturbation(0.2, 1e-3, 50, 10, ip.G, 0.01), rel=1e-12)
    rep = ip.report()
    for key in ("sigma", "c", "kappa", "G", "strong_convexity", "theta_bound", "beta", "epsilon", "delta", "T",
                "n", "noise_structure", "mode", "guarantee"):
        assert key in rep
    assert "claimed by Kang et al. 2020 Thm 1" in rep["guarantee"]
    pl = InputPerturbation(0.2, 1e-3, 10, seed=0, mode="reference",
                           assumptions=InputPerturbationAssumptions(condition="pl", pl_constant=0.05))
    pl.perturb(x, y)
    assert "Theorem 3" in pl.release.basis
    assert pl.sigma == pytest.approx(sigma_input_perturbation(0.2, 1e-3, 50, 10, pl.G, 0.05, condition="pl"))


def test_multinomial_and_mlp_models_train():
    rng = np.random.default_rng(0)
    x, _ = synthetic(90, 4)
    y = rng.integers(0, 3, size=90)
    ip = InputPerturbation(1.0, 1e-3, 3, num_classes=3, seed=0, mode="reference")
    xn, yn = ip.perturb(x, np.eye(3)[y])
    assert yn.dtype == np.int32 and np.array_equal(yn, y)
    model = ip.make_linear_model()
    assert model.output_shape == (None, 3)
    ip.fit(model, xn, yn)
    assert "margin form" in ip.release.details["warning"]
    ip2 = InputPerturbation(1.0, 1e-3, 2, seed=0, mode="reference")
    xb, yb = ip2.perturb(*synthetic(40, 4))
    with pytest.warns(UserWarning, match="MLP"):
        mlp = ip2.make_mlp()
    assert [layer.units for layer in mlp.layers] == [4, 1]
    ip2.fit(mlp, xb, yb, learning_rate=0.1)
    assert paper_mlp(5, 3).output_shape == (None, 3)


# --- the sound calibration (needs dp_accounting) ------------------------------------------------------
def test_local_gaussian_is_proven():
    x, y = synthetic(60, 3)
    ip = InputPerturbation(1.0, 1e-5, 5, mode="private", seed=0)
    ip.perturb(x, y)
    r = ip.release
    assert r.guarantee == "proven" and r.epsilon_provable <= 1.0 and "labels public" in r.details["adjacency"]
    assert ip.report()["guarantee"].startswith("formal")
    # the features' release carries its dp_accounting event, noise multiplier σ/(2R)
    assert r.event.noise_multiplier == pytest.approx(ip.sigma / (2.0 * ip.feature_norm_bound))
    assert PrivacyLedger([r]).epsilon_provable() == pytest.approx(r.epsilon_provable, rel=1e-3)
    ip_lab = InputPerturbation(1.0, 1e-5, 5, mode="private", label_epsilon=0.2, seed=0)
    ip_lab.perturb(x, y)
    assert ip_lab.release.epsilon_provable == pytest.approx(0.2 + local_gaussian_epsilon(ip_lab.sigma, 1e-5))
    assert ip_lab.release.epsilon_provable <= 1.0 + 1e-9
    # the paper calibration's noise, read as a local mechanism, gives a (much larger) feature-level ε
    paper = InputPerturbation(1.0, 1e-5, 5, seed=0, mode="reference")
    paper.perturb(x, y)
    assert paper.release.details["implied_local_epsilon"] > 1.0
    # mini-batches are fine for a post-processing guarantee
    InputPerturbation(1.0, 1e-5, 5, mode="private", batch_size=10, seed=0).perturb(x, y)


# --- integration (synthetic) ---------------------------------------------------------------------------
@pytest.mark.slow
def test_integration_synthetic_logistic():
    n, d, T, lam = 20_000, 10, 100, 0.01
    x_all, y_all = synthetic(n + 5000, d, seed=11)
    x, y, x_test, y_test = x_all[:n], y_all[:n], x_all[n:], y_all[n:]
    _, L_star = erm_optimum(x, y, lam)

    def run(epsilon, seed):
        ip = InputPerturbation(epsilon, 1.0 / n**2, T, l2=lam, seed=seed, mode="reference")
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
