"""Membership-inference audit of any model that returns probability vectors: the shadow-model attack.

Two attacks, run on the same outputs (the second in :mod:`tfdpmech.audit.mia_run`):

* the Shokri et al. shadow-model attack (S&P 2017) as configured by Jayaraman & Evans (USENIX
  Security 2019) and Lu et al. (§3.3, §5.2–5.3): k
  shadow models trained like the target, one attack classifier **per class** on the shadow
  models' probability vectors, hard predictions; privacy leakage = TPR − FPR (Eq. 32);
* the threshold (loss) and logistic-regression attacks of tensorflow-privacy's ``privacy_tests``
  via :func:`run_mia_attacks`: tensorflow-privacy's own code where it imports (the TensorFlow 2.15
  stack), tfdpmech's scikit-learn version of the same attacks (:mod:`tfdpmech.audit.mia_attacks`)
  elsewhere; every result names the implementation that ran.

The audit only sees what a client sees: probability vectors and true labels. Leakage and accuracy
loss are reported raw (Eqs. 31–32 can be negative; they are not clipped).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from ..noise import make_rng
from ..validation import check_array, check_choice, check_positive_int

__all__ = [
    "ShadowSplit",
    "split_target_and_shadows",
    "shadow_attack_data",
    "ShadowModelAttack",
    "membership_advantage",
    "accuracy_loss",
]

@dataclasses.dataclass(frozen=True)
class ShadowSplit:
    """Index arrays of one membership-inference run.

    Attributes:
        target_in: the target model's training records (members).
        target_out: disjoint records the target never saw (non-members), same size.
        shadows: one ``(shadow_in, shadow_out)`` pair per shadow model, drawn from the records not
            used by the target (shadows may overlap each other, as in Jayaraman's code).
    """

    target_in: np.ndarray
    target_out: np.ndarray
    shadows: tuple


def split_target_and_shadows(n_records: int, n: int, k: int, seed=None) -> ShadowSplit:
    """Sample the target's members/non-members and k shadow splits (the first step of Lu et al. §3.3).

    Args:
        n_records: size of the whole dataset.
        n: records per part (target train = target test = shadow train = shadow test = n).
        k: number of shadow models.
        seed: int, numpy Generator or None.

    Raises:
        ValueError: fewer than ``4n`` records (target 2n plus one shadow 2n), or n, k ≤ 0.
    """
    n_records = check_positive_int(n_records, "n_records")
    n = check_positive_int(n, "n")
    k = check_positive_int(k, "k")
    if n_records < 4 * n:
        raise ValueError(
            f"n_records={n_records} is too small for n={n}: the target needs 2n records and each shadow 2n more "
            f"from the rest; pass n <= {n_records // 4}"
        )
    rng = make_rng(seed)
    perm = rng.permutation(n_records)
    target_in, target_out, pool = perm[:n], perm[n:2 * n], perm[2 * n:]
    shadows = []
    for _ in range(k):
        pick = rng.choice(pool, size=2 * n, replace=False)
        shadows.append((np.sort(pick[:n]), np.sort(pick[n:])))
    return ShadowSplit(np.sort(target_in), np.sort(target_out), tuple(shadows))


def shadow_attack_data(train_model: Callable, predict_proba: Callable, x, y, split: ShadowSplit):
    """Train the shadow models and collect the attack training set (Lu et al. §3.3, steps 2–3).

    Args:
        train_model: ``train_model(x_train, y_train) -> model``; must use the target's recipe
            (architecture, loss incl. α, epochs, n).
        predict_proba: ``predict_proba(model, x) -> (k, C)`` probability vectors.
        x, y: the whole dataset (features, one-hot or integer labels).
        split: from :func:`split_target_and_shadows`.

    Returns:
        ``(probs, labels, membership)``: the shadow models' outputs on their own members (1) and
        non-members (0), with integer labels.
    """
    y_int = _labels(y)
    probs, labels, member = [], [], []
    for shadow_in, shadow_out in split.shadows:
        model = train_model(x[shadow_in], y[shadow_in])
        for idx, bit in ((shadow_in, 1), (shadow_out, 0)):
            probs.append(np.asarray(predict_proba(model, x[idx]), dtype=np.float64))
            labels.append(y_int[idx])
            member.append(np.full(len(idx), bit, dtype=np.int64))
    return np.concatenate(probs), np.concatenate(labels), np.concatenate(member)


def _labels(y) -> np.ndarray:
    y = np.asarray(y)
    return np.argmax(y, axis=1) if y.ndim == 2 else y.astype(np.int64)


def _check_probs(probs, name: str) -> np.ndarray:
    probs = check_array(probs, name, ndim_min=2).astype(np.float64)
    if probs.ndim != 2:
        raise ValueError(f"{name} must have shape (k, num_classes), got {probs.shape}")
    return probs


class ShadowModelAttack:
    """One binary attack classifier per class on probability vectors (Shokri et al.).

    Each attack model is ``C → hidden (activation, L2) → 1 (sigmoid)``, trained with Adam
    (Table 4: 64 hidden units, L2 1e-6, lr 0.01, batch 100, 100 epochs; ReLU as in Jayaraman's
    code; Lu et al. say "the same as the shadow models"). A class whose attack records are all members or all non-members gets a
    constant prediction of that bit; a class with no attack records predicts "non-member".

    Args:
        num_classes: C.
        hidden_units, l2, learning_rate, activation, epochs, batch_size: the attack recipe.
        seed: seed for weight initialisation and shuffling (None: OS entropy).
    """

    def __init__(self, num_classes: int, *, hidden_units: int = 64, l2: float = 1e-6, learning_rate: float = 0.01,
                 activation: str = "relu", epochs: int = 100, batch_size: int = 100, seed: int | None = None):
        self.num_classes = check_positive_int(num_classes, "num_classes", minimum=2)
        self.hidden_units = check_positive_int(hidden_units, "hidden_units")
        self.l2 = float(l2)
        self.learning_rate = float(learning_rate)
        self.activation = check_choice(activation, "activation", ("relu", "tanh", "sigmoid"))
        self.epochs = check_positive_int(epochs, "epochs")
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.seed = seed
        self._models: dict[int, object] = {}

    def _build(self, cls: int):
        init_seed = None if self.seed is None else int(self.seed) * 1000 + cls
        model = keras.Sequential([
            keras.Input(shape=(self.num_classes,)),
            keras.layers.Dense(self.hidden_units, activation=self.activation,
                               kernel_regularizer=keras.regularizers.L2(self.l2),
                               kernel_initializer=keras.initializers.GlorotUniform(seed=init_seed)),
            keras.layers.Dense(1, activation="sigmoid",
                               kernel_initializer=keras.initializers.GlorotUniform(
                                   seed=None if init_seed is None else init_seed + 1)),
        ])
        model.compile(optimizer=keras.optimizers.Adam(self.learning_rate), loss="binary_crossentropy")
        return model

    def fit(self, probs, labels, membership) -> "ShadowModelAttack":
        """Train the per-class attack models on shadow outputs (Lu et al. §3.3, Table 4)."""
        probs = _check_probs(probs, "probs")
        labels = _labels(labels)
        membership = np.asarray(membership).astype(np.int64)
        if not (len(probs) == len(labels) == len(membership)):
            raise ValueError("probs, labels and membership must have the same number of rows")
        if probs.shape[1] != self.num_classes:
            raise ValueError(f"probs has {probs.shape[1]} columns, expected num_classes={self.num_classes}")
        if self.seed is not None:
            keras.utils.set_random_seed(int(self.seed))
        for cls in range(self.num_classes):
            sel = labels == cls
            bits = membership[sel]
            if bits.size == 0:
                self._models[cls] = 0
            elif bits.min() == bits.max():
                self._models[cls] = int(bits[0])
            else:
                model = self._build(cls)
                model.fit(probs[sel].astype(np.float32), bits.astype(np.float32), epochs=self.epochs,
                          batch_size=self.batch_size, verbose=0, shuffle=True)
                self._models[cls] = model
        return self

    def predict_membership(self, probs, labels) -> np.ndarray:
        """Hard membership predictions (1 = member), each row routed to its class's model."""
        if not self._models:
            raise RuntimeError("call fit(...) before predict_membership(...)")
        probs = _check_probs(probs, "probs")
        labels = _labels(labels)
        out = np.zeros(len(probs), dtype=np.int64)
        for cls in range(self.num_classes):
            sel = labels == cls
            if not np.any(sel):
                continue
            model = self._models[cls]
            if isinstance(model, int):
                out[sel] = model
            else:
                score = np.asarray(model(tf.constant(probs[sel], tf.float32), training=False)).reshape(-1)
                out[sel] = (score > 0.5).astype(np.int64)
        return out

    def advantage(self, probs_in, labels_in, probs_out, labels_out) -> float:
        """Privacy leakage TPR − FPR on members (``_in``) and non-members (``_out``) (Eq. 32)."""
        return membership_advantage(self.predict_membership(probs_in, labels_in),
                                    self.predict_membership(probs_out, labels_out))


def membership_advantage(pred_members, pred_non_members) -> float:
    """``TPR − FPR`` of hard predictions on members and non-members (Lu et al. Eq. 32); not clipped."""
    pin = np.asarray(pred_members)
    pout = np.asarray(pred_non_members)
    if pin.size == 0 or pout.size == 0:
        raise ValueError("membership_advantage needs at least one member and one non-member prediction")
    pin = check_array(pin, "pred_members").astype(np.float64).reshape(-1)
    pout = check_array(pout, "pred_non_members").astype(np.float64).reshape(-1)
    return float(pin.mean() - pout.mean())


def accuracy_loss(acc_dp: float, acc_baseline: float) -> float:
    """``1 − acc_DP/acc_baseline`` (Lu et al. Eq. 31); not clipped (it may be negative)."""
    if not acc_baseline > 0:
        raise ValueError(f"acc_baseline must be > 0, got {acc_baseline}")
    return float(1.0 - acc_dp / acc_baseline)
