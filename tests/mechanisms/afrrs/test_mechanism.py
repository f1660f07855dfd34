"""AFRRS: the paper's Δ values for its Table-1/Table-2 models, and the per-record private mode."""

import pytest

from tfdpmech.mechanisms.adlm.taylor_cross_entropy import loss_sensitivity
from tfdpmech.mechanisms.adlm import first_layer_geometry, first_layer_sensitivity
from tfdpmech.mechanisms.afrrs import AFRRS, afrrs_sensitivities
from tfdpmech.mechanisms.afrrs.models import afrrs_cifar_model, afrrs_mnist_model
from tfdpmech.mechanisms.adlm import relevance_sensitivity

from .helpers import small_data


# --- the paper's Δ values for its Table-1 and Table-2 models ------------------------------------
def test_mnist_table1_sensitivities():
    s = afrrs_sensitivities(afrrs_mnist_model(), 60000)
    assert s["delta_f"] == 4_917_248  # 2 * (14*14*16) * 784
    assert s["delta_F"] == 2880  # 10 * (32 + 32**2/4)
    assert s["delta_R"] == pytest.approx(0.026133, abs=1e-6)  # 2*784/60000
    geo = first_layer_geometry(afrrs_mnist_model().layers[0])
    assert first_layer_sensitivity("reference_code", **geo) == 25_088
    assert first_layer_sensitivity("shared_input", **geo) == 784
    assert relevance_sensitivity(1024, 60000) == pytest.approx(0.034133, abs=1e-6)


def test_cifar_table2_sensitivities():
    same = afrrs_sensitivities(afrrs_cifar_model(padding="same"), 50000)
    valid = afrrs_sensitivities(afrrs_cifar_model(padding="valid"), 50000)
    assert same["delta_f"] == 201_326_592 and valid["delta_f"] == 176_947_200
    assert valid["delta_F"] == loss_sensitivity(10, 32) == 2880
    assert valid["delta_R"] == pytest.approx(0.12288)
    assert relevance_sensitivity(1024, 50000) == pytest.approx(0.04096)
    geo_s = first_layer_geometry(afrrs_cifar_model(padding="same").layers[0])
    geo_v = first_layer_geometry(afrrs_cifar_model(padding="valid").layers[0])
    assert first_layer_sensitivity("reference_code", **geo_s) == 55_296
    assert first_layer_sensitivity("reference_code", **geo_v) == 48_600


# --- the modes ------------------------------------------------------------------------------------
def test_private_mode_is_per_record_and_proven():
    import keras

    x, y = small_data()
    rel = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(), keras.layers.Dense(10)])
    afrrs = AFRRS.from_total(0.6, 16, gamma=0.1, seed=0)
    r = afrrs.fit_relevance(rel, x, y)
    assert r.min() == 0.0 and r.max() == 1.0  # min-max after the noise
    model = afrrs_mnist_model(private=True)
    data = afrrs.perturb(x, y, model)
    assert data.x_bar.shape == x.shape
    assert afrrs.ledger.epsilon_claimed() == pytest.approx(0.6)
    assert afrrs.ledger.epsilon_provable() is not None  # relevance model independent of x
    inputs = [rel_ for rel_ in afrrs.ledger.releases if rel_.component == "first_layer_inputs"][0]
    assert inputs.details["allocation"] == "regions" and inputs.details["beta_sum"] == pytest.approx(784)
    seg = afrrs.report()["segmentation"]
    assert seg["n_regions"] == len(seg["alpha"]) >= 1


