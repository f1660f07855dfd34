"""A segmentation figure like AFRRS's Figs. 2–3: private relevance and its relevance regions."""

from __future__ import annotations

import numpy as np

from .allocation import RegionAllocation

__all__ = ["plot_segmentation"]


def plot_segmentation(allocation: RegionAllocation, shape=(28, 28), *, title: str | None = None, path=None):
    """Two panels: the private relevance ``R*`` and the regions, each drawn in its mean relevance.

    As in the paper's Figs. 2–3, features of one region share one colour and darker means more
    relevant (so less noise). Regions are relevance level sets and need not be connected.

    Args:
        allocation: a fitted :class:`RegionAllocation`.
        shape: the image shape of the d features, e.g. (28, 28).
        title: figure title (default: s and γ).
        path: if given, the figure is also saved there.

    Returns:
        the :class:`matplotlib.figure.Figure`.

    Raises:
        TypeError: ``allocation`` is not a RegionAllocation.
        ValueError: ``shape`` does not hold d features.
        ImportError: matplotlib is missing.
    """
    if not isinstance(allocation, RegionAllocation):
        raise TypeError(f"allocation must be a RegionAllocation, got {type(allocation).__name__}")
    shape = tuple(int(s) for s in shape)
    if int(np.prod(shape)) != allocation.labels_.size:
        raise ValueError(f"shape {shape} holds {int(np.prod(shape))} features, the allocation has "
                         f"{allocation.labels_.size}; pass the image shape of the features")
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is a core test dependency
        raise ImportError("plot_segmentation needs matplotlib: pip install matplotlib") from exc
    r = allocation.relevance.reshape(shape)
    regions = allocation.region_relevance_[allocation.labels_].reshape(shape)
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.4))
    im0 = axes[0].imshow(r, cmap="Greys")
    axes[0].set_title("private relevance R*")
    fig.colorbar(im0, ax=axes[0], fraction=0.046)
    im1 = axes[1].imshow(regions, cmap="Greys")
    if allocation.n_regions_ <= 20:  # region borders; with many regions they would cover the picture
        axes[1].contour(allocation.labels_.reshape(shape), levels=np.arange(allocation.n_regions_) + 0.5,
                        colors="tab:red", linewidths=0.4)
    axes[1].set_title(f"{allocation.n_regions_} regions (colour = region mean)")
    fig.colorbar(im1, ax=axes[1], fraction=0.046)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(title or f"AFRRS segmentation, γ = {allocation.gamma:g}")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
