"""Tabular datasets for the DP-ERM experiments (Kang et al.): offline, features in the unit ball.

``breast_cancer`` (scikit-learn's WDBC, 569×30, binary), ``iris`` (150×4, 3 classes) and
``synthetic`` (rows N(0, I) clipped to the unit ball, labels ``sign(3·w0ᵀx + logistic noise)``,
the synthetic logistic set of Kang et al. §6). The real sets are standardised with training-set
statistics as in the paper (a data-dependent step no method's ε covers: it warns with
:class:`~tfdpmech.validation.PrivacyLeakWarning`), divided by √d and rows clipped to ‖x‖ <= R.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np

from .mechanisms.input_perturbation import clip_rows
from .validation import PrivacyLeakWarning

__all__ = ["TABULAR_DATASETS", "TabularConfig", "load_tabular"]

TABULAR_DATASETS = ("breast_cancer", "iris", "synthetic")


@dataclasses.dataclass
class TabularConfig:
    """Sizes of the synthetic set and the public feature-norm bound R."""

    feature_norm_bound: float = 1.0
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
    x_tr, y_tr, x_te, y_te = _split(bunch.data.astype(np.float64), bunch.target.astype(np.int64), 0.2, rng)
    mean, std = x_tr.mean(axis=0), x_tr.std(axis=0) + 1e-12  # training-set statistics: not accounted
    warnings.warn(f"{name}: features standardised with statistics of the private training set, which no "
                  "method's ε accounts for (Kang et al. §6 does not say how they preprocessed)", PrivacyLeakWarning,
                  stacklevel=2)
    d = x_tr.shape[1]
    prep = lambda a: clip_rows((a - mean) / std / math.sqrt(d) * R, R)[0]  # noqa: E731
    return dict(name=name, x_train=prep(x_tr), y_train=y_tr, x_test=prep(x_te), y_test=y_te,
                num_classes=int(bunch.target.max()) + 1,
                note=("sklearn WDBC (569×30, stands in for the paper's 699-row Wisconsin set)"
                      if name == "breast_cancer"
                      else "sklearn Iris, all 3 classes (multinomial)")
                + "; standardised with training-set statistics (not accounted), /√d, rows clipped to ‖x‖ <= 1")
