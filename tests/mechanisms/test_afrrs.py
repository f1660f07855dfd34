"""AFRRS: region segmentation (Algorithm 1), region budgets (Eqs. 14–15), both modes, the paper's Δ values."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from tfdpmech.allocation import RelevanceAllocation, UniformAllocation
from tfdpmech.losses.taylor_cross_entropy import loss_sensitivity
from tfdpmech.mechanisms.adlm import first_layer_geometry, first_layer_sensitivity
from tfdpmech.mechanisms.afrrs import (
    AFRRS,
    AFRRSReference,
    RegionAllocation,
    afrrs_cifar_model,
    afrrs_mnist_model,
    afrrs_sensitivities,
    global_minmax,
    plot_segmentation,
    region_budgets,
    segment_regions,
)
from tfdpmech.relevance import relevance_sensitivity


def naive_algorithm_1(r, gamma):
    """Algorithm 1 literally: merge the closest clusters (average linkage) while min distance < γ."""
    clusters = [[j] for j in range(len(r))]

    def dist(a, b):
        return np.mean([abs(r[i] - r[j]) for i in a for j in b])

    while len(clusters) > 1:
        best, pair = np.inf, None
        for i in range(len(clusters)):
            for j in range(i + 1, len(clusters)):
                dd = dist(clusters[i], clusters[j])
                if dd < best:
                    best, pair = dd, (i, j)
        if not best < gamma:
            break
        i, j = pair
        clusters[i] = clusters[i] + clusters[j]
        del clusters[j]
    return sorted(sorted(c) for c in clusters)


def as_partition(labels):
    return sorted(sorted(np.flatnonzero(labels == k).tolist()) for k in np.unique(labels))


@pytest.mark.parametrize("gamma", [0.02, 0.08, 0.2, 0.5])
def test_scipy_average_linkage_equals_the_papers_loop(gamma):
    r = np.random.default_rng(int(gamma * 100)).random(30)
    assert as_partition(segment_regions(r, gamma)) == naive_algorithm_1(r, gamma)


def test_strict_threshold():
    r = np.array([0.0, 0.1, 1.0])
    assert len(np.unique(segment_regions(r, 0.1))) == 3  # distance 0.1 is not < 0.1
    assert len(np.unique(segment_regions(r, 0.1 + 1e-9))) == 2


def test_labels_ordered_by_region_relevance():
    r = np.array([0.9, 0.1, 0.92, 0.12, 0.5])
    labels = segment_regions(r, 0.05)
    assert labels.tolist() == [2, 0, 2, 0, 1]


@pytest.mark.parametrize("gamma", [0.0, 0.05, 0.15, 0.3, np.inf])
def test_region_budgets_keep_sum_c_k_alpha_k_equal_d(gamma):
    r = np.random.default_rng(1).random(784)
    alloc = RegionAllocation(r, gamma)
    assert np.sum(alloc.sizes_ * alloc.alpha_) == pytest.approx(784)
    beta = alloc.ratios((28, 28, 1))
    assert beta.sum() == pytest.approx(784) and beta.shape == (28, 28, 1)
    assert alloc.sizes_.sum() == 784


def test_alpha_follows_eq_14():
    r = np.array([0.2, 0.2, 0.8, 0.8, 0.8, 0.5])
    means, sizes, alpha = region_budgets(r, np.array([0, 0, 2, 2, 2, 1]))
    np.testing.assert_allclose(means, [0.2, 0.5, 0.8])
    mu = sizes / 6
    np.testing.assert_allclose(alpha, np.abs(means) / np.sum(mu * np.abs(means)))


def test_zero_region_floored_before_normalising():
    r = np.array([0.0, 0.0, 1.0, 1.0])
    means, sizes, alpha = region_budgets(r, np.array([0, 0, 1, 1]), floor=1e-5)
    assert alpha[0] > 0
    assert np.sum(sizes * alpha) == pytest.approx(4)
    _, _, alpha = region_budgets(np.zeros(4), np.array([0, 0, 1, 1]))
    np.testing.assert_allclose(alpha, 1.0)  # all at the floor: uniform


def test_gamma_zero_is_adlm_and_gamma_inf_is_ilm():
    r = np.random.default_rng(2).normal(0.5, 0.3, (28, 28, 1))
    np.testing.assert_allclose(RegionAllocation(r, 0.0).ratios(r.shape),
                               RelevanceAllocation(r, mode="abs").ratios(r.shape))
    np.testing.assert_allclose(RegionAllocation(r, np.inf).ratios(r.shape), UniformAllocation().ratios(r.shape))


def test_bad_arguments():
    with pytest.raises(ValueError, match="gamma"):
        RegionAllocation(np.ones(4), gamma="big")
    with pytest.raises(ValueError, match="relevance has shape"):
        RegionAllocation(np.random.default_rng(0).random(6).reshape(3, 2), 0.1).ratios((2, 3))
    with pytest.raises(ValueError, match="constant"):
        global_minmax(np.ones(5))


def test_global_minmax():
    np.testing.assert_allclose(global_minmax([2.0, 4.0, 3.0]), [0.0, 1.0, 0.5])


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
def small_data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 28, 28, 1)).astype(np.float32) * 0.3
    x[:, 8:20, 8:20] += 0.6  # centre-high images
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, n)]
    return np.clip(x, 0, 1), y


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


def test_reference_mode_uses_regions_and_claims_only():
    from tfdpmech.mechanisms.adlm_reference import lenet5_relevance_model

    x, y = small_data(32)
    ref = AFRRSReference.from_total(0.6, 16, gamma=0.1, seed=0)
    beta = ref.fit_relevance(lenet5_relevance_model(seed=0), x)
    assert beta.shape == (28, 28) and beta.sum() == pytest.approx(784)
    assert len(np.unique(np.round(beta, 12))) == ref.region_allocation.n_regions_
    ref.fit(x, y, steps=2)
    assert ref.ledger.epsilon_claimed() == pytest.approx(0.6)
    assert ref.ledger.epsilon_provable() is None
    assert "AFRRS has no public code" in ref.ledger.releases[0].basis
    assert ref.ledger.releases[1].details["allocation"] == "regions"


def test_segmentation_figure(tmp_path):
    r = np.add.outer(np.arange(28), np.arange(28)).astype(float)
    alloc = RegionAllocation(global_minmax(r.ravel()), 0.1)
    fig = plot_segmentation(alloc, (28, 28), path=tmp_path / "seg.png")
    assert (tmp_path / "seg.png").stat().st_size > 1000
    assert len(fig.axes) >= 2
    with pytest.raises(ValueError, match="shape"):
        plot_segmentation(alloc, (27, 27))
    with pytest.raises(TypeError):
        plot_segmentation("regions")
