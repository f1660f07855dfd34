"""scatter_features checks input_shape first: one channel, and sides the scattering at scale J can pad.

The check needs no kymatio (it runs before the layer is built); the boundary cases that do build
are skipped where the optional extra is missing.
"""

from __future__ import annotations

import numpy as np
import pytest

from tfdpmech.features import scatter_features, scattering_coefficients


@pytest.mark.parametrize("shape, J, needed", [
    ((8, 8, 3), 2, "one-channel images"),
    ((28, 28, 2), 2, "one-channel images"),
    ((4, 4, 1), 2, r"greater than 2\*\*J = 4"),
    ((28, 4, 1), 2, r"greater than 2\*\*J = 4"),
    ((8, 8, 1), 3, r"greater than 2\*\*J = 8"),
    ((2, 9, 1), 1, r"greater than 2\*\*J = 2"),
])
def test_input_shapes_the_transform_cannot_take_are_refused_naming_input_shape(shape, J, needed):
    with pytest.raises(ValueError, match=needed) as info:
        scatter_features(shape, J=J, units=4)
    message = str(info.value)
    assert message.startswith("input_shape must be (H, W, 1)")
    assert str(shape) in message  # the value that was passed


def test_colour_images_are_told_to_become_grey_with_the_shape_to_pass():
    with pytest.raises(ValueError, match=r"x\.mean\(axis=-1, keepdims=True\).*\(8, 8, 1\)"):
        scatter_features((8, 8, 3))


def test_scattering_coefficients_checks_the_images_before_any_transform():
    with pytest.raises(ValueError, match=r"x's image shape must be \(H, W, 1\).*2\*\*J = 4"):
        scattering_coefficients(np.zeros((2, 4, 4, 1), np.float32))
    with pytest.raises(ValueError, match="one-channel images"):
        scattering_coefficients(np.zeros((2, 8, 8, 3), np.float32))


@pytest.mark.parametrize("J", [1, 2, 3])
def test_the_smallest_accepted_side_builds_and_transforms(J):
    """The rule is kymatio's: a side of 2**J + 1 pixels builds; 2**J is refused above."""
    pytest.importorskip("tfdpmech.features.kymatio_compat", reason="kymatio is the optional extra tfdpmech[scatter]")
    side = 2 ** J + 1
    features = scatter_features((side, side + 3, 1), J=J, units=4)
    out = features(np.random.default_rng(0).uniform(0, 1, (2, side, side + 3, 1)).astype(np.float32))
    assert out.shape == (2, 4) and np.isfinite(out).all()
