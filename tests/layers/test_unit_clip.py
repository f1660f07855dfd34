"""UnitClip: the hard bound before the output layer."""

from __future__ import annotations

import numpy as np
import pytest

from tfdpmech.layers import UnitClip


def _np(t):
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


# ------------------------------------------------------------------------------------------------
# UnitClip
# ------------------------------------------------------------------------------------------------


def test_unit_clip_bounds():
    x = np.array([[-2.0, -0.5, 0.0, 0.3, 1.0, 1.5]], dtype=np.float32)
    f32 = lambda v: np.array([v], dtype=np.float32)  # noqa: E731
    np.testing.assert_array_equal(_np(UnitClip()(x)), f32([0.0, 0.0, 0.0, 0.3, 1.0, 1.0]))
    np.testing.assert_array_equal(_np(UnitClip(-1.0, 1.0)(x)), f32([-1.0, -0.5, 0.0, 0.3, 1.0, 1.0]))
    np.testing.assert_array_equal(_np(UnitClip(0.25, 0.5)(x)), f32([0.25, 0.25, 0.25, 0.3, 0.5, 0.5]))
    big = np.random.default_rng(0).normal(size=(3, 4, 5)).astype(np.float32) * 1e4
    out = _np(UnitClip()(big))
    assert out.shape == big.shape and out.min() >= 0.0 and out.max() <= 1.0


@pytest.mark.parametrize("low, high", [(-2.0, 1.0), (0.0, 2.0), (0.5, 0.5), (0.8, 0.2), (-1.5, -1.2)])
def test_unit_clip_constructor_errors(low, high):
    with pytest.raises(ValueError, match=r"UnitClip needs -1 <= low < high <= 1.*low=.*high="):
        UnitClip(low, high)
