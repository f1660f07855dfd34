"""BoundedLRN (AdLM Eq. 22): hand-computed values, the fused and generic paths, bounds and errors."""

from __future__ import annotations

import numpy as np
import pytest

from tfdpmech.layers import BoundedLRN


Q, ALPHA, BETA = 2.0, 1e-4, 0.75


def _np(t):
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


def _lrn_reference(h, q=Q, size=5, alpha=ALPHA, beta=BETA):
    """Eq. 22 written loop by loop over channels (channels last)."""
    h = np.asarray(h, dtype=np.float64)
    n = h.shape[-1]
    half = size // 2
    out = np.empty_like(h)
    for k in range(n):
        lo, hi = max(0, k - half), min(n - 1, k + half)
        s = np.sum(h[..., lo : hi + 1] ** 2, axis=-1)
        out[..., k] = h[..., k] / np.maximum(h[..., k], (q + alpha * s) ** beta)
    return out


# ------------------------------------------------------------------------------------------------
# BoundedLRN (AdLM Eq. 22)
# ------------------------------------------------------------------------------------------------


def test_bounded_lrn_hand_computed_five_channels():
    h = np.array([[0.5, 100.0, 1.0, 200.0, 0.25]], dtype=np.float32)
    # window of channel k: k-2..k+2 clipped to 0..4; the sum is NOT divided by size=5
    expected = [
        0.5 / (2 + 1e-4 * (0.5**2 + 100**2 + 1.0**2)) ** 0.75,  # 0.5 / 3.000125^0.75 = 0.219339
        1.0,  # 100 > (2 + 1e-4·50001.25)^0.75 = 4.30: the max(h, ·) branch
        1.0 / (2 + 1e-4 * (0.5**2 + 100**2 + 1.0**2 + 200**2 + 0.25**2)) ** 0.75,  # 1 / 7.00013^0.75
        1.0,  # 200 > (2 + 1e-4·50001.06)^0.75
        0.25 / (2 + 1e-4 * (1.0**2 + 200**2 + 0.25**2)) ** 0.75,  # 0.25 / 6.00011^0.75
    ]
    np.testing.assert_allclose(expected, [0.219339, 1.0, 0.232365, 1.0, 0.065211], atol=1e-6)
    out = _np(BoundedLRN()(h))
    assert out.shape == (1, 5)
    np.testing.assert_allclose(out[0], expected, rtol=1e-5)
    # the same numbers with the AlexNet-default values passed explicitly
    np.testing.assert_allclose(_np(BoundedLRN(q=2, size=5, alpha=1e-4, beta=0.75)(h)), out, rtol=1e-6)
    # dividing the sum by size (the "alpha/size" convention of some frameworks) would give 0.2768
    alpha_over_size = 0.5 / (2 + 1e-4 / 5 * 10001.25) ** 0.75
    assert abs(out[0, 0] - alpha_over_size) > 0.05


def test_bounded_lrn_hand_computed_seven_channels_window_edges():
    # big values at the two ends: they are inside the windows of channels 1, 2 (resp. 4, 5) only
    h = np.array([[300.0, 0.5, 1.0, 0.8, 1.5, 0.3, 400.0]], dtype=np.float32)
    sq = h[0].astype(np.float64) ** 2
    expected = np.array([
        1.0,  # 300 > (2 + 1e-4·(300²+0.5²+1²))^0.75 = 6.04
        0.5 / (2 + 1e-4 * (sq[0] + sq[1] + sq[2] + sq[3])) ** 0.75,  # channels 0..3
        1.0 / (2 + 1e-4 * (sq[0] + sq[1] + sq[2] + sq[3] + sq[4])) ** 0.75,  # 0..4
        0.8 / (2 + 1e-4 * (sq[1] + sq[2] + sq[3] + sq[4] + sq[5])) ** 0.75,  # 1..5: neither end
        1.5 / (2 + 1e-4 * (sq[2] + sq[3] + sq[4] + sq[5] + sq[6])) ** 0.75,  # 2..6
        0.3 / (2 + 1e-4 * (sq[3] + sq[4] + sq[5] + sq[6])) ** 0.75,  # 3..6
        1.0,
    ])
    np.testing.assert_allclose(expected, [1.0, 0.082779, 0.165555, 0.475607, 0.171644, 0.034329, 1.0], atol=1e-6)
    # channel 3's window must exclude channels 0 and 6: with them the value would be 0.0675
    assert expected[3] > 0.4 and abs(0.8 / (2 + 1e-4 * sq.sum()) ** 0.75 - 0.067540) < 1e-6
    out = _np(BoundedLRN()(h))
    np.testing.assert_allclose(out[0], expected, rtol=1e-5)


def test_bounded_lrn_conv_shaped_input_matches_loop_reference():
    rng = np.random.default_rng(0)
    h = (rng.random((2, 3, 2, 7)) * 10.0 ** rng.uniform(-1, 3, size=(2, 3, 2, 7))).astype(np.float32)
    out = _np(BoundedLRN()(h))
    assert out.shape == h.shape
    np.testing.assert_allclose(out, _lrn_reference(h), rtol=1e-5, atol=1e-7)
    # a window of 3 and other constants follow the same formula
    layer = BoundedLRN(q=1.0, size=3, alpha=0.01, beta=0.5)
    np.testing.assert_allclose(_np(layer(h)), _lrn_reference(h, q=1.0, size=3, alpha=0.01, beta=0.5),
                               rtol=1e-5, atol=1e-7)


def test_bounded_lrn_fewer_channels_than_window():
    h = np.array([[3.0, 0.5]], dtype=np.float32)
    expected = [1.0, 0.5 / (2 + 1e-4 * 9.25) ** 0.75]
    np.testing.assert_allclose(_np(BoundedLRN()(h))[0], expected, rtol=1e-6)


def test_bounded_lrn_output_in_unit_interval_for_non_negative_inputs():
    rng = np.random.default_rng(1)
    mags = 10.0 ** rng.uniform(-4, 8, size=(6, 4, 4, 9))
    h = rng.random((6, 4, 4, 9)) * mags
    h[0, 0, 0, :] = 0.0  # zeros
    h[1, 0, 0, :] = 1e4  # the max(h, ·) branch in every channel
    h[2, 0, 0, :] = 1e19  # h² overflows float32: still finite and bounded
    h = h.astype(np.float32)
    out = _np(BoundedLRN()(h))
    assert np.all(np.isfinite(out))
    assert out.min() >= 0.0 and out.max() <= 1.0
    np.testing.assert_array_equal(out[0, 0, 0], 0.0)
    np.testing.assert_array_equal(out[1, 0, 0], 1.0)  # (2 + 1e-4·5e8)^0.75 = 3343 < 1e4
    assert np.sum(out == 1.0) > 100  # the max(h, ·) branch triggered for large inputs
    assert np.sum(out < 0.5) > 100  # and the LRN branch for small ones


def test_bounded_lrn_constructor_errors():
    with pytest.raises(ValueError, match="q must be > 0"):
        BoundedLRN(q=0.0)
    with pytest.raises(ValueError, match="alpha must be >= 0 and beta > 0"):
        BoundedLRN(alpha=-1e-4)
    with pytest.raises(ValueError, match="alpha must be >= 0 and beta > 0"):
        BoundedLRN(beta=0.0)
    with pytest.raises(ValueError, match="size must be >= 1"):
        BoundedLRN(size=0)
    with pytest.raises(TypeError, match="size must be an integer"):
        BoundedLRN(size=2.5)


def test_bounded_lrn_fused_and_generic_paths_agree():
    """Rank-4 float32 inputs use TF's fused LRN (min(lrn, 1)); other ranks the explicit Eq. 22."""
    rng = np.random.default_rng(0)
    x = (rng.uniform(0, 3, size=(2, 3, 3, 7)) ** 4).astype(np.float32)  # some entries trigger max(h, .)
    layer = BoundedLRN()
    fused = layer(x).numpy()
    generic = layer(x.reshape(2, 9, 7)).numpy().reshape(x.shape)  # rank 3: band-matrix path
    np.testing.assert_allclose(fused, generic, rtol=2e-5, atol=1e-6)
    assert fused.max() == 1.0 and fused.min() >= 0
