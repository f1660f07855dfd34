"""AdLM's private relevance: LRP averaged over the private data, plus Laplace noise, released once.

AdLM (Phan et al., ICDM'17, §III-A, Algorithm 1 lines 1–7) spends ε1 on a noisy,
dataset-averaged relevance of every input feature:

1. LRP with the ε-stabilised rule (Eqs. 4–8) for each example, seeded at the output
   (:func:`tfdpmech.mechanisms.adlm.lrp.lrp_relevance`),
2. per-example min-max normalisation into [0, 1] (after Eq. 9),
3. the mean over the n records (Eq. 10),
4. Laplace noise with scale Δ_R/ε1, Δ_R = 2d/n (Lemma 1, Eqs. 12–13).
"""

from __future__ import annotations

import numpy as np

from ...accounting.ledger import Release, ledger_or_new
from ...contract import release as record_release
from ...noise import make_rng
from ...released_data import array_fingerprint
from ...validation import check_array, check_epsilon, check_positive_int
from .lrp import lrp_batches, prepare_lrp

__all__ = ["normalize_per_example", "relevance_sensitivity", "private_relevance"]

_BASIS_PUBLIC = "Laplace mechanism, Lemma 1, relevance model independent of the private data"
_BASIS_PRIVATE = (
    "none proven: the relevance model was trained on the private data, so its weights depend on every "
    "record and replacing one record can change every other record's relevance; Δ_R = 2d/n bounds only "
    "the record's own term (Lemma 1, App. A; docs/mechanisms/adlm.md). Train the relevance model on public or "
    "disjoint data for a proven ε"
)


def normalize_per_example(r) -> np.ndarray:
    """Min-max scale each example's relevance over its own d features into [0, 1].

    ``(R − χ_i) / (φ_i − χ_i)`` with ``φ_i, χ_i`` the example's max and min (§II-C, after Eq. 9).
    The paper says this gives [−1, 1]; it gives [0, 1], inside the bound Lemma 1 needs. A constant row,
    where φ_i = χ_i, becomes all zeros.

    Args:
        r: array of shape ``(n, ...)``.

    Returns:
        float64 array of the same shape with every value in [0, 1].

    Raises:
        ValueError / TypeError: empty, non-numeric, NaN/inf or fewer than 2 dimensions.
    """
    r = check_array(r, "r", ndim_min=2).astype(np.float64)
    flat = r.reshape(len(r), -1)
    lo = flat.min(axis=1, keepdims=True)
    span = flat.max(axis=1, keepdims=True) - lo
    safe = np.where(span > 0, span, 1.0)
    out = np.where(span > 0, (flat - lo) / safe, 0.0)
    # Rounding can leave 1 + ulp; the sensitivity argument needs the bound exactly.
    return np.clip(out, 0.0, 1.0).reshape(r.shape)


def relevance_sensitivity(d, n) -> float:
    """Δ_R = 2d/n (Lemma 1, Eq. 13): global sensitivity of the d mean relevances.

    Replacing one of n records changes each mean of values in [−1, 1] by at most 2/n.
    (With the [0, 1] normalisation d/n would suffice; the paper's bound is kept.)

    Raises:
        TypeError / ValueError: d or n not a positive integer.
    """
    d = check_positive_int(d, "d")
    n = check_positive_int(n, "n")
    return 2.0 * d / n


def private_relevance(
    model,
    x,
    y,
    epsilon,
    *,
    rng_or_seed=None,
    mu=1.0,
    start="true_class_logit",
    model_trained_on_private_data=False,
    ledger=None,
    batch_size=256,
):
    """ε-DP mean relevance of every input feature (AdLM Algorithm 1, lines 1–7).

    Per example: LRP (:func:`lrp_relevance`), then :func:`normalize_per_example`; the
    mean over the n records (Eq. 10) plus independent Laplace noise of scale Δ_R/ε per
    feature, Δ_R = 2d/n (Eqs. 12–13), drawn once from a numpy Generator.

    The guarantee is proven (Lemma 2, for replace-one neighbours with n public) only when
    the relevance model does not depend on the private data: a model trained on x leaks
    every record through its weights (Lemma 1's Δ_R covers only the record's own term), so the
    release is then only claimed.

    Args:
        model: the relevance model (see :func:`lrp_relevance`).
        x: the n private records, shape ``(n, *input_shape)``. Not kept after the call.
        y: their labels, required for ``start="true_class_logit"``.
        epsilon: ε1 > 0 spent on this release.
        rng_or_seed: None (OS entropy), an int seed or a numpy Generator.
        mu, start, batch_size: as for :func:`lrp_relevance`.
        model_trained_on_private_data: True when the model was trained on (part of) x.
        ledger: a :class:`~tfdpmech.accounting.ledger.PrivacyLedger` to record the release in (a new one
            if None: the release is recorded there).

    Returns:
        ``(r_bar, release)``: float64 array of shape ``input_shape`` and the recorded Release.

    Raises:
        TypeError / ValueError: as for :func:`lrp_relevance`, bad ε, ledger or flag.

    Reference: Phan et al., ICDM'17, §III-A, Algorithm 1 lines 1–7, Eqs. 10–13, Lemmas 1–2 (App. A–B).
    """
    epsilon = check_epsilon(epsilon)
    if not isinstance(model_trained_on_private_data, bool):
        raise TypeError(f"model_trained_on_private_data must be True or False, got {model_trained_on_private_data!r}")
    ledger = ledger_or_new(ledger)  # type check before any budget is spent
    rng = make_rng(rng_or_seed)
    plan, x, y1h, mu, start, batch_size = prepare_lrp(model, x, y, mu, start, batch_size)
    n, d = len(x), int(np.prod(x.shape[1:]))
    total = np.zeros(d, np.float64)
    for _, _, r in lrp_batches(model, plan, x, y1h, mu, start, batch_size):
        total += normalize_per_example(r).reshape(len(r), d).sum(axis=0)
    input_shape = x.shape[1:]
    del x, y1h  # nothing below needs the private records
    sensitivity = relevance_sensitivity(d, n)  # Lemma 1, Eq. 13
    scale = sensitivity / epsilon
    # Eqs. 10–12: the mean plus Laplace noise, independent per feature, drawn once by the release that records it
    released = record_release(ledger, _relevance_release(epsilon, sensitivity, scale, model_trained_on_private_data,
                                                         n, d, mu, start),
                              value=total / n, rng=rng,
                              details_of=lambda noisy, noise: {"noise_fingerprint": array_fingerprint(noise)})
    return released.value.reshape(input_shape), released.record


def _relevance_release(epsilon, sensitivity, scale, trained_on_private, n, d, mu, start) -> Release:
    return Release(
        component="relevance",
        neighbours="replace_one",
        protects="record",
        mechanism="laplace",
        epsilon_claimed=epsilon,
        epsilon_provable=None if trained_on_private else epsilon,
        basis=_BASIS_PRIVATE if trained_on_private else _BASIS_PUBLIC,
        sensitivity=sensitivity,
        noise_scale=scale,
        details={
            "n": n,
            "d": d,
            "mu": mu,
            "start": start,
            "relevance_model_public": not trained_on_private,
            "noise_fingerprint": None,  # set by the release that draws it
        },
    )
