"""The threshold and logistic-regression membership-inference attacks, with the implementation this install has.

tensorflow-privacy's own ``privacy_tests`` attacks where they import (the TensorFlow 2.15 stack),
tfdpmech's scikit-learn version of the same attacks (:mod:`tfdpmech.audit.mia_attacks`) elsewhere;
every result names the implementation that ran, and :func:`mia_attack_floor` measures what they read
on outputs that carry no membership signal.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..noise import make_rng
from ..validation import check_choice, check_positive_int
from . import mia_attacks

__all__ = [
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
