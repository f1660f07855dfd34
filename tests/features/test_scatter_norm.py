"""The private per-channel normalisation of ScatterNet features: its bound, its release, its errors."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dp_accounting")
pytest.importorskip("kymatio")

from tfdpmech.accounting.gaussian import gaussian_epsilon  # noqa: E402
from tfdpmech.accounting.ledger import PrivacyLedger  # noqa: E402
from tfdpmech.features import scatter_norm  # noqa: E402
from tfdpmech.features.scatter import scattering_channels  # noqa: E402
from tfdpmech.features.scatter_norm import (VARIANCE_FLOOR, bn_thresholds, normalise_channels,  # noqa: E402
                                            private_scatter_statistics, record_statistics, scattering_bounds)


def _images(rng, n=6):
    """Images in [0, 1] that push the coefficients: all ones, all zeros, binary checkerboards and stripes of a
    few periods, a centred square, uniform noise and random binary noise."""
    yy, xx = np.mgrid[:28, :28]
    shapes = [np.ones((28, 28)), np.zeros((28, 28))]
    for period in (1, 2, 3, 4, 6):
        shapes += [((yy // period + xx // period) % 2).astype(float), ((xx // period) % 2).astype(float),
                   (((xx + yy) // period) % 2).astype(float)]
    shapes.append(((abs(yy - 13.5) < 7) & (abs(xx - 13.5) < 7)).astype(float))
    shapes += list(rng.uniform(size=(n, 28, 28))) + list((rng.uniform(size=(n, 28, 28)) < 0.5).astype(float))
    return np.stack(shapes)[..., None].astype(np.float32)


def test_every_channel_of_every_image_in_the_unit_range_stays_within_its_bound():
    bounds = scattering_bounds((28, 28))
    assert bounds.shape == (81,)
    assert np.all((bounds > 0.5) & (bounds < 2.0))  # about 1: the filters' L1 norms on kymatio's grids
    coefficients = scattering_channels(_images(np.random.default_rng(0)))
    peak = coefficients.reshape(len(coefficients), 81, -1)
    assert np.all(peak.max(axis=2) <= bounds * (1 + 1e-5))  # float32 transform, float64 bound
    assert np.all(peak.min(axis=2) >= -1e-5 * bounds)
    # the bound is not vacuous: the all-ones image brings the order-0 channel to it within 1 %
    assert peak[0, 0].max() >= 0.99 * bounds[0]
    m, s = record_statistics(coefficients)
    c_mean, c_square = bn_thresholds(bounds)
    assert np.all(np.linalg.norm(m, axis=1) <= c_mean) and np.all(np.linalg.norm(s, axis=1) <= c_square)


def test_a_bound_that_forgot_a_filter_would_be_caught():
    coefficients = scattering_channels(_images(np.random.default_rng(1)))
    peak = coefficients.reshape(len(coefficients), 81, -1).max(axis=(0, 2))
    assert np.any(peak > 0.5 * scattering_bounds((28, 28)))  # half the bound is broken by some image


def test_the_statistics_are_the_clipped_sums_plus_the_seeded_noise():
    rng = np.random.default_rng(3)
    coefficients = rng.uniform(0, 1, size=(5, 4, 2, 2))
    coefficients[0] *= 40.0  # a record beyond the threshold: clipped
    ledger = PrivacyLedger(target_delta=1e-5)
    stats = private_scatter_statistics(coefficients, noise_multiplier=2.0, delta=1e-5, rng=np.random.default_rng(7),
                                       ledger=ledger, thresholds=(1.5, 0.8))
    # by hand: per-record per-channel mean and mean square, each row clipped, summed, noise in that order
    flat = coefficients.reshape(5, 4, 4)
    m, s = flat.mean(axis=2), (flat ** 2).mean(axis=2)
    m = m * np.minimum(1.0, 1.5 / np.linalg.norm(m, axis=1))[:, None]
    s = s * np.minimum(1.0, 0.8 / np.linalg.norm(s, axis=1))[:, None]
    draw = np.random.default_rng(7)
    noise_m, noise_s = draw.normal(size=4) * 2.0, draw.normal(size=4) * 2.0
    mean = (m.sum(axis=0) / 1.5 + noise_m) * 1.5 / 5
    square = (s.sum(axis=0) / 0.8 + noise_s) * 0.8 / 5
    np.testing.assert_allclose(stats.mean, mean, rtol=1e-12)
    np.testing.assert_allclose(stats.variance, np.maximum(square - mean ** 2, VARIANCE_FLOOR), rtol=1e-12)
    assert np.linalg.norm(m[0]) == pytest.approx(1.5)  # the large record was clipped
    normalised = normalise_channels(coefficients, stats)
    expected = (coefficients - mean[None, :, None, None]) / np.sqrt(stats.variance)[None, :, None, None]
    np.testing.assert_allclose(normalised, expected.reshape(5, -1), rtol=1e-5, atol=1e-5)
    # the ledger holds the release, proven, with its two Gaussian mechanisms as its event
    (record,) = ledger.releases
    assert record.component == "scatter_normalisation" and record.neighbours == "add_remove"
    assert record.noise_scale == 2.0 and record.sensitivity == 1.0
    assert ledger.epsilon_provable() == pytest.approx(record.epsilon_provable)
    # two Gaussian mechanisms of multiplier 2 are one of multiplier 2 / √2: the exact curve's ε, no more
    assert record.epsilon_provable == pytest.approx(gaussian_epsilon(2.0 / np.sqrt(2.0), 1e-5), rel=1e-6)


def test_the_variance_is_floored():
    coefficients = np.full((4, 3, 2, 2), 0.25)
    stats = private_scatter_statistics(coefficients, noise_multiplier=1e6, delta=1e-5, rng=np.random.default_rng(0),
                                       ledger=PrivacyLedger(), thresholds=(1.0, 1.0))
    assert np.all(stats.variance >= VARIANCE_FLOOR)
    assert np.any(stats.variance == VARIANCE_FLOOR)  # noise this large drives some channels below 0


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_a_bad_noise_multiplier_is_refused_before_any_release(bad):
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match="noise_multiplier"):
        private_scatter_statistics(np.ones((3, 81, 7, 7)), noise_multiplier=bad, delta=1e-5,
                                   rng=np.random.default_rng(0), ledger=ledger)
    assert len(ledger) == 0


def test_an_unknown_normalisation_is_refused_naming_the_option():
    assert scatter_norm.check_normalisation("private_bn") == "private_bn"
    with pytest.raises(ValueError, match="scatter_norm"):
        scatter_norm.check_normalisation("batch")
