"""AdLM's sensitivities: Δ_h0 policies, first-layer geometry, the per-record ε (hand calculations)."""

import pytest

from tfdpmech import models
from tfdpmech.mechanisms.adlm import (
    first_affine_layer,
    first_layer_geometry,
    first_layer_sensitivity,
    provable_epsilon_per_record,
)


def small_model(**kwargs):
    return models.mlp(first_units=16, hidden_units=8, **kwargs)


# --- sensitivities of the reference configurations (AdLM Lemma 3) ------------------------
def test_delta_h0_reference_configs():
    # as the authors' public code computes them. MNIST: 2 · 14·14 positions · 5·5·1 fan-in; CIFAR: 2 · 10·10 · 3·3·3
    assert first_layer_sensitivity("reference_code", d=784, fan_in=25, neurons=0, positions=196) == 9800
    assert first_layer_sensitivity("reference_code", d=1200, fan_in=27, neurons=0, positions=100) == 5400
    assert first_layer_sensitivity("fan_in", d=784, fan_in=25, neurons=28 * 28 * 32, positions=0) == 1_254_400
    assert first_layer_sensitivity("paper_literal", d=784, fan_in=25, neurons=28 * 28 * 32, positions=0) == (
        2 * 28 * 28 * 32 * 784
    )
    assert first_layer_sensitivity("shared_input", d=784, fan_in=25, neurons=1, positions=1) == 784
    with pytest.raises(ValueError, match="delta_h0_policy"):
        first_layer_sensitivity("nope", d=1, fan_in=1, neurons=1, positions=1)


def test_geometry_of_paper_cnn():
    geo = first_layer_geometry(first_affine_layer(models.mnist_cnn()))
    assert geo == {"d": 784, "fan_in": 25, "neurons": 28 * 28 * 32, "positions": 784}
    geo = first_layer_geometry(first_affine_layer(small_model()))
    assert geo == {"d": 784, "fan_in": 784, "neurons": 16, "positions": 16}


# --- the per-record accountant against the hand calculation ------------------------------
def test_per_record_bound_hand_calculation():
    eps = provable_epsilon_per_record(eps1=0.075, eps2=0.075, eps3=0.15, batch_size=1800, d=784,
                                      delta_h0=9800, delta_f=1812.5)
    assert eps == pytest.approx(0.075 + 144 * 0.075 + (3600 / 1812.5) * 0.15, rel=1e-12)
    assert eps == pytest.approx(0.075 + 10.8 + 1.986 * 0.15, rel=1e-3)
