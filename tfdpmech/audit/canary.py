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

Where the parts live: the bound in :mod:`~tfdpmech.audit.canary_bound`, the guesses and scores in
:mod:`~tfdpmech.audit.canary_scores`, the canaries in :mod:`~tfdpmech.audit.canaries` (all
importable from here), the audit of a comparison run in :mod:`~tfdpmech.audit.canary_run`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np

from ..accounting.display import delta_text, epsilon_lower
from ..noise import make_rng
from ..validation import check_array
from .canaries import ball_canaries, digits_canaries, mislabel, noise_canaries
from .canary_bound import DEFAULT_CONFIDENCE, _check_audit_delta, _check_confidence, _check_int, epsilon_lower_bound
from .canary_bound import p_value
from .canary_scores import _check_membership, _check_scores, guess_membership, loss_scores, margin_scores

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

# The default guessing rule, fixed in advance: k₊ = k₋ = this fraction of m. Chosen on a separate
# run (seed 100: non-private MLP on the MNIST sample, 1,000 noise canaries, k ∈ {25..500}) and on
# Laplace mechanisms, where m/4 had the most power at ε ≤ 2; docs/audit.md has the numbers.
DEFAULT_K = 0.25


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
