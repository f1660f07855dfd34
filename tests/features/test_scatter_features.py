"""scatter_features: the scattering transform (kymatio) + a seeded projection, data-independent, saved and loaded."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tfdpmech.features import ScatteringProjection, scatter_features

pytest.importorskip("tfdpmech.features.kymatio_compat", reason="kymatio is the optional extra tfdpmech[scatter]")


def test_seeded_data_independent_and_saved_with_the_model(tmp_path):
    a, b, c = (scatter_features((16, 16, 1), units=24, seed=s) for s in (3, 3, 4))
    assert a.fingerprint == b.fingerprint != c.fingerprint  # filters fixed by the shape, projection by the seed
    assert a.release.epsilon_provable == 0.0 and "independent of any data" in a.release.basis
    assert not a.unit_bounded  # unbounded: only the Gaussian head (which normalises) may use them
    x = np.random.default_rng(0).uniform(0, 1, (6, 16, 16, 1)).astype(np.float32)
    f = a(x)
    assert f.shape == (6, 24) and np.isfinite(f).all()
    np.testing.assert_allclose(f, b(x), rtol=1e-6)
    path = str(tmp_path / "scatter.keras")
    a.model.save(path)
    np.testing.assert_allclose(keras.models.load_model(path).predict(x, verbose=0), a.model.predict(x, verbose=0),
                               rtol=1e-5, atol=1e-6)


def test_the_transform_is_translation_stable():
    """Scattering coefficients change little under a 1-pixel shift (Mallat 2012), unlike the pixels."""
    feats = scatter_features((16, 16, 1), units=64, seed=0)
    img = np.zeros((1, 16, 16, 1), np.float32)
    img[0, 5:11, 7:9, 0] = 1.0  # a bar
    shifted = np.roll(img, 1, axis=2)
    f, g = feats(img), feats(shifted)
    pixel_change = np.linalg.norm(shifted - img) / np.linalg.norm(img)
    feature_change = np.linalg.norm(f - g) / np.linalg.norm(f)
    assert feature_change < 0.5 * pixel_change


def test_bad_arguments():
    with pytest.raises(ValueError, match="J"):
        ScatteringProjection(0, 8, 0)
    with pytest.raises(ValueError, match="units"):
        ScatteringProjection(2, 0, 0)
    with pytest.raises(TypeError, match="seed"):
        ScatteringProjection(2, 8, None)
    with pytest.raises(TypeError, match="input_shape"):
        scatter_features((16, 16))
    with pytest.raises(ValueError, match=r"input_shape must be \(H, W, 1\): the scattering transform takes one"):
        scatter_features((16, 16, 3))
    layer = ScatteringProjection(2, 8, 0)
    with pytest.raises(ValueError, match=r"ScatteringProjection's input shape must be \(H, W, 1\).*2\*\*J = 4"):
        layer.build((None, 4, 4, 1))


def test_coefficients_are_per_record_and_kept_for_the_same_images(monkeypatch):
    from tfdpmech.features import scatter

    x = np.random.default_rng(0).random((6, 28, 28, 1)).astype(np.float32)
    calls = []
    compute = scatter._coefficients
    monkeypatch.setattr(scatter, "_coefficients", lambda *a: calls.append(1) or compute(*a))
    first = scatter.scattering_coefficients(x)
    assert first.shape == (6, 81 * 7 * 7)
    # per record: a record's features do not depend on the other records
    np.testing.assert_allclose(scatter.scattering_coefficients(x[:2]), first[:2], rtol=1e-5, atol=1e-5)
    again = scatter.scattering_coefficients(x)
    np.testing.assert_array_equal(again, first)
    assert len(calls) == 2  # the same images a second time: no recomputation
    again[:] = 0  # each call owns its copy
    np.testing.assert_array_equal(scatter.scattering_coefficients(x), first)
    scatter.scattering_coefficients(x + 1.0)
    assert len(calls) == 3
