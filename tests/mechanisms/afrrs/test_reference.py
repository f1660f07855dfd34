"""AFRRS reference mode: AdLM's code path with AFRRS's region budgets; claimed, none proven."""

import numpy as np
import pytest

from tfdpmech import AFRRS
from tfdpmech.mechanisms.afrrs import AFRRSReference
from tfdpmech.models.authors import lenet5_relevance_model


# --- the reference mode
def small_data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 28, 28, 1)).astype(np.float32) * 0.3
    x[:, 8:20, 8:20] += 0.6  # centre-high images
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, n)]
    return np.clip(x, 0, 1), y


def test_reference_mode_uses_regions_and_claims_only():
    
    x, y = small_data(32)
    ref = AFRRSReference.from_total(0.6, 16, gamma=0.1, seed=0)
    beta = ref.fit_relevance(lenet5_relevance_model(seed=0), x)
    assert beta.shape == (28, 28) and beta.sum() == pytest.approx(784)
    assert len(np.unique(np.round(beta, 12))) == ref.region_allocation.n_regions_
    ref.fit(x, y, steps=2)
    assert ref.ledger.epsilon_claimed() == pytest.approx(0.6)
    assert ref.ledger.epsilon_provable() is None
    assert "AFRRS has no public code" in ref.ledger.releases[0].basis
    assert ref.ledger.releases[1].details["allocation"] == "regions"




def test_mode_word_returns_the_reference():
    assert isinstance(AFRRS.from_total(0.6, 16, gamma=0.1, mode="reference"), AFRRSReference)
