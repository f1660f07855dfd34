"""The segmentation figure (AFRRS Figs. 2–3)."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tfdpmech.mechanisms.afrrs import RegionAllocation, global_minmax, plot_segmentation  # noqa: E402


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
