"""Tests for tfdpmech.accounting.dpsgd: σ ↔ ε of DP-SGD with dp_accounting (RDP, Poisson sampling)."""

from __future__ import annotations

import math
import re

import pytest

from tfdpmech.accounting.dpsgd import (
    dpsgd_epsilon,
    dpsgd_epsilon_after_steps,
    dpsgd_noise_multiplier,
    dpsgd_steps,
    epsilon_any_order,
)
from tfdpmech.accounting.poisson_dpsgd import poisson_dpsgd_epsilon


def _tf_privacy_analysis():
    """tensorflow-privacy's own DP-SGD accountant, to compare against (TensorFlow 2.15 stack only)."""
    return pytest.importorskip(
        "tensorflow_privacy.privacy.analysis.compute_dp_sgd_privacy_lib",
        reason="tensorflow-privacy is not installed or does not import (it needs TensorFlow 2.15 / Keras 2)",
    )


def test_noise_multiplier_is_monotone_in_epsilon():
    sigmas = [dpsgd_noise_multiplier(eps, 1e-5, n=1000, batch_size=50, epochs=2) for eps in (0.3, 1.0, 8.0)]
    assert sigmas[0] > sigmas[1] > sigmas[2] > 0


@pytest.mark.parametrize("eps", [0.3, 1.0, 8.0])
def test_round_trip_meets_target_and_is_tight(eps):
    sigma = dpsgd_noise_multiplier(eps, 1e-5, n=1000, batch_size=50, epochs=2)
    achieved = dpsgd_epsilon(sigma, 1e-5, n=1000, batch_size=50, epochs=2)
    assert achieved <= eps
    assert achieved == pytest.approx(eps, rel=1e-3)
    # a slightly smaller σ no longer meets the target: σ is (near) the smallest one
    assert dpsgd_epsilon(sigma * 0.99, 1e-5, n=1000, batch_size=50, epochs=2) > eps


@pytest.mark.dpsgd
def test_anchor_matches_tensorflow_privacy():
    compute_dp_sgd_privacy_lib = _tf_privacy_analysis()
    # Classic MNIST setting: n=60000, batch 256, σ=1.1, 60 epochs, δ=1e-5.
    ours = dpsgd_epsilon(1.1, 1e-5, n=60000, batch_size=256, epochs=60)
    theirs = compute_dp_sgd_privacy_lib._compute_dp_sgd_example_privacy(  # pylint: disable=protected-access
        60, 1.1, 1e-5, used_microbatching=False, poisson_subsampling_probability=256 / 60000
    )
    assert ours == pytest.approx(theirs, rel=1e-12)
    statement = compute_dp_sgd_privacy_lib.compute_dp_sgd_privacy_statement(
        60000, 256, 60, 1.1, 1e-5, used_microbatching=False
    )
    poisson = float(re.search(r"Epsilon assuming Poisson sampling \(\*\):\s+([0-9.]+)", statement).group(1))
    assert round(ours, 3) == poisson
    assert ours == pytest.approx(2.5967, abs=1e-4)  # regression anchor of the above


@pytest.mark.dpsgd
def test_microbatching_doubles_sensitivity():
    compute_dp_sgd_privacy_lib = _tf_privacy_analysis()
    plain = dpsgd_epsilon(1.2, 1e-5, n=1000, batch_size=50, epochs=2)
    doubled = dpsgd_epsilon(2.4, 1e-5, n=1000, batch_size=50, epochs=2, used_microbatching=True)
    assert doubled == pytest.approx(plain, rel=1e-12)
    theirs = compute_dp_sgd_privacy_lib._compute_dp_sgd_example_privacy(  # pylint: disable=protected-access
        2, 2.4, 1e-5, used_microbatching=True, poisson_subsampling_probability=50 / 1000
    )
    assert doubled == pytest.approx(theirs, rel=1e-12)


def test_steps_use_integer_ceiling():
    assert dpsgd_steps(300, 50, 1) == 6
    assert dpsgd_steps(310, 50, 3) == 19  # ceil(930 / 50)
    assert dpsgd_epsilon(0.0, 1e-5, n=300, batch_size=50, epochs=1) == math.inf


def test_bad_input_to_accounting():
    with pytest.raises(ValueError, match="epsilon"):
        dpsgd_noise_multiplier(0.0, 1e-5, n=100, batch_size=10, epochs=1)
    with pytest.raises(ValueError, match="exceeds"):
        dpsgd_noise_multiplier(1.0, 1e-5, n=100, batch_size=200, epochs=1)
    with pytest.raises(ValueError, match="noise_multiplier"):
        dpsgd_epsilon(-1.0, 1e-5, n=100, batch_size=10, epochs=1)


def test_uncertifiable_target_gives_a_clear_error():
    # the RDP bound levels off above 0.01 at δ = 1/n² (found by the DP-ERM comparison)
    with pytest.raises(ValueError, match="cannot be certified"):
        dpsgd_noise_multiplier(0.01, 1 / 20000**2, n=20000, batch_size=256, epochs=20)


def test_epsilon_after_steps_grows_to_the_poisson_epsilon_of_the_run():
    sigma, n, batch, epochs, delta = 1.1, 1000, 50, 2, 1e-5
    full = dpsgd_epsilon(sigma, delta, n=n, batch_size=batch, epochs=epochs)
    steps = dpsgd_steps(n, batch, epochs)
    partial = [dpsgd_epsilon_after_steps(sigma, delta, sampling_probability=batch / n, steps=t) for t in (0, 1, steps // 2, steps)]
    assert partial[0] == 0.0 and partial[1] < partial[2] < partial[3]
    assert partial[3] == pytest.approx(full, rel=1e-12)


def test_epsilon_any_order_exceeds_the_poisson_epsilon():
    # without amplification by sampling each epoch is one full Gaussian mechanism
    sigma, n, batch, epochs, delta = 1.1, 1000, 50, 2, 1e-5
    any_order = epsilon_any_order(sigma, delta, epochs)
    assert any_order > dpsgd_epsilon(sigma, delta, n=n, batch_size=batch, epochs=epochs)
    # σ/2 under microbatching: the same ε as half the noise
    assert epsilon_any_order(2 * sigma, delta, epochs, used_microbatching=True) == pytest.approx(any_order, rel=1e-12)


def test_the_run_shape_is_keyword_only():
    with pytest.raises(TypeError):  # the run's shape is keyword-only: no two of its numbers swap by position
        dpsgd_epsilon(1.2, 1e-5, 1000, 50, 2)
    with pytest.raises(TypeError):
        poisson_dpsgd_epsilon(1.2, 0.05, 7, 1e-5)
