"""Membership-inference audit of any model that returns probability vectors.

Two attacks, run on the same outputs:

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
from typing import Callable, Sequence

import keras
import numpy as np
import tensorflow as tf

from ..noise import make_rng
from ..validation import check_array, check_choice, check_positive_int
from . import mia_attacks

__all__ = [
    "ShadowSplit",
    "split_target_and_shadows",
    "shadow_attack_data",
    "ShadowModelAttack",
    "membership_advantage",
    "accuracy_loss",
    "MIA_IMPLEMENTATIONS",
    "mia_implementation",
    "mia_attacks_available",
    "run_mia_attacks",
    "mia_attack_floor",
    "run_tf_privacy_attacks",
    "tf_privacy_attacks_available",
    "tf_privacy_attack_floor",
    "TF_PRIVACY_MIA_HINT",
]

TF_PRIVACY_MIA_HINT = (
    "tensorflow-privacy's membership-inference attacks live in "
    "tensorflow_privacy.privacy.privacy_tests.membership_inference_attack, which the PyPI wheel of "
    "tensorflow-privacy 0.9.0 does not ship (tensorflow/privacy#555); add it with "
    "`pip install 'tfdpmech[tfprivacy,audit]' && python -m tfdpmech.audit.tf_privacy_mia_addon` "
    "(`make test-tfprivacy` does this)"
)


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


def _import_tf_privacy_mia():
    try:
        from tensorflow_privacy.privacy.privacy_tests.membership_inference_attack import (  # noqa: WPS433
            membership_inference_attack as mia,
        )
        from tensorflow_privacy.privacy.privacy_tests.membership_inference_attack import data_structures as ds
    except ImportError as exc:
        raise ImportError(TF_PRIVACY_MIA_HINT) from exc
    return mia, ds


def tf_privacy_attacks_available() -> bool:
    """Whether tensorflow-privacy's membership-inference attack module can be imported."""
    try:
        _import_tf_privacy_mia()
    except ImportError:
        return False
    return True


MIA_IMPLEMENTATIONS = ("auto", "tensorflow_privacy", "tfdpmech")


def mia_implementation(implementation: str = "auto") -> str:
    """The implementation :func:`run_mia_attacks` uses for ``implementation`` on this install.

    ``"auto"`` is ``"tensorflow_privacy"`` where its ``privacy_tests`` module imports, else
    ``"tfdpmech"`` (:mod:`tfdpmech.audit.mia_attacks`, numpy and scikit-learn only).
    """
    check_choice(implementation, "implementation", MIA_IMPLEMENTATIONS)
    if implementation == "auto":
        return "tensorflow_privacy" if tf_privacy_attacks_available() else "tfdpmech"
    return implementation


def mia_attacks_available() -> bool:
    """Whether :func:`run_mia_attacks` can run here (tensorflow-privacy's attacks or scikit-learn)."""
    if tf_privacy_attacks_available():
        return True
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return False
    return True


def _check_seed(seed):
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise TypeError(f"seed must be None or an int, got {seed!r}; pass e.g. seed=0")
    return None if seed is None else int(seed)


def run_mia_attacks(probs_train, probs_test, labels_train, labels_test,
                    attack_types: Sequence[str] = mia_attacks.ATTACK_TYPES, *, implementation: str = "auto",
                    seed=None) -> dict:
    """Threshold and trained membership-inference attacks on members' and non-members' outputs.

    Args:
        probs_train, probs_test: probability vectors on members and non-members.
        labels_train, labels_test: their true labels (integer or one-hot).
        attack_types: names of tensorflow-privacy ``AttackType`` members; the ``"tfdpmech"``
            implementation has ``THRESHOLD_ATTACK`` and ``LOGISTIC_REGRESSION``.
        implementation: ``"auto"`` (see :func:`mia_implementation`), ``"tensorflow_privacy"`` or
            ``"tfdpmech"``.
        seed: None or an int for the trained attack's subsample and shuffle. With an int both
            implementations draw the same split (tensorflow-privacy's draws come from numpy's global
            state, which is seeded for the call and restored after it); None leaves the draw to
            OS entropy (``"tfdpmech"``) or to the global numpy state (``"tensorflow_privacy"``).

    Returns:
        ``{attack_type: {"advantage": float, "auc": float, "implementation": str}}`` on the entire
        dataset; ``implementation`` is ``"tensorflow_privacy"`` or ``"tfdpmech"``, the code that ran.

    Raises:
        ImportError: ``implementation="tensorflow_privacy"`` and its ``privacy_tests`` module is
            missing (the message says how to install it).
        ValueError / TypeError: unknown attack names or implementation, a string instead of a
            sequence of names, or bad inputs (see :func:`tfdpmech.audit.mia_attacks.check_attack_inputs`).
    """
    impl = mia_implementation(implementation)
    seed = _check_seed(seed)
    if impl == "tfdpmech":
        res = mia_attacks.run_attacks(probs_train, probs_test, labels_train, labels_test, attack_types, seed=seed)
        return {name: {**r, "implementation": impl} for name, r in res.items()}
    mia, ds = _import_tf_privacy_mia()
    pin, pout, yin, yout = mia_attacks.check_attack_inputs(probs_train, probs_test, labels_train, labels_test)
    names = mia_attacks.check_attack_types(attack_types, tuple(ds.AttackType.__members__))
    attack_input = ds.AttackInputData(probs_train=pin, probs_test=pout, labels_train=yin, labels_test=yout)
    state = np.random.get_state()
    try:
        if seed is not None:
            np.random.seed(seed)
        with np.errstate(divide="ignore", invalid="ignore"):  # its ε lower-bound estimate divides by zero counts
            results = mia.run_attacks(attack_input, ds.SlicingSpec(entire_dataset=True),
                                      attack_types=[ds.AttackType[name] for name in names])
    finally:
        if seed is not None:
            np.random.set_state(state)
    out = {}
    for res in results.single_attack_results:
        out[res.attack_type.name] = {"advantage": float(res.get_attacker_advantage()), "auc": float(res.get_auc()),
                                     "implementation": impl}
    return out


def run_tf_privacy_attacks(probs_train, probs_test, labels_train, labels_test,
                           attack_types: Sequence[str] = ("THRESHOLD_ATTACK", "LOGISTIC_REGRESSION"),
                           *, seed=None) -> dict:
    """tensorflow-privacy's own attacks: :func:`run_mia_attacks` with ``implementation="tensorflow_privacy"``.

    Raises:
        ImportError: the ``privacy_tests`` module is missing (message says how to install it).
    """
    return run_mia_attacks(probs_train, probs_test, labels_train, labels_test, attack_types,
                           implementation="tensorflow_privacy", seed=seed)


def mia_attack_floor(n_members: int, n_non_members: int, num_classes: int, *, repeats: int = 5,
                     seed: int = 0, implementation: str = "auto") -> dict:
    """The advantage the attacks of :func:`run_mia_attacks` reach when there is no membership signal.

    Their advantage is the best TPR − FPR over all thresholds, which is positive even for outputs
    that carry no information; at a few hundred records that floor is ~0.1. This runs the same
    attacks on random probability vectors (Dirichlet(1)) and random labels of the given sizes.

    Returns:
        ``{"mean": float, "max": float, "repeats": int, "implementation": str}`` of the larger
        advantage of the attacks.
    """
    n_in = check_positive_int(n_members, "n_members")
    n_out = check_positive_int(n_non_members, "n_non_members")
    c = check_positive_int(num_classes, "num_classes", minimum=2)
    repeats = check_positive_int(repeats, "repeats")
    impl = mia_implementation(implementation)
    rng = make_rng(seed)
    # the trained attack's splits: fixed by an int seed, without drawing from the records' generator
    attack_seeds = ([int(s) for s in np.random.SeedSequence([int(seed), 1]).generate_state(repeats)]
                    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) else [None] * repeats)
    adv = []
    for attack_seed in attack_seeds:
        probs = rng.dirichlet(np.ones(c), size=n_in + n_out)
        labels = rng.integers(0, c, n_in + n_out)
        res = run_mia_attacks(probs[:n_in], probs[n_in:], labels[:n_in], labels[n_in:], implementation=impl,
                              seed=attack_seed)
        adv.append(max(r["advantage"] for r in res.values()))
    return {"mean": float(np.mean(adv)), "max": float(np.max(adv)), "repeats": len(adv), "implementation": impl}


def tf_privacy_attack_floor(n_members: int, n_non_members: int, num_classes: int, *, repeats: int = 5,
                            seed: int = 0) -> dict:
    """:func:`mia_attack_floor` with tensorflow-privacy's own attacks (ImportError where they are missing)."""
    return mia_attack_floor(n_members, n_non_members, num_classes, repeats=repeats, seed=seed,
                            implementation="tensorflow_privacy")
