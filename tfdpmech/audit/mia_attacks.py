"""tfdpmech's own membership-inference attacks on probability vectors, for every TensorFlow stack.

tensorflow-privacy's ``privacy_tests.membership_inference_attack`` does not install next to
TensorFlow >= 2.16 / Keras 3 / Python >= 3.12. This module computes the same two attacks, with the
same recipe and the same numbers, from numpy and scikit-learn alone:

* ``THRESHOLD_ATTACK`` (Yeom et al., CSF 2018): a record is called a member when its cross-entropy
  loss ``-log p[y]`` is below a threshold; every threshold is tried (the ROC curve).
* ``LOGISTIC_REGRESSION`` (a trained attack in the style of Shokri et al., S&P 2017, without shadow
  models): scikit-learn's ``LogisticRegression`` on ``[probability vector, loss]``, its inverse
  regularisation ``C`` chosen by 3-fold grid search, trained on one half of a balanced, shuffled set
  and scored on the other (2-fold stratified cross-validation), so every record is scored by a model
  that did not see it.

Both report the AUC of the attack's ROC curve and the attacker advantage ``max |TPR − FPR|`` over
all thresholds (Yeom et al. Def. 4, maximised over the threshold as tensorflow-privacy does). The
maximum is taken on the audited records themselves, so it is positive even without any membership
signal (see :func:`tfdpmech.audit.mia_run.mia_attack_floor`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..validation import check_array

__all__ = [
    "ATTACK_TYPES",
    "LOSS_FLOOR",
    "TRAINED_ATTACK_MIN_RECORDS",
    "check_attack_inputs",
    "check_attack_types",
    "cross_entropy_loss",
    "roc_metrics",
    "threshold_attack",
    "logistic_regression_attack",
    "run_attacks",
]

ATTACK_TYPES = ("THRESHOLD_ATTACK", "LOGISTIC_REGRESSION")

# p[y] is clipped below at this value before the log (tensorflow-privacy's utils.log_loss default)
LOSS_FLOOR = 1e-8

# Members (and non-members) the trained attack needs: after balancing, each 2-fold half must still
# hold 3 of each for the 3-fold grid search over C.
TRAINED_ATTACK_MIN_RECORDS = 6

_C_GRID = np.logspace(-4, 2, 10)  # tensorflow-privacy's LogisticRegressionAttacker grid
_OUTER_FOLDS = 2  # tensorflow-privacy's _run_trained_attack(cross_validation_folds=2)
_INNER_FOLDS = 3  # GridSearchCV(cv=3)


def _check_probs(probs, name: str) -> np.ndarray:
    probs = check_array(probs, name, ndim_min=2).astype(np.float64)
    if probs.ndim != 2 or probs.shape[1] < 2:
        raise ValueError(
            f"{name} must have shape (records, num_classes >= 2), got {probs.shape}; for a single sigmoid "
            f"output p pass np.column_stack([1 - p, p])"
        )
    lo, hi = float(probs.min()), float(probs.max())
    if lo < 0.0 or hi > 1.0:
        raise ValueError(
            f"{name} must hold probabilities in [0, 1], got values in [{lo:.4g}, {hi:.4g}]; pass the model's "
            f"softmax outputs, not logits (e.g. scipy.special.softmax({name}, axis=1))"
        )
    return probs


def _check_labels(labels, name: str, n_records: int, num_classes: int, probs_name: str) -> np.ndarray:
    arr = check_array(labels, name)
    if arr.ndim == 2:
        if arr.shape[1] != num_classes or not np.all((arr == 0) | (arr == 1)) or not np.all(arr.sum(axis=1) == 1):
            raise ValueError(
                f"{name} has shape {arr.shape} but is not one-hot over the {num_classes} classes of "
                f"{probs_name}; pass integer labels in [0, {num_classes - 1}] or one-hot rows"
            )
        arr = np.argmax(arr, axis=1)
    elif arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D integer labels or 2-D one-hot labels, got shape {arr.shape}")
    if not np.all(arr == np.round(arr)):
        raise ValueError(f"{name} holds non-integer values; pass integer class labels in [0, {num_classes - 1}]")
    arr = arr.astype(np.int64)
    if len(arr) != n_records:
        raise ValueError(
            f"{name} has {len(arr)} labels but {probs_name} has {n_records} rows; pass one label per row"
        )
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= num_classes:
        raise ValueError(
            f"{name} holds labels in [{lo}, {hi}], outside [0, {num_classes - 1}] (the columns of "
            f"{probs_name}); pass labels numbered from 0, or probabilities over all classes"
        )
    return arr


def check_attack_inputs(probs_train, probs_test, labels_train, labels_test):
    """Check and normalise an attack's inputs: members' and non-members' probabilities and labels.

    Args:
        probs_train, probs_test: ``(records, C)`` probability vectors on members and non-members.
        labels_train, labels_test: their true labels, integer ``(records,)`` or one-hot ``(records, C)``.

    Returns:
        ``(probs_train, probs_test, labels_train, labels_test)`` as float64 ``(n, C)`` arrays and
        int64 ``(n,)`` label arrays.

    Raises:
        TypeError: non-numeric input.
        ValueError: an empty array, NaN/inf, a probability outside [0, 1], fewer than 2 columns,
            different column counts, a label count that differs from the row count, or labels
            outside ``[0, C-1]``; the message names the argument and the fix.
    """
    pin = _check_probs(probs_train, "probs_train")
    pout = _check_probs(probs_test, "probs_test")
    if pin.shape[1] != pout.shape[1]:
        raise ValueError(
            f"probs_train has {pin.shape[1]} columns but probs_test has {pout.shape[1]}; both must be "
            f"probability vectors over the same classes"
        )
    c = pin.shape[1]
    yin = _check_labels(labels_train, "labels_train", len(pin), c, "probs_train")
    yout = _check_labels(labels_test, "labels_test", len(pout), c, "probs_test")
    return pin, pout, yin, yout


def cross_entropy_loss(probs, labels) -> np.ndarray:
    """Per-record loss ``-log max(p[y], LOSS_FLOOR)`` of checked probabilities and integer labels."""
    p_true = probs[np.arange(len(labels)), labels]
    return -np.log(np.maximum(p_true, LOSS_FLOOR))


def roc_metrics(scores_members, scores_non_members) -> dict:
    """AUC and attacker advantage of a score that is higher for members.

    Uses scikit-learn's ``roc_curve`` (every distinct score as a threshold, "score >= t → member")
    and ``auc``; the advantage is ``max |TPR − FPR|`` over the curve's points.

    Returns:
        ``{"advantage": float, "auc": float}``.
    """
    from sklearn import metrics

    s_in = np.asarray(scores_members, dtype=np.float64).reshape(-1)
    s_out = np.asarray(scores_non_members, dtype=np.float64).reshape(-1)
    if s_in.size == 0 or s_out.size == 0:
        raise ValueError("roc_metrics needs at least one member score and one non-member score")
    if not (np.all(np.isfinite(s_in)) and np.all(np.isfinite(s_out))):
        raise ValueError("roc_metrics got NaN or infinite scores; compute the scores from finite probabilities")
    y = np.concatenate([np.ones(s_in.size), np.zeros(s_out.size)])
    fpr, tpr, _ = metrics.roc_curve(y, np.concatenate([s_in, s_out]))
    return {"advantage": float(np.max(np.abs(tpr - fpr))), "auc": float(metrics.auc(fpr, tpr))}


def threshold_attack(probs_train, probs_test, labels_train, labels_test) -> dict:
    """Loss-threshold attack (Yeom et al. 2018): members are expected to have the lower loss.

    Returns:
        ``{"advantage": float, "auc": float}`` over all loss thresholds.
    """
    pin, pout, yin, yout = check_attack_inputs(probs_train, probs_test, labels_train, labels_test)
    return roc_metrics(-cross_entropy_loss(pin, yin), -cross_entropy_loss(pout, yout))


def _legacy_rng(seed) -> np.random.RandomState:
    # numpy's legacy generator: with seed s it draws what tensorflow-privacy draws from the global
    # np.random state after np.random.seed(s), so both implementations split the records alike.
    if isinstance(seed, np.random.RandomState):
        return seed
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise TypeError(f"seed must be None, an int or a numpy RandomState, got {seed!r}")
    return np.random.RandomState(None if seed is None else int(seed))


def _balanced_folds(n_in: int, n_out: int, rng: np.random.RandomState):
    """Shuffled indices into ``[members, non-members]``: the balanced part and the left-out surplus."""
    fold = np.arange(n_in + n_out)
    left_out = np.zeros(0, dtype=np.int64)
    m = min(n_in, n_out)
    if n_in > m:
        perm = rng.permutation(np.arange(n_in))
        left_out, fold = perm[:n_in - m], np.concatenate([perm[n_in - m:], np.arange(n_in, n_in + n_out)])
    elif n_out > m:
        perm = rng.permutation(np.arange(n_in, n_in + n_out))
        left_out, fold = perm[:n_out - m], np.concatenate([perm[n_out - m:], np.arange(n_in)])
    return rng.permutation(fold), left_out


def logistic_regression_attack(probs_train, probs_test, labels_train, labels_test, *, seed=None) -> dict:
    """Trained logistic-regression attack on ``[probability vector, loss]`` features.

    The larger of the two groups is subsampled to the smaller one's size; the balanced records are
    shuffled and split by ``StratifiedKFold(2)``; on each half, ``GridSearchCV(LogisticRegression,
    C ∈ logspace(-4, 2, 10), cv=3)`` is trained and scores the other half; the left-out surplus is
    scored by the last half's model. AUC and advantage are read from the scores of all records.

    Args:
        probs_train, probs_test, labels_train, labels_test: as in :func:`check_attack_inputs`.
        seed: None (OS entropy), an int or a numpy ``RandomState`` for the subsample and shuffle.

    Returns:
        ``{"advantage": float, "auc": float}``.

    Raises:
        ValueError: fewer than :data:`TRAINED_ATTACK_MIN_RECORDS` members or non-members.
    """
    from sklearn import linear_model, model_selection

    pin, pout, yin, yout = check_attack_inputs(probs_train, probs_test, labels_train, labels_test)
    n_in, n_out = len(pin), len(pout)
    if min(n_in, n_out) < TRAINED_ATTACK_MIN_RECORDS:
        raise ValueError(
            f"the LOGISTIC_REGRESSION attack needs at least {TRAINED_ATTACK_MIN_RECORDS} members and "
            f"non-members (probs_train has {n_in} rows, probs_test {n_out}); pass more records or run "
            f"only attack_types=('THRESHOLD_ATTACK',)"
        )
    rng = _legacy_rng(seed)
    features = np.concatenate([np.column_stack([pin, cross_entropy_loss(pin, yin)]),
                               np.column_stack([pout, cross_entropy_loss(pout, yout)])])
    member = np.concatenate([np.ones(n_in), np.zeros(n_out)])
    fold, left_out = _balanced_folds(n_in, n_out, rng)

    scores = np.full(n_in + n_out, np.nan)
    model = None
    splitter = model_selection.StratifiedKFold(_OUTER_FOLDS, shuffle=False)
    for train_pos, test_pos in splitter.split(features[fold], member[fold]):
        train_idx, test_idx = fold[train_pos], fold[test_pos]
        model = model_selection.GridSearchCV(linear_model.LogisticRegression(solver="lbfgs"),
                                             param_grid={"C": _C_GRID}, cv=_INNER_FOLDS)
        model.fit(features[train_idx], member[train_idx])
        scores[test_idx] = model.predict_proba(features[test_idx])[:, 1]  # column 1: member
    if left_out.size:
        scores[left_out] = model.predict_proba(features[left_out])[:, 1]
    return roc_metrics(scores[:n_in], scores[n_in:])


def run_attacks(probs_train, probs_test, labels_train, labels_test,
                attack_types: Sequence[str] = ATTACK_TYPES, *, seed=None) -> dict:
    """Run the named attacks on one set of outputs.

    Args:
        probs_train, probs_test, labels_train, labels_test: as in :func:`check_attack_inputs`.
        attack_types: names from :data:`ATTACK_TYPES` (tensorflow-privacy's ``AttackType`` names).
        seed: for the trained attack's subsample and shuffle (see :func:`logistic_regression_attack`).

    Returns:
        ``{attack_type: {"advantage": float, "auc": float}}`` in the order of ``attack_types``.

    Raises:
        TypeError: ``attack_types`` is a single string.
        ValueError: an empty or unknown attack name, or bad inputs (see :func:`check_attack_inputs`).
    """
    attack_types = check_attack_types(attack_types, ATTACK_TYPES)
    out = {}
    for name in attack_types:
        if name == "THRESHOLD_ATTACK":
            out[name] = threshold_attack(probs_train, probs_test, labels_train, labels_test)
        else:
            out[name] = logistic_regression_attack(probs_train, probs_test, labels_train, labels_test, seed=seed)
    return out


def check_attack_types(attack_types, known: Sequence[str]) -> tuple:
    """``attack_types`` as a tuple of names from ``known``.

    Raises:
        TypeError: a single string instead of a sequence of names.
        ValueError: no names, or names not in ``known``.
    """
    if isinstance(attack_types, str):
        raise TypeError(f"attack_types must be a sequence of names, got the string {attack_types!r}; "
                        f"pass ({attack_types!r},)")
    attack_types = tuple(attack_types)
    unknown = [name for name in attack_types if name not in known]
    if unknown or not attack_types:
        raise ValueError(f"attack_types has unknown names {unknown or '(none given)'}; choose from {sorted(known)}")
    return attack_types
