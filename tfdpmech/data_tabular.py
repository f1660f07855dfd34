"""Tabular datasets for the DP-ERM experiments (Kang et al.): offline, features in the unit ball.

``breast_cancer`` (scikit-learn's WDBC, 569×30, binary), ``iris`` (150×4, 3 classes) and
``synthetic`` (rows N(0, I) clipped to the unit ball, labels ``sign(3·w0ᵀx + logistic noise)``,
the synthetic logistic set of Kang et al. §6). The real sets are standardised with the mean and
standard deviation of **public** records: a stratified ``public_fraction`` of the training split,
kept out of the private set and used for nothing else (ε = 0 for the private set: the statistics
never see a private record; Kang et al. §6 do not say how they preprocessed). Then divided by √d
and rows clipped to ‖x‖ <= R.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .mechanisms.input_perturbation import clip_rows
from .validation import check_real

__all__ = ["TABULAR_DATASETS", "TabularConfig", "load_tabular", "public_standardiser"]

TABULAR_DATASETS = ("breast_cancer", "iris", "synthetic")


@dataclasses.dataclass
class TabularConfig:
    """Sizes of the synthetic set, the public feature-norm bound R and the public fraction of the real sets.

    ``public_fraction``: the share of the training split of breast_cancer / iris kept out of the private set
    whose statistics standardise the features (stratified; at least 2 records per class).
    """

    feature_norm_bound: float = 1.0
    public_fraction: float = 0.1
    synthetic_n: int = 20_000
    synthetic_d: int = 10
    synthetic_test: int = 5_000


def _split(x, y, test_fraction, rng):
    """Stratified split."""
    test = []
    for label in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == label))
        test.extend(idx[: int(round(test_fraction * len(idx)))])
    mask = np.zeros(len(y), bool)
    mask[test] = True
    return x[~mask], y[~mask], x[mask], y[mask]


def public_standardiser(x_public, radius: float):
    """``x ↦ clip((x − mean)/std/√d·R, R)`` with the mean and std of ``x_public`` only: no other record
    enters the map, so it is ε = 0 for every record outside ``x_public``.

    Raises:
        ValueError: fewer than 2 public records.
    """
    x_public = np.asarray(x_public, dtype=np.float64)
    if len(x_public) < 2:
        raise ValueError(f"x_public has {len(x_public)} records; the standardisation needs at least 2 public records "
                         "(raise TabularConfig.public_fraction)")
    mean, std = x_public.mean(axis=0), x_public.std(axis=0) + 1e-12
    d = x_public.shape[1]
    return lambda a: clip_rows((np.asarray(a, np.float64) - mean) / std / math.sqrt(d) * radius, radius)[0]


def load_tabular(name: str, config: TabularConfig | None = None, *, seed: int = 0) -> dict:
    """Features with ‖x‖ <= R, integer labels, and a note on the preprocessing.

    Raises:
        ValueError: unknown dataset name.
    """
    config = config or TabularConfig()
    rng = np.random.default_rng(seed)
    R = config.feature_norm_bound
    if name == "synthetic":
        n, d = config.synthetic_n + config.synthetic_test, config.synthetic_d
        x = rng.normal(size=(n, d))
        x = clip_rows(x, R)[0]
        w0 = np.random.default_rng(12345).normal(size=d)
        y = (3.0 * x @ w0 + rng.logistic(size=n) > 0).astype(np.int64)
        k = config.synthetic_n
        return dict(name=name, x_train=x[:k], y_train=y[:k], x_test=x[k:], y_test=y[k:], num_classes=2,
                    note="synthetic logistic set (Kang et al. §6); rows N(0, I) clipped to the unit ball")
    if name not in ("breast_cancer", "iris"):
        raise ValueError(f"unknown dataset {name!r}; choose from {list(TABULAR_DATASETS)}")
    from sklearn import datasets as skd

    bunch = skd.load_breast_cancer() if name == "breast_cancer" else skd.load_iris()
    fraction = check_real(config.public_fraction, "public_fraction", minimum=0.0, maximum=0.5)
    x_tr, y_tr, x_te, y_te = _split(bunch.data.astype(np.float64), bunch.target.astype(np.int64), 0.2, rng)
    # public records for the statistics: a stratified share of the training split, never private, never trained on
    x_tr, y_tr, x_pub, _ = _split(x_tr, y_tr, fraction, rng)
    prep = public_standardiser(x_pub, R)
    return dict(name=name, x_train=prep(x_tr), y_train=y_tr, x_test=prep(x_te), y_test=y_te,
                num_classes=int(bunch.target.max()) + 1, public_for_statistics=len(x_pub),
                note=("sklearn WDBC (569×30, stands in for the paper's 699-row Wisconsin set)"
                      if name == "breast_cancer"
                      else "sklearn Iris, all 3 classes (multinomial)")
                + f"; standardised with the statistics of {len(x_pub)} public records held out of the training split "
                  "(ε = 0 for the private set), /√d, rows clipped to ‖x‖ <= 1")
