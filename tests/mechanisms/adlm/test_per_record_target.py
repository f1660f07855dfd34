"""The per-record private mode of AdLM, ILM and AFRRS meets the ε it is asked for, or refuses before any release.

Algorithm 1's noise scales divide by the batch size |L|, so the per-record ε it proves,
``ε1 + |L|·d·ε2/Δ_h0 + 2|L|·ε3/Δ_F``, grows with |L| and does not depend on the number of records,
steps or epochs. On the AdLM MNIST CNN (d = 784, Δ_h0 = 39,200, Δ_F = 1,812.5) at ε = 0.6 split
1:1:2 and batch 1,000 (the ``reproduce-afrrs`` preset, 59 steps per epoch on the whole MNIST) it is
0.15 + 3.0 + 0.331 = 3.481: a small synthetic set with the same batch size gives the same number.
"""

import keras
import numpy as np
import pytest

from tfdpmech import AdLM, ILM, models
from tfdpmech.accounting.sigma_search import NotCertifiableError
from tfdpmech.mechanisms.adlm import provable_epsilon_per_record
from tfdpmech.mechanisms.adlm.per_record_budget import largest_certified_batch
from tfdpmech.mechanisms.afrrs import AFRRS

TARGET = 0.6
CNN = {"d": 784, "delta_h0": 39_200.0, "delta_F": 1_812.5}  # models.mnist_cnn(), delta_h0_policy="reference_code"
LARGEST = 135  # ε1 + 135·(784·0.15/39200 + 2·0.3/1812.5) = 0.5997 <= 0.6 < 0.6030 at 136


def _mechanism(kind, batch_size, **kwargs):
    if kind == "afrrs":
        return AFRRS.from_total(TARGET, batch_size, gamma=0.1, seed=0, **kwargs)
    return {"adlm": AdLM, "ilm": ILM}[kind].from_total(TARGET, batch_size, seed=0, **kwargs)


def _asked(mech):
    return (mech.eps1 or 0.0) + mech.eps2 + mech.eps3  # ILM leaves the ε1 share unspent


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.random((n, 28, 28, 1)) * 0.3).astype(np.float32)
    x[:, 8:20, 8:20] += 0.6
    return x, np.eye(10, dtype=np.float32)[rng.integers(0, 10, n)]


@pytest.fixture(scope="module")
def relevance_model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(), keras.layers.Dense(10)])


def test_the_reported_number_is_the_bound_at_batch_1000():
    provable = provable_epsilon_per_record(eps1=0.15, eps2=0.15, eps3=0.3, batch_size=1000, d=784,
                                           delta_h0=CNN["delta_h0"], delta_f=CNN["delta_F"])
    assert provable == pytest.approx(0.15 + 3.0 + 600 / 1812.5, rel=1e-12) and round(provable, 2) == 3.48
    with pytest.raises(NotCertifiableError, match=r"ε = 3\.49 per record"):  # 3.481 rounded up
        AFRRS.from_total(TARGET, 1000).certify(models.mnist_cnn())  # the model and |L| decide; no n, no steps
    assert largest_certified_batch(eps2=0.15, eps3=0.3, sensitivities=CNN) == LARGEST


@pytest.mark.parametrize("kind", ["afrrs", "adlm", "ilm"])
def test_batch_1000_is_refused_before_any_release(kind, relevance_model):
    x, y = _data(2000)  # 2 steps per epoch; the bound is the same at 59,000 records and 59 steps
    mech = _mechanism(kind, 1000)
    model = models.mnist_cnn()
    with pytest.raises(NotCertifiableError, match=rf"batch_size=1000: .* batch_size <= {LARGEST}") as err:
        mech.prepare(model, x, y, relevance_model=relevance_model)
    assert isinstance(err.value, ValueError)
    assert len(mech.ledger) == 0 and mech.relevance is None and mech.released is None


@pytest.mark.parametrize("kind", ["afrrs", "adlm", "ilm"])
def test_the_largest_certified_batch_meets_the_target_and_one_more_is_refused(kind):
    model = models.mnist_cnn()
    assert _mechanism(kind, LARGEST).certify(model) <= _asked(_mechanism(kind, LARGEST))
    with pytest.raises(NotCertifiableError, match=f"batch_size <= {LARGEST}"):
        _mechanism(kind, LARGEST + 1).certify(model)


@pytest.mark.parametrize("kind", ["afrrs", "adlm", "ilm"])
def test_a_certified_batch_trains_and_the_ledger_proves_at_most_the_target(kind, relevance_model):
    x, y = _data(500)
    mech = _mechanism(kind, 125)
    certified = mech.certify(models.mnist_cnn())
    run = mech.prepare(models.mnist_cnn(), x, y, relevance_model=relevance_model, verbose=0)
    provable = mech.ledger.epsilon_provable()
    assert provable == pytest.approx(certified, rel=1e-9) and provable <= _asked(mech) <= TARGET
    assert mech.ledger.epsilon_claimed() == pytest.approx(_asked(mech))
    run.fit(epochs=1, verbose=0)
    half = _mechanism(kind, 125)  # half the records, half the steps per epoch: the same per-record ε
    half.prepare(models.mnist_cnn(), x[:250], y[:250], relevance_model=relevance_model, verbose=0)
    assert half.ledger.epsilon_provable() == pytest.approx(provable, rel=1e-6)


def test_perturb_after_the_relevance_step_refuses_before_its_own_releases(relevance_model):
    x, y = _data(2000)
    afrrs = _mechanism("afrrs", 1000)
    afrrs.fit_relevance(relevance_model, x, y)  # the steps run by hand: certify() first avoids spending ε1
    with pytest.raises(NotCertifiableError, match="batch_size=1000"):
        afrrs.perturb(x, y, models.mnist_cnn())
    assert [r.component for r in afrrs.ledger.releases] == ["relevance"] and afrrs.released is None


def test_the_shared_ablations_prove_nothing_and_are_not_refused():
    model = models.mnist_cnn()
    assert _mechanism("adlm", 1000, noise_mode="shared_frozen").certify(model) is None
