"""The ``dpsgd`` row with correlated noise or a weight average: BandMF and De et al.'s warmed-up average.

- ``dpsgd_bandmf``: the ``dpsgd`` row (its network, its recipe at each ε: ``options["dpsgd_epochs"]`` and
  ``options["dpsgd_recipe"]``) with banded matrix factorization (``DPSGD(..., bands=b)``: cyclic Poisson sampling
  over b partitions, noise correlated across steps by a b-banded strategy; Choquette-Choo et al. 2023), b from
  ``options["bands"]`` (an int or ``{ε: b}``; :data:`BANDMF_BANDS` where none is given). Its ε is proven as the
  amplified event (⌈steps / b⌉ rounds at q_b = b·L/n); ``bands = 1`` is the ``dpsgd`` row itself.
- ``dpsgd_ema``: the ``dpsgd`` row whose weights are averaged with De et al.'s (2022) warm-up (decay
  ``min(d, (1 + t) / (10 + t))`` at step t), d from ``options["ema_decay"]`` (:data:`EMA_DECAY` where none is
  given); validation and the test accuracy score **the weight average** (post-processing: the same ε, the ledger
  unchanged).
- ``dpsgd_augmult_combined``: ``dpsgd_augmult`` (the views of ``options["augmult_k"]`` / ``["augmentation"]``) with
  ``options["augmult_bands"]`` bands (default 1: independent noise) and the warmed-up average of decay
  ``options["augmult_ema_decay"]`` (default none): the combination the validation sweeps point to, set per ε once
  they have run (its own options, so that the single rows' choices and this one's stay apart).

The defaults are stated before any sweep: b = 4 is the bands ``tools/bandmf_error.py`` predicts never noisier than
DP-SGD at the mnist and fashion presets' batches, steps and ε (the iterates' noise 0.73, 0.90, 0.92 and 0.94 of
DP-SGD's at MNIST ε = 3 / 1 and Fashion-MNIST ε = 3 / 1); d = 0.999 is De et al.'s order of decay for a few thousand
steps. ``tools/mnist_tuning.py`` and ``tools/fashion_tuning.py`` choose both on the validation split. Each run's
notes name the bands or the average and which weights were scored.
"""

from __future__ import annotations

from ..options import option_at
from ..registry import Build, register_mechanism
from .dpsgd import _DPSGD_OPTIONS, _augmult, _image

__all__ = ["BANDMF_BANDS", "EMA_DECAY"]

BANDMF_BANDS = 4  # dpsgd_bandmf's bands, unless options["bands"] says otherwise
EMA_DECAY = 0.999  # dpsgd_ema's decay (the warm-up rises to it), unless options["ema_decay"] says otherwise

_RAW = "the raw weights of the last step"
_AVERAGE = "the weight average"


def _bands_notes(bands: int) -> dict:
    if bands == 1:
        return {"noise": "independent Gaussian noise every step (DP-SGD)", "bands": 1}
    return {"noise": f"BandMF, {bands} bands: cyclic Poisson sampling over {bands} partitions, noise correlated "
                     f"across steps by a {bands}-banded Toeplitz strategy (Choquette-Choo et al. 2023)",
            "bands": bands}


def _average_notes(decay) -> dict:
    if decay is None:
        return {"weight_average": "none", "weights_scored": _RAW}
    return {"weight_average": f"exponential moving average, decay min({decay:g}, (1 + t) / (10 + t)) at step t "
                              "(De et al. 2022's warm-up); post-processing, never charged",
            "ema_decay": decay, "weights_scored": _AVERAGE}


def _averaged(decay) -> dict:
    return {} if decay is None else {"ema_momentum": decay, "ema_warmup": True}


def _with_notes(built: Build, *notes: dict) -> Build:
    for extra in notes:
        built.notes.update(extra)
    return built


def _image_only(ctx, name: str) -> None:
    if ctx.kind != "image":
        raise ValueError(f"{name} trains the dpsgd row's image network: run it on an image dataset")


def _bandmf(ctx, epsilon, seed) -> Build:
    """``dpsgd`` with BandMF's correlated noise, ``options["bands"]`` bands."""
    _image_only(ctx, "dpsgd_bandmf")
    bands = option_at(ctx.config.options, epsilon, "bands", BANDMF_BANDS)
    built = _image(ctx, epsilon, seed, "poisson", overrides={"bands": bands})
    return _with_notes(built, _bands_notes(bands), {"weights_scored": _RAW})


def _ema(ctx, epsilon, seed) -> Build:
    """``dpsgd`` whose weights are averaged with De et al.'s warm-up, the average scored."""
    _image_only(ctx, "dpsgd_ema")
    decay = option_at(ctx.config.options, epsilon, "ema_decay", EMA_DECAY)
    built = _image(ctx, epsilon, seed, "poisson", overrides=_averaged(decay))
    return _with_notes(built, _average_notes(decay))


def _augmult_combined(ctx, epsilon, seed) -> Build:
    """``dpsgd_augmult`` with ``options["augmult_bands"]`` bands and the average of ``options["augmult_ema_decay"]``."""
    bands = option_at(ctx.config.options, epsilon, "augmult_bands", 1)
    decay = option_at(ctx.config.options, epsilon, "augmult_ema_decay", None)
    built = _augmult(ctx, epsilon, seed, overrides={"bands": bands, **_averaged(decay)},
                     name="dpsgd_augmult_combined")
    return _with_notes(built, _bands_notes(bands), _average_notes(decay))


register_mechanism("dpsgd_bandmf", _bandmf,
                   "dpsgd with banded matrix factorization (Choquette-Choo et al. 2023): cyclic Poisson sampling over "
                   "b partitions, noise correlated across steps (options['bands'], default 4); the dpsgd row's "
                   "network and recipe, tfdpmech's engine; ε proven (⌈steps / b⌉ rounds at q_b = b·L/n)",
                   mode="private", paper="dpsgd", data=("image",), options=(*_DPSGD_OPTIONS, "bands"))
register_mechanism("dpsgd_ema", _ema,
                   "dpsgd with its weights averaged (De et al. 2022's warmed-up average, options['ema_decay'], "
                   "default 0.999), the average scored; post-processing: the same σ and ε, proven",
                   mode="private", paper="dpsgd", data=("image",), options=(*_DPSGD_OPTIONS, "ema_decay"))
register_mechanism("dpsgd_augmult_combined", _augmult_combined,
                   "dpsgd_augmult with options['augmult_bands'] BandMF bands (default 1) and De et al.'s warmed-up "
                   "weight average of decay options['augmult_ema_decay'] (default none), the average scored when "
                   "there is one; ε proven",
                   mode="private", paper="dpsgd", data=("image",),
                   options=(*_DPSGD_OPTIONS, "augmult_k", "augmentation", "augmult_bands", "augmult_ema_decay"))
