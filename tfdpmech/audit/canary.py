"""One-run privacy audit: an ε lower bound from m canaries and a single training run.

Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023
(arXiv:2305.08846), Algorithm 1 (the auditor) and Theorem 3 (the main theorem):

1. m canaries, records disjoint from the private data, are each included in the training set
   independently with probability ½ (``S ∈ {−1, +1}^m`` uniform; ``S_i = +1``: canary i is in).
2. The method trains **once**, exactly as a user would, on the private set plus the included
   canaries.
3. Every canary gets a score (higher = "looks trained on"); the auditor guesses "in" (``T_i = +1``)
   for the ``k₊`` highest scores, "out" (``T_i = −1``) for the ``k₋`` lowest, and abstains
   (``T_i = 0``) on the rest, so ``r = k₊ + k₋`` guesses.
4. W = the number of correct guesses (``Σ_i max{0, T_i·S_i}``). Theorem 3: if the training
   algorithm is (ε, δ)-DP with respect to each canary, then for every v

       P[W ≥ v]  ≤  f(v) + 2·m·δ · max_{i ∈ {1..m}} (f(v − i) − f(v)) / i,
       f(v) := P[Binomial(r, e^ε / (e^ε + 1)) ≥ v].

   For δ = 0 the second term vanishes and W is stochastically dominated by
   Binomial(r, e^ε/(e^ε+1)): each guess is no better than ε-DP randomized response. The paper's
   Appendix D turns this into a p-value for the null hypothesis "(ε, δ)-DP"
   (:func:`p_value`) and reports the largest ε whose null is rejected at level β
   (:func:`epsilon_lower_bound`): with probability ≥ 1 − β over the canaries' coin flips and the
   training noise, the bound is ≤ the true ε of the implementation. The (f(v − i) − f(v)) / i
   terms vanish for i > v (f(v − i) = 1, the ratio only shrinks), so the maximum runs over
   i = 1..v.

Reading the result:

* lower bound > provable ε: the proof or the code is wrong (with probability ≤ β this happens by
  chance);
* lower bound > claimed ε only: the paper's claim is refuted by measurement;
* a small lower bound proves nothing: the audit is a lower bound, never a guarantee.

The guessing rule (k₊, k₋, the score) must be fixed before the canaries' membership is looked
at: choosing it per result, e.g. the best of many (k₊, k₋) pairs on the same run, breaks the
level β. :data:`DEFAULT_K` states the rule used by ``tfdpmech compare``.

Why not tensorflow-privacy's ``privacy_tests.epsilon_lower_bound``: its ``EpsilonLowerBound``
bounds log(TPR/FPR) with binomial confidence intervals (Clopper–Pearson, Katz-log, …) over
every threshold. Those intervals treat each member/non-member score as an independent trial of
its own training run (the many-runs audit of Jagielski et al. 2020), which a single run does not
give: all m scores come from one model, and Steinke et al.'s Theorem 3 is what makes one run
valid. It also has no δ term and returns the best of all thresholds without correcting for the
choice. So it does not apply to the one-run setting, and this module computes Theorem 3's tail
with ``scipy.stats.binom`` instead.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any, Callable

import numpy as np
from scipy import stats

from ..accounting.display import delta_text, epsilon_lower
from ..noise import make_rng
from ..validation import check_array

__all__ = [
    "CanaryAudit",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_K",
    "VERDICT_BUG",
    "VERDICT_REFUTED",
    "audit_scores",
    "audit_verdict",
    "ball_canaries",
    "canary_audit",
    "default_k",
    "digits_canaries",
    "draw_membership",
    "epsilon_lower_bound",
    "guess_membership",
    "loss_scores",
    "margin_scores",
    "mislabel",
    "noise_canaries",
    "p_value",
]

DEFAULT_CONFIDENCE = 0.95

# The default guessing rule, fixed in advance: k₊ = k₋ = this fraction of m. Chosen on a separate
# run (seed 100: non-private MLP on the MNIST sample, 1,000 noise canaries, k ∈ {25..500}) and on
# Laplace mechanisms, where m/4 had the most power at ε ≤ 2; docs/audit.md has the numbers.
DEFAULT_K = 0.25

_EPS_SEARCH_MAX = 30.0  # all r guesses correct at 95 % gives ε_lb ≈ ln(r / 3): below 30 for any r < 10^12
_EPS_GRID = 0.25  # scan step for the first crossing before bisection
_EPS_TOL = 1e-6


# --- the bound (Theorem 3 / Appendix D) ---------------------------------------------------------
def _check_int(value, name: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_counts(correct, guesses, m) -> tuple[int, int, int]:
    m = _check_int(m, "m", minimum=1)
    guesses = _check_int(guesses, "guesses")
    correct = _check_int(correct, "correct")
    if guesses > m:
        raise ValueError(f"guesses={guesses} exceeds the number of canaries m={m}; at most one guess per canary")
    if correct > guesses:
        raise ValueError(f"correct={correct} exceeds guesses={guesses}; count only correct guesses")
    return correct, guesses, m


def _check_confidence(confidence) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real):
        raise TypeError(f"confidence must be a real number in (0, 1), got {confidence!r}")
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}; e.g. 0.95 for 95 %")
    return confidence


def _check_audit_delta(delta) -> float:
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
        raise TypeError(f"delta must be a real number in [0, 1), got {delta!r}")
    delta = float(delta)
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must lie in [0, 1), got {delta}; 0 for pure ε-DP, else the method's δ")
    return delta


def _p_values(correct: int, guesses: int, m: int, epsilons: np.ndarray, delta: float) -> np.ndarray:
    """Theorem 3's tail bound for every ε in ``epsilons`` (vectorised over ε)."""
    q = 1.0 / (1.0 + np.exp(-epsilons))  # accuracy of ε-DP randomized response
    tail = stats.binom.sf(correct - 1, guesses, q)  # f(v) = P[Binomial(r, q) ≥ v]
    if delta == 0.0 or correct == 0:
        return np.minimum(tail, 1.0)
    # f(v − i) − f(v) = P[v − i ≤ Binomial(r, q) < v] for i = 1..v, one column per ε
    pmf = stats.binom.pmf(np.arange(correct - 1, -1, -1)[:, None], guesses, q[None, :])
    alpha = np.max(np.cumsum(pmf, axis=0) / np.arange(1, correct + 1)[:, None], axis=0)
    return np.minimum(tail + 2.0 * m * delta * alpha, 1.0)


def _p_value(correct: int, guesses: int, m: int, epsilon: float, delta: float) -> float:
    return float(_p_values(correct, guesses, m, np.array([epsilon]), delta)[0])


def p_value(correct: int, guesses: int, m: int, epsilon: float, delta: float = 0.0) -> float:
    """Theorem 3's bound on P[W ≥ correct] if the training is (ε, δ)-DP (Steinke et al., App. D).

    Args:
        correct: v, the number of correct guesses.
        guesses: r = k₊ + k₋, the number of guesses (abstentions excluded).
        m: the number of canaries, each included with probability ½.
        epsilon: ε ≥ 0 of the null hypothesis.
        delta: δ ∈ [0, 1) of the null hypothesis (0: pure ε-DP).

    Returns:
        f(v) + 2mδ·max_i (f(v−i) − f(v))/i, capped at 1.

    Raises:
        TypeError / ValueError: counts that are not integers with 0 ≤ correct ≤ guesses ≤ m,
            ε < 0 or not finite, δ outside [0, 1).
    """
    correct, guesses, m = _check_counts(correct, guesses, m)
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) or not math.isfinite(epsilon) \
            or epsilon < 0:
        raise ValueError(f"epsilon must be a finite real number >= 0, got {epsilon!r}")
    return _p_value(correct, guesses, m, float(epsilon), _check_audit_delta(delta))


def epsilon_lower_bound(correct: int, guesses: int, m: int, *, delta: float = 0.0,
                        confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The ε lower bound at ``confidence`` from ``correct`` of ``guesses`` guesses on m canaries.

    Steinke et al., Theorem 3 with the p-value of their Appendix D: the result is the first ε at
    which the p-value reaches β = 1 − confidence, found by a scan in steps of 0.25 followed by
    bisection to 1e-6. Every ε below it is rejected ("not (ε, δ)-DP") at level β. For δ = 0 the
    p-value is a binomial tail, increasing in ε, so this is the largest rejected ε; for δ > 0
    taking the first crossing keeps the bound conservative even where the δ term is not monotone.

    Args:
        correct: v, the number of correct guesses.
        guesses: r = k₊ + k₋.
        m: the number of canaries (each included with probability ½), which enters through 2mδ.
        delta: δ of the hypotheses tested (0 for pure ε-DP claims; the method's δ otherwise).
        confidence: 1 − β, e.g. 0.95.

    Returns:
        ε_lb ≥ 0 (0 when not even ε = 0 is rejected).

    Raises:
        TypeError / ValueError: bad counts, δ outside [0, 1), confidence outside (0, 1).
    """
    correct, guesses, m = _check_counts(correct, guesses, m)
    delta = _check_audit_delta(delta)
    beta = 1.0 - _check_confidence(confidence)

    if _p_value(correct, guesses, m, 0.0, delta) >= beta:
        return 0.0
    # first crossing on a grid of step 0.25, then bisection inside that step
    grid = np.arange(0.0, _EPS_SEARCH_MAX + _EPS_GRID, _EPS_GRID)
    # the δ term only adds, so the binomial tail alone (cheap) crosses no earlier than the full bound
    crossed = np.flatnonzero(_p_values(correct, guesses, m, grid, 0.0) >= beta)
    if crossed.size == 0:  # cannot happen for correct <= guesses (f(v) → 1 as ε → ∞)
        return float(grid[-1])
    if delta > 0.0:
        grid = grid[:crossed[0] + 1]
        crossed = np.flatnonzero(_p_values(correct, guesses, m, grid, delta) >= beta)
    lo, hi = float(grid[crossed[0] - 1]), float(grid[crossed[0]])
    while hi - lo > _EPS_TOL:
        mid = 0.5 * (lo + hi)
        if _p_value(correct, guesses, m, mid, delta) < beta:
            lo = mid
        else:
            hi = mid
    return lo


# --- guesses and scores ---------------------------------------------------------------------------
def guess_membership(scores, k_plus: int, k_minus: int) -> np.ndarray:
    """Algorithm 1's guesses: +1 for the k₊ highest scores, −1 for the k₋ lowest, 0 otherwise.

    Ties are broken by canary index (a stable sort), which is public and independent of the
    membership coin flips, so the guesses stay a function of the trained model alone.

    Args:
        scores: (m,) finite or ±inf scores, higher = more likely trained on.
        k_plus: k₊ ≥ 0.
        k_minus: k₋ ≥ 0, with k₊ + k₋ ≤ m.

    Returns:
        int8 array (m,) in {−1, 0, +1}.

    Raises:
        TypeError / ValueError: scores not 1-D numeric or holding NaN; k₊ + k₋ > m.
    """
    scores = _check_scores(scores)
    m = scores.size
    k_plus = _check_int(k_plus, "k_plus")
    k_minus = _check_int(k_minus, "k_minus")
    if k_plus + k_minus > m:
        raise ValueError(
            f"k_plus + k_minus = {k_plus} + {k_minus} = {k_plus + k_minus} exceeds the number of canaries m={m}; "
            "each canary gets at most one guess: lower k_plus or k_minus"
        )
    if k_plus + k_minus == 0:
        raise ValueError("k_plus = k_minus = 0 makes no guess; pass e.g. k_plus = k_minus = m // 4")
    order = np.argsort(-scores, kind="stable")  # highest first
    guesses = np.zeros(m, dtype=np.int8)
    guesses[order[:k_plus]] = 1
    if k_minus:
        guesses[order[m - k_minus:]] = -1
    return guesses


def _check_scores(scores) -> np.ndarray:
    if np.iscomplexobj(scores):
        raise TypeError("scores are complex; pass one real score per canary (the imaginary part would be dropped)")
    try:
        arr = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"scores must be a 1-D numeric array, got {type(scores).__name__}") from exc
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"scores must be a non-empty 1-D array (one score per canary), got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(
            f"scores hold {int(np.isnan(arr).sum())} NaN value(s) (a diverged model?); NaN cannot be ranked: "
            "audit a model whose outputs are finite"
        )
    return arr


def _check_membership(membership, m: int) -> np.ndarray:
    arr = np.asarray(membership)
    if arr.shape != (m,):
        raise ValueError(f"membership must have shape ({m},), one flag per canary, got {arr.shape}")
    if arr.dtype != bool:
        if not np.isin(arr, (0, 1)).all():
            raise ValueError("membership must hold booleans (True = canary was trained on), got other values")
        arr = arr.astype(bool)
    return arr


def _labels_to_int(labels, n: int, num_classes: int) -> np.ndarray:
    arr = np.asarray(labels)
    if arr.ndim == 2:
        if arr.shape != (n, num_classes):
            raise ValueError(f"one-hot labels must have shape ({n}, {num_classes}), got {arr.shape}")
        return np.argmax(arr, axis=1)
    if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"labels must be {n} integer class ids or a ({n}, {num_classes}) one-hot array, "
                         f"got shape {arr.shape} dtype {arr.dtype}")
    if arr.min() < 0 or arr.max() >= num_classes:
        raise ValueError(f"labels must lie in [0, {num_classes - 1}], got [{arr.min()}, {arr.max()}]")
    return arr


def _check_probabilities(probabilities) -> np.ndarray:
    p = np.asarray(probabilities, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(f"probabilities must have shape (m, num_classes >= 2), got {p.shape}")
    if not np.isfinite(p).all():
        raise ValueError("probabilities hold NaN or inf (a diverged model?); the audit needs finite outputs")
    if (p < 0).any() or (p > 1 + 1e-6).any():
        raise ValueError(
            f"probabilities must lie in [0, 1], got [{p.min():.3g}, {p.max():.3g}]; pass softmax outputs, not logits"
        )
    return p


def loss_scores(probabilities, labels) -> np.ndarray:
    """Score = log p(canary label) = −cross-entropy; trained-on canaries fit their label better.

    Args:
        probabilities: (m, M) class probabilities the method answers for the canaries.
        labels: (m,) class ids or (m, M) one-hot canary labels.

    Returns:
        (m,) float64 scores (−inf where p = 0: ranked lowest, never clipped).
    """
    p = _check_probabilities(probabilities)
    y = _labels_to_int(labels, p.shape[0], p.shape[1])
    with np.errstate(divide="ignore"):
        return np.log(p[np.arange(p.shape[0]), y])


def margin_scores(probabilities, labels) -> np.ndarray:
    """Score = log p(canary label) − log max_{j ≠ label} p(j), the logit margin of a softmax.

    Args / Returns: as :func:`loss_scores`. Infinite margins (a probability 0) are kept, never
    clipped.

    Raises:
        ValueError: a row whose label and every other class have probability 0 (no margin).
    """
    p = _check_probabilities(probabilities)
    n = p.shape[0]
    y = _labels_to_int(labels, n, p.shape[1])
    own = p[np.arange(n), y]
    others = p.copy()
    others[np.arange(n), y] = -np.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = np.log(own) - np.log(others.max(axis=1))
    if np.isnan(margin).any():
        raise ValueError("a canary has probability 0 for its label and for every other class; check the outputs")
    return margin


# --- the audit ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CanaryAudit:
    """The result of one audit.

    Attributes:
        epsilon_lower_bound: ε_lb at ``confidence`` (Theorem 3).
        m: number of canaries.
        k_plus, k_minus: guesses "in" / "out".
        correct: correct guesses (out of k₊ + k₋).
        confidence: 1 − β.
        delta: δ of the hypotheses tested (0 = pure ε-DP).
        membership: (m,) bool, which canaries were trained on.
        scores: (m,) the canaries' scores.
    """

    epsilon_lower_bound: float
    m: int
    k_plus: int
    k_minus: int
    correct: int
    confidence: float
    delta: float = 0.0
    membership: np.ndarray | None = dataclasses.field(default=None, repr=False, compare=False)
    scores: np.ndarray | None = dataclasses.field(default=None, repr=False, compare=False)

    def as_record(self) -> dict:
        """The ``canary`` field of a run result: ``{epsilon_lower_bound, m, k_plus, k_minus, correct, confidence}``."""
        return {"epsilon_lower_bound": float(self.epsilon_lower_bound), "m": int(self.m),
                "k_plus": int(self.k_plus), "k_minus": int(self.k_minus), "correct": int(self.correct),
                "confidence": float(self.confidence)}

    def __str__(self) -> str:
        r = self.k_plus + self.k_minus
        return (f"ε lower bound {epsilon_lower(self.epsilon_lower_bound)} at {self.confidence:.0%} confidence "
                f"(m={self.m}, k₊={self.k_plus}, k₋={self.k_minus}, {self.correct}/{r} correct, "
                f"δ={delta_text(self.delta)})")


def default_k(m: int) -> tuple[int, int]:
    """(k₊, k₋) of the stated rule :data:`DEFAULT_K`: both ⌈m/4⌉ (at least 1)."""
    k = max(1, int(math.ceil(DEFAULT_K * _check_int(m, "m", minimum=2))))
    return k, k


def _k_or_default(k_plus, k_minus, m: int):
    """The given k₊ / k₋, each one left as None replaced by :func:`default_k`'s."""
    if k_plus is not None and k_minus is not None:
        return k_plus, k_minus
    dk_plus, dk_minus = default_k(m)
    return (dk_plus if k_plus is None else k_plus), (dk_minus if k_minus is None else k_minus)


def audit_scores(scores, membership, *, k_plus: int | None = None, k_minus: int | None = None,
                 delta: float = 0.0, confidence: float = DEFAULT_CONFIDENCE) -> CanaryAudit:
    """Guess, count the correct guesses and bound ε (Algorithm 1 steps 3–4 and Theorem 3).

    Args:
        scores: (m,) one score per canary, higher = more likely trained on.
        membership: (m,) bool, True for the canaries that were trained on.
        k_plus, k_minus: numbers of "in" / "out" guesses, fixed before looking at the result
            (default: :func:`default_k`).
        delta: δ of the hypotheses tested.
        confidence: 1 − β.

    Raises:
        ValueError / TypeError: see :func:`guess_membership` and :func:`epsilon_lower_bound`.
    """
    scores = _check_scores(scores)
    m = scores.size
    membership = _check_membership(membership, m)
    delta = _check_audit_delta(delta)
    confidence = _check_confidence(confidence)
    k_plus, k_minus = _k_or_default(k_plus, k_minus, m)
    guesses = guess_membership(scores, k_plus, k_minus)
    correct = int(np.sum(guesses[membership] == 1) + np.sum(guesses[~membership] == -1))
    bound = epsilon_lower_bound(correct, int(k_plus) + int(k_minus), m, delta=delta, confidence=confidence)
    return CanaryAudit(bound, m, int(k_plus), int(k_minus), correct, confidence, delta, membership, scores)


def draw_membership(m: int, seed=None) -> np.ndarray:
    """Each of m canaries in with probability ½, independently (Algorithm 1: S uniform on {±1}^m).

    Args:
        m: number of canaries.
        seed: int, numpy Generator or None (OS entropy).
    """
    m = _check_int(m, "m", minimum=1)
    return make_rng(seed).random(m) < 0.5


def canary_audit(train_fn: Callable[[np.ndarray, np.ndarray], Any],
                 score_fn: Callable[[Any, np.ndarray, np.ndarray], Any],
                 canaries_x, canaries_y, *, k_plus: int | None = None, k_minus: int | None = None,
                 delta: float = 0.0, confidence: float = DEFAULT_CONFIDENCE, seed=None) -> CanaryAudit:
    """Audit any training method in one run (Steinke et al., Algorithm 1 and Theorem 3).

    Flips a fair coin per canary, calls ``train_fn`` once with the included canaries, scores all
    m canaries with ``score_fn`` and bounds ε from the correct guesses.

    Args:
        train_fn: ``train_fn(x_in, y_in) -> trained``: adds the included canaries to the private
            training set and trains the method exactly as a user would; returns whatever
            ``score_fn`` needs (a model, a predictor).
        score_fn: ``score_fn(trained, canaries_x, canaries_y) -> (m,) scores``, higher = more
            likely trained on, e.g. :func:`loss_scores` of the method's answers, or a white-box
            score where a method exposes one.
        canaries_x, canaries_y: the m canaries (records disjoint from the private data).
        k_plus, k_minus: the guessing rule, fixed in advance (default :func:`default_k`).
        delta: δ of the hypotheses tested (0 for a pure ε-DP claim).
        confidence: 1 − β.
        seed: membership coin flips (int, Generator or None).

    Returns:
        :class:`CanaryAudit`.

    Raises:
        ValueError / TypeError: mismatched canary arrays, k₊ + k₋ > m, confidence outside (0, 1),
            δ outside [0, 1) — all before training.
    """
    for name, fn in (("train_fn", train_fn), ("score_fn", score_fn)):
        if not callable(fn):
            raise TypeError(f"{name} must be a function, got {type(fn).__name__} {fn!r:.60}")
    canaries_x = check_array(canaries_x, "canaries_x")
    canaries_y = check_array(canaries_y, "canaries_y")
    m = len(canaries_x)
    if m < 2 or len(canaries_y) != m:
        raise ValueError(f"canaries_x and canaries_y must hold the same number m >= 2 of canaries, got "
                         f"{len(canaries_x)} and {len(canaries_y)}")
    delta = _check_audit_delta(delta)
    confidence = _check_confidence(confidence)
    k_plus, k_minus = _k_or_default(k_plus, k_minus, m)
    k_plus, k_minus = _check_int(k_plus, "k_plus"), _check_int(k_minus, "k_minus")
    if k_plus + k_minus > m or k_plus + k_minus == 0:
        raise ValueError(f"k_plus + k_minus = {k_plus + k_minus} must lie in [1, m={m}]; "
                         "lower k_plus or k_minus (each canary gets at most one guess)")
    membership = draw_membership(m, seed)
    trained = train_fn(canaries_x[membership], canaries_y[membership])
    scores = score_fn(trained, canaries_x, canaries_y)
    return audit_scores(scores, membership, k_plus=k_plus, k_minus=k_minus, delta=delta, confidence=confidence)


# --- what a lower bound says about a claim ----------------------------------------------------------
VERDICT_BUG = "audit lower bound above the provable ε: a bug in the proof or the code"
VERDICT_REFUTED = "claim refuted by audit"


def audit_verdict(lower_bound: float | None, *, claimed: float | None, provable: float | None,
                  per: str = "training", queries: int = 1) -> str | None:
    """Compare an audited lower bound with a run's claimed and provable ε.

    Args:
        lower_bound: the audit's ε lower bound (None: not audited).
        claimed, provable: the run's ε (None: no claim / none proven / no privacy).
        per: ``"training"`` (ε covers the whole run) or ``"query"`` (ε per answered query: the
            audit read ``queries`` answers, one per canary, so by composition the ε it can be
            compared with is ``queries × ε``).
        queries: answers the audit asked for (m) when ``per == "query"``.

    Returns:
        :data:`VERDICT_BUG` if the bound exceeds the provable ε, :data:`VERDICT_REFUTED` if it
        exceeds only the claimed ε, None otherwise.
    """
    if lower_bound is None:
        return None
    if per not in ("training", "query"):
        raise ValueError(f"per must be 'training' or 'query', got {per!r}")
    scale = _check_int(queries, "queries", minimum=1) if per == "query" else 1
    if provable is not None and lower_bound > scale * provable:
        return VERDICT_BUG
    if claimed is not None and lower_bound > scale * claimed:
        return VERDICT_REFUTED
    return None


# --- canaries -----------------------------------------------------------------------------------
def _one_hot(labels: np.ndarray, num_classes: int) -> np.ndarray:
    return np.eye(num_classes, dtype=np.float32)[labels]


def mislabel(x_pool, y_pool, m: int, *, num_classes: int, seed=None) -> tuple[np.ndarray, np.ndarray]:
    """m canaries from a pool of records disjoint from the private data, each given a wrong label.

    A wrong label makes a canary hard to fit unless it is trained on, so its loss separates
    members from non-members.

    Args:
        x_pool: (n, ...) records that are not in the private set.
        y_pool: (n,) class ids or (n, M) one-hot true labels.
        m: number of canaries, ≤ n (drawn without replacement).
        num_classes: M.
        seed: int, Generator or None.

    Returns:
        ``(x, y)``: (m, ...) float32 records, (m, M) one-hot float32 wrong labels.

    Raises:
        ValueError: m > n, or labels out of range.
    """
    x_pool = np.asarray(x_pool)
    m = _check_int(m, "m", minimum=2)
    num_classes = _check_int(num_classes, "num_classes", minimum=2)
    if m > len(x_pool):
        raise ValueError(f"m={m} canaries requested from a pool of {len(x_pool)} records; pass a larger pool, "
                         "fewer canaries, or noise_canaries(...)")
    y_true = _labels_to_int(y_pool, len(x_pool), num_classes)
    rng = make_rng(seed)
    pick = rng.choice(len(x_pool), size=m, replace=False)
    wrong = (y_true[pick] + rng.integers(1, num_classes, size=m)) % num_classes
    return x_pool[pick].astype(np.float32), _one_hot(wrong, num_classes)


def digits_canaries(m: int, *, num_classes: int = 10, seed=None) -> tuple[np.ndarray, np.ndarray]:
    """m mislabeled 28×28 canaries from scikit-learn's 8×8 digits (1,797 images, not MNIST).

    Each 8×8 image (values 0..16) is divided by its public bound 16, enlarged to 20×20 by
    linear interpolation and centred in a 28×28 frame with a 4-pixel border, as MNIST digits are;
    values stay in [0, 1]. Labels are wrong on purpose (:func:`mislabel`).

    Raises:
        ValueError: m > 1,797.
    """
    from scipy import ndimage
    from sklearn.datasets import load_digits

    digits = load_digits()
    small = digits.images.astype(np.float64) / 16.0
    big = np.stack([ndimage.zoom(img, 2.5, order=1) for img in small])
    frame = np.zeros((len(big), 28, 28, 1), dtype=np.float32)
    if big.min() < 0.0 or big.max() > 1.0:  # linear interpolation of [0, 1] values stays in [0, 1]
        raise RuntimeError(f"resized digits left [0, 1]: [{big.min()}, {big.max()}]")
    frame[:, 4:24, 4:24, 0] = big
    return mislabel(frame, digits.target % num_classes, m, num_classes=num_classes, seed=seed)


def noise_canaries(m: int, shape=(28, 28, 1), *, num_classes: int = 10, seed=None) -> tuple[np.ndarray, np.ndarray]:
    """m uniform-noise records in [0, 1]^shape, each with a random label.

    Raises:
        ValueError: m < 2 or a non-positive shape.
    """
    m = _check_int(m, "m", minimum=2)
    num_classes = _check_int(num_classes, "num_classes", minimum=2)
    shape = tuple(_check_int(s, "shape", minimum=1) for s in shape)
    rng = make_rng(seed)
    x = rng.random((m, *shape)).astype(np.float32)
    return x, _one_hot(rng.integers(0, num_classes, size=m), num_classes)


def ball_canaries(m: int, dim: int, *, radius: float = 1.0, num_classes: int = 2,
                  seed=None) -> tuple[np.ndarray, np.ndarray]:
    """m tabular canaries: uniform random rows of the ball ‖x‖ ≤ radius, each with a random label.

    For data whose public domain is a norm ball (the DP-ERM datasets: ‖x‖ ≤ R), so the canaries
    pass the same input checks as private records.

    Raises:
        ValueError: m < 2, dim < 1, radius <= 0.
    """
    m = _check_int(m, "m", minimum=2)
    dim = _check_int(dim, "dim", minimum=1)
    num_classes = _check_int(num_classes, "num_classes", minimum=2)
    if isinstance(radius, bool) or not isinstance(radius, numbers.Real) or not radius > 0:
        raise ValueError(f"radius must be a real number > 0, got {radius!r}")
    rng = make_rng(seed)
    direction = rng.normal(size=(m, dim))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    # radius·U^(1/d) is the radial law of the uniform distribution on the ball; 0.999 keeps ‖x‖ < R after rounding
    x = direction * (0.999 * float(radius) * rng.random((m, 1)) ** (1.0 / dim))
    return x.astype(np.float32), _one_hot(rng.integers(0, num_classes, size=m), num_classes)
