"""People in a comparison: the private records assigned to users, and what each row's ε says about one user.

Image benchmarks have no owners, so ``options["users"]`` = U assigns the private records to U users whose
record counts follow Zipf's law (``options["user_zipf"]`` = s, default 1: user j holds a share ∝ 1/j^s, every
user at least one record; a heavy tail, as messages or visits per person have), drawn once from a fixed seed of
its own, apart from the runs' seeds (:data:`USER_SEED`, :func:`zipf_user_ids`). Then

* ``dpsgd_user`` (:mod:`.methods.user_level`) trains user-level DP-SGD on them: its ε protects a user, all of
  their records;
* every record-level row gets, in its notes, the group-privacy guarantee its ε implies for the largest user
  (:func:`tfdpmech.accounting.group_privacy.group_epsilon_delta`), so that the two are compared for the same
  person (:func:`largest_user_note`), and the report prints both (:func:`tfdpmech.report.users.users_markdown`).
"""

from __future__ import annotations

import numpy as np

from ..accounting.group_privacy import group_epsilon_delta
from ..validation import check_positive_int, check_positive_real

__all__ = ["zipf_user_ids", "user_ids_for", "largest_user_note", "user_level_options"]

USER_SEED = 7_919  # the assignment's own stream, apart from the runs' seeds


def zipf_user_ids(n: int, users: int, exponent: float = 1.0, seed: int = USER_SEED) -> np.ndarray:
    """One user id (0 … users−1) per record: user j holds ``n · w_j / Σw`` records (largest remainders),
    ``w_j = (j+1)^−exponent``, at least one each; which records a user holds is a seeded permutation.

    Raises:
        ValueError: ``users`` not in 1 … n, or ``exponent`` not a real number > 0.
    """
    n, users = check_positive_int(n, "n"), check_positive_int(users, "options['users']")
    exponent = check_positive_real(exponent, "options['user_zipf']")
    if users > n:
        raise ValueError(f"options['users']={users} is more than the {n} private records: every user holds at "
                         "least one record; pass at most n users")
    weights = np.arange(1, users + 1, dtype=np.float64) ** -exponent
    share = (n - users) * weights / weights.sum()  # every user's one record first, the rest by share
    counts = 1 + np.floor(share).astype(np.int64)
    remainder = n - int(counts.sum())
    counts[np.argsort(-(share - np.floor(share)), kind="stable")[:remainder]] += 1
    ids = np.repeat(np.arange(users, dtype=np.int64), counts)
    return ids[np.random.default_rng(seed).permutation(n)]


def user_level_options(users: int, records_per_user: int, point: dict) -> dict:
    """The comparison options of a user-level recipe ``point`` (``expected_users`` a step, ``epochs`` over the
    users, SGD ``learning_rate``; the rest the record-level tanh CNN's): what ``tools/users_tuning.py`` sweeps and
    the ``users`` preset runs.

    Raises:
        ValueError / TypeError: a count not an int >= 1, a step not a real > 0, or a point missing a field.
    """
    missing = sorted({"expected_users", "epochs", "learning_rate"} - set(point))
    if missing:
        raise ValueError(f"a user-level recipe point needs expected_users, epochs and learning_rate; {missing} "
                         f"missing from {point!r}")
    users = check_positive_int(users, "users")
    records_per_user = check_positive_int(records_per_user, "records_per_user")
    check_positive_int(point["expected_users"], "expected_users")
    check_positive_int(point["epochs"], "epochs")
    check_positive_real(point["learning_rate"], "learning_rate")
    recipe = {"expected_batch_size": point["expected_users"], "reference_n": users}
    if point["learning_rate"] != 0.5:  # the record-level recipe's step otherwise
        recipe["learning_rate"] = point["learning_rate"]
    return {"users": users, "records_per_user": records_per_user, "user_epochs": point["epochs"],
            "user_recipe": recipe}


def user_ids_for(options: dict, n: int) -> np.ndarray | None:
    """The comparison's user of each private record, or None without ``options["users"]``."""
    users = (options or {}).get("users")
    if users is None:
        return None
    return zipf_user_ids(n, users, (options or {}).get("user_zipf", 1.0))


def largest_user_note(user_ids, neighbours: str, protects: str, epsilon, delta) -> dict:
    """``{"largest_user": {...}}`` for a record-level run's notes (add or remove one record): the records the
    largest user holds and the (ε, δ) group privacy gives for adding or removing them all; empty for any other
    neighbour relation (a user-level run's own ε is per user), a run without a proven ε, or no users."""
    if user_ids is None or epsilon is None or protects != "record" or neighbours != "add_remove":
        return {}
    m = int(np.max(np.unique(user_ids, return_counts=True)[1]))
    group_eps, group_delta = group_epsilon_delta(float(epsilon), float(delta), m)
    return {"largest_user": {"records": m, "epsilon": group_eps, "delta": group_delta}}
