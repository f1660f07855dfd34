"""AFRRS reference mode: AdLM's code path with AFRRS's region budgets; claimed, none proven."""

import numpy as np
import pytest

from tfdpmech import AFRRS
from tfdpmech.mechanisms.afrrs import AFRRSReference
from tfdpmech.mechanisms.adlm.networks import lenet5_relevance_model

from .helpers import small_data


# --- the reference mode
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




def test_the_reference_mode_is_its_own_class():
    assert isinstance(AFRRSReference.from_total(0.6, 16, gamma=0.1), AFRRSReference)
    with pytest.raises(ValueError, match=r"mode='reference'.*AFRRSReference"):
        AFRRS.from_total(0.6, 16, gamma=0.1, mode="reference")
