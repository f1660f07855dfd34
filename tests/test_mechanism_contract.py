"""The mechanism contract: every paper's mechanism is prepared and fitted the same way.

``mech.prepare(model, x, y)`` → :class:`PreparedFit` → ``.fit()``; the ledger holds what was
released; the default mode is the proven one; an authors' code path that is an algorithm of its own is a
class of its own (``AdLMReference``, ``PCDBNReference``), which the proven class names.
"""

from __future__ import annotations

import inspect
import warnings

import keras
import numpy as np
import pytest

import tfdpmech
from tfdpmech import AdLM, FunctionalHead, ILM, InputPerturbation, PrivateCDBN, cdbn_network, models
from tfdpmech.accounting.ledger import PrivacyLedger, Release
from tfdpmech.accounting.query_budget import QueryBudgetAccountant
from tfdpmech.mechanisms.dpsgd import ShuffledDPSGD, DPSGD
from tfdpmech.mechanisms.output_perturbation import OutputPerturbationHead
from tfdpmech.layers import ConvRBM
from tfdpmech.contract import KINDS, MECHANISM_MODES, Mechanism, PreparedFit, release
from tfdpmech.mechanisms.adlm.mechanism import AdLMBudget
from tfdpmech.mechanisms.adlm.reference import AdLMReference
from tfdpmech.mechanisms.output_perturbation import DPPredictor, compute_bounds
from tfdpmech.mechanisms.pcdbn import PCDBNReference
from tfdpmech.models import convexified_mlp


def all_mechanism_classes():
    out, todo = [], list(Mechanism.__subclasses__())
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted({c for c in out if c.__module__ != "tfdpmech.contract"}, key=lambda c: c.__name__)


def test_every_paper_answers_the_contract():
    names = {c.__name__ for c in all_mechanism_classes()}
    assert {"AdLM", "ILM", "AFRRS", "AdLMReference", "ILMReference", "AFRRSReference", "ShuffledDPSGD", "DPSGD",
            "InputPerturbation", "DPPredictor", "PrivateCDBN", "PCDBNReference", "FunctionalHead",
            "OutputPerturbationHead"} <= names
    for cls in all_mechanism_classes():
        assert cls.paper, f"{cls.__name__} names no paper"
        assert cls.kind in KINDS
        assert set(cls.modes) <= set(MECHANISM_MODES) | {"noiseless", "exact"}, cls
        mode = inspect.signature(cls.__init__).parameters.get("mode")
        if mode is not None:  # a default is always the proven mode
            assert mode.default == "private", f"{cls.__name__} defaults to mode={mode.default!r}"


# -- the release primitive -----------------------------------------------------------------------
def _laplace_release(eps=1.0):
    return Release("stat", "laplace", eps, eps, "Laplace mechanism, sensitivity 1", sensitivity=1.0,
                   noise_scale=1.0 / eps)


def test_release_draws_the_noise_its_record_states_and_records_it_in_one_call():
    ledger = PrivacyLedger()
    noisy, noise, rec = release(ledger, _laplace_release(0.5), value=[1.0, 2.0], rng=np.random.default_rng(3),
                                details_of=lambda noisy, noise: {"sum": float(noisy.sum())})
    expected = np.random.default_rng(3).laplace(0.0, 1.0, 2) * 2.0  # Lap(b) with b = the record's noise_scale
    np.testing.assert_array_equal(noise, expected)
    np.testing.assert_array_equal(noisy, np.array([1.0, 2.0]) + expected)
    assert ledger.releases == (rec,) and rec.details["sum"] == float(noisy.sum())
    gauss = Release("stats", "gaussian", 1.0, 1.0, "Gaussian mechanism", delta=1e-5, sensitivity=1.0, noise_scale=4.0)
    noisy, noise, _ = release(ledger, gauss, value={"a": np.zeros(2), "b": np.ones(3)}, rng=np.random.default_rng(5))
    drawn = np.random.default_rng(5).normal(0.0, 1.0, 5) * 4.0  # one draw per number, in the dict's order
    np.testing.assert_array_equal(np.concatenate([noise["a"], noise["b"]]), drawn)
    np.testing.assert_array_equal(noisy["b"], 1.0 + drawn[2:])
    noisy, noise, _ = release(ledger, _laplace_release(1.0), value=np.ones((4, 3)), rng=np.random.default_rng(7),
                              shape=(3,))  # one draw shared by the rows
    np.testing.assert_array_equal(noise, np.random.default_rng(7).laplace(0.0, 1.0, 3))
    np.testing.assert_array_equal(noisy, np.ones((4, 3)) + noise)
    noisy, noise, _ = release(ledger, _laplace_release(0.25))  # noise drawn elsewhere (a layer, a train step)
    assert noisy is None and noise is None and len(ledger) == 4 and ledger.epsilon_claimed() == pytest.approx(2.75)


def test_release_refuses_a_draw_it_cannot_make_before_recording():
    ledger = PrivacyLedger()
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="value: release draws"):
        release(ledger, Release("w", "gamma", 1.0, 1.0, "sphere", sensitivity=1.0, noise_scale=1.0), value=[0.0],
                rng=rng)
    with pytest.raises(ValueError, match="rng=None"):
        release(ledger, _laplace_release(), value=np.zeros(3))
    with pytest.raises(ValueError, match=r"shape=\(4,\): the noise must broadcast"):
        release(ledger, _laplace_release(), value=np.zeros((2, 3)), rng=rng, shape=(4,))
    with pytest.raises(ValueError, match="pass the exact statistic as value="):
        release(ledger, _laplace_release(), rng=rng)
    assert len(ledger) == 0


# -- training mechanisms -------------------------------------------------------------------------
N, L = 240, 40


@pytest.fixture(scope="module")
def images(mnist_sample):
    ds = mnist_sample
    return ds.x_train[:N], ds.y_train[:N], ds.x_train[N:N + 200], ds.y_train[N:N + 200]


@pytest.fixture(scope="module")
def public_model(images):
    _, _, x_pub, y_pub = images
    keras.utils.set_random_seed(1)
    model = models.mlp(first_units=16, hidden_units=8)
    model.compile("adam", loss=tfdpmech.TaylorCrossEntropy())
    model.fit(x_pub, y_pub, epochs=1, batch_size=50, verbose=0)
    return model


@pytest.mark.parametrize("cls", [AdLM, ILM])
def test_adlm_family_prepare_then_fit(images, public_model, cls):
    x, y, _, _ = images
    keras.utils.set_random_seed(0)
    mech = cls.from_total(1.0, L, seed=0)
    run = mech.prepare(models.mlp(first_units=16, hidden_units=8), x, y, relevance_model=public_model, verbose=0)
    assert isinstance(run, PreparedFit) and not run.trained and run.epochs is None
    history = run.fit(epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
    assert mech.ledger.epsilon_claimed() == pytest.approx(1.0 if cls is AdLM else 0.75)
    assert all(r.guarantee == "proven" for r in mech.ledger.releases)
    # the callback is the guard that makes the model refuse any data but the released (tests/test_released_data.py)
    assert [type(c) for c in run.callbacks] == [AdLMBudget] and run.callbacks[0].mechanism is mech


def test_adlm_without_relevance_model_is_refused_before_any_release(images):
    x, y, _, _ = images
    mech = AdLM.from_total(1.0, L, seed=0)
    with pytest.raises(ValueError, match="relevance_model"):
        mech.prepare(models.mlp(first_units=16, hidden_units=8), x, y)
    assert len(mech.ledger) == 0


@pytest.mark.dpsgd
def test_dpsgd_prepare_then_fit_runs_the_accounted_epochs(images):
    x, y, _, _ = images
    keras.utils.set_random_seed(0)
    dp = DPSGD(2.0, 1e-5, expected_batch_size=L, epochs=1, n=N, seed=0)
    run = dp.prepare(models.standard_mlp(), x, y, verbose=0)
    assert run.epochs == 1 and len(dp.ledger) == 1 and dp.ledger.releases[0].guarantee == "proven"
    with pytest.raises(ValueError, match="epochs=1"):
        run.fit(epochs=3)
    history = run.fit(verbose=0)
    assert len(history.history["loss"]) == 1


@pytest.mark.dpsgd
def test_dpsgd_prepare_refuses_other_data_before_the_release(images):
    x, y, _, _ = images
    dp = ShuffledDPSGD(1.0, 1e-5, batch_size=L, epochs=1, n=N)
    with pytest.raises(ValueError, match=f"n={N}"):
        dp.prepare(models.standard_mlp(), x[:100], y[:100])
    assert len(dp.ledger) == 0


def unit_ball_rows(n=200, d=5, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1, keepdims=True))
    return x, (x[:, 0] > 0).astype(int)


def test_input_perturbation_prepare_then_fit():
    x, y = unit_ball_rows()
    ip = InputPerturbation(1.0, 1e-4, epochs=5, seed=0)
    run = ip.prepare(x=x, y=y)
    assert run.epochs == 5 and ip.ledger.releases[0].guarantee == "proven"
    history = run.fit()
    assert len(history.history["loss"]) == 5 and "ip_epsilon" in history.history


def test_pcdbn_prepare_then_fit_and_its_reference_mode(images):
    x, y, _, _ = images
    cdbn = PrivateCDBN(epsilon=2.0, pretrain_epochs=1, batch_size=120, seed=0)
    with pytest.raises(TypeError, match=r"model: .*cdbn_network"):
        cdbn.prepare(x=x, y=y)
    model = cdbn_network([ConvRBM(4, 5, degree=3)], x.shape[1:], 10)
    run = cdbn.prepare(model, x, y)
    assert run.epochs == 1 and run.model is model and len(cdbn.ledger) == 0  # the layer-wise releases happen in fit
    history = run.fit()
    assert history.epoch == [0] and model.output_shape == (None, 10)
    assert cdbn.ledger.epsilon_provable() == pytest.approx(2.0)
    ref = PCDBNReference(0.5, batch_size=100)
    assert ref.mode == "reference"
    with pytest.raises(ValueError, match=r"mode='reference'.*PCDBNReference"):
        PrivateCDBN(mode="reference", epsilon=0.5)
    with pytest.raises(ValueError, match="without a model"):
        ref.prepare(models.standard_mlp(), x, y)


def test_reference_modes_are_classes_of_their_own_and_the_paper_class_names_them():
    with pytest.raises(ValueError, match=r"mode='reference'.*AdLMReference"):
        AdLM(0.1, 0.1, 0.2, L, mode="reference", seed=0)
    assert not any("__new__" in vars(cls) for cls in all_mechanism_classes())
    ref = AdLMReference(0.1, 0.1, 0.2, L, seed=0)
    assert isinstance(ref, Mechanism) and ref.mode == "reference"
    with pytest.raises(ValueError, match="relevance_model"):
        ref.prepare(x=np.zeros((N, 28, 28, 1), np.float32), y=np.eye(10)[np.arange(N) % 10])
    assert len(ref.ledger) == 0


# -- closed-form and query-time mechanisms ---------------------------------------------------------
def blobs(n=300, d=4, c=3, seed=0):
    centres = np.random.default_rng(seed).uniform(0.1, 0.9, (c, d))
    rng = np.random.default_rng(seed + 1000)
    labels = rng.integers(c, size=n)
    return np.clip(centres[labels] + rng.normal(0, 0.05, (n, d)), 0, 1), labels


@pytest.mark.parametrize("head", [
    lambda: FunctionalHead(None, 3, mechanism="laplace", epsilon=4.0, seed=0),
    lambda: OutputPerturbationHead(None, 3, epsilon=4.0, delta=1e-5, seed=0),
])
def test_closed_form_heads_release_in_prepare(head):
    x, labels = blobs(n=3000)
    mech = head()
    with pytest.raises(ValueError, match="without a model"):
        mech.prepare(models.standard_mlp(), x, labels)
    assert len(mech.ledger) == 0
    run = mech.prepare(x=x / np.sqrt(x.shape[1]), y=labels)
    assert run.trained and run.fit() is None and run.model is mech.model
    assert mech.ledger.epsilon_provable() == pytest.approx(4.0)
    accuracy = np.mean(np.argmax(run.model.predict(x / np.sqrt(x.shape[1]), verbose=0), 1) == labels)
    assert accuracy > 0.5  # three separable blobs: the released head learns them


def test_query_time_mechanism_returns_the_wrapping_predictor():
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (200, 6)).astype(np.float32)
    model = convexified_mlp(6, 3, hidden_units=16, l2=0.001, learning_rate=0.02)
    model.fit(x, np.eye(3, dtype=np.float32)[np.argmax(x[:, :3], 1)], epochs=2, batch_size=50, verbose=0)
    with warnings.catch_warnings():  # DPPredictor warns once per process that its ε is none proven
        warnings.simplefilter("ignore")
        pred = DPPredictor(model, compute_bounds(model, n_train=200), QueryBudgetAccountant(4.0, max_queries=4),
                           noise="laplace", seed=0)
    run = pred.prepare()
    assert run.trained and run.model is pred and pred.kind == "query"
    assert run.model.predict(x[:3]).shape == (3, 3)
    assert pred.accountant.remaining_queries == 1 and len(pred.ledger) == 1
    with pytest.raises(ValueError, match="constructor"):
        pred.prepare(convexified_mlp(6, 3, hidden_units=16))


# -- a mechanism is its own validated config: its settings are frozen once constructed ------------------------------
@pytest.mark.parametrize("make", [
    lambda: DPSGD(1.0, 1e-5, expected_batch_size=10, epochs=1, n=100),
    lambda: ShuffledDPSGD(1.0, 1e-5, 10, 1, 100),
    lambda: AdLM.from_total(1.0, 10), lambda: ILM.from_total(1.0, 10), lambda: tfdpmech.AFRRS.from_total(1.0, 10),
    lambda: FunctionalHead(None, 3, epsilon=1.0, delta=1e-5),
    lambda: OutputPerturbationHead(None, 3, epsilon=1.0, delta=1e-5),
    lambda: InputPerturbation(1.0, 1e-5, 10),
    lambda: PrivateCDBN(epsilon=1.0),
    lambda: AdLMReference.from_total(1.0, 10), lambda: PCDBNReference(1.0, batch_size=10),
], ids=["DPSGD", "ShuffledDPSGD", "AdLM", "ILM", "AFRRS", "FunctionalHead", "OutputPerturbationHead",
        "InputPerturbation", "PrivateCDBN", "AdLMReference", "PCDBNReference"])
def test_the_settings_a_mechanism_was_calibrated_from_cannot_change_after_construction(make):
    import dataclasses

    mech = make()
    assert "mode" in type(mech).settings and len(type(mech).settings) >= 4
    for name in type(mech).settings:
        before = getattr(mech, name)
        with pytest.raises(dataclasses.FrozenInstanceError, match=rf"field '{name}'.*construct a new"):
            setattr(mech, name, 0.5)
        assert getattr(mech, name) == before
    mech.anything_else = 1  # run state is not a setting
