"""Every mechanism defaults to its proven mode; the paper's unproven mode is explicit and warned once."""

import warnings

import numpy as np
import pytest

from tfdpmech import DPPredictor, InputPerturbation, NoisyOutputNeuron, QueryBudgetAccountant, privacy_warnings
from tfdpmech.mechanisms.output_perturbation.noisy_output_neuron import noise_calibration
from tfdpmech.mechanisms.output_perturbation import compute_bounds
from tfdpmech.models import convexified_mlp
from tfdpmech.privacy_warnings import UnprovenModeWarning


def _ip(**kw):
    return InputPerturbation(1.0, 1e-5, 3, seed=0, **kw)


def _predictor(**kw):
    model = convexified_mlp(5, 3, hidden_units=4, l2=0.01)
    return DPPredictor(model, compute_bounds(model, n_train=100), QueryBudgetAccountant(1.0, max_queries=10),
                       noise="laplace", seed=0, **kw)


def _neuron(**kw):
    return NoisyOutputNeuron(1.0, 0.3, 1.0, 3, seed=0, **kw)


BUILDERS = {"InputPerturbation": _ip, "DPPredictor": _predictor, "NoisyOutputNeuron": _neuron}


@pytest.fixture
def fresh_warnings(monkeypatch):
    """A process in which no class has warned yet."""
    monkeypatch.setattr(privacy_warnings, "_UNPROVEN_WARNED", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


@pytest.mark.parametrize("name", ["InputPerturbation", "NoisyOutputNeuron"])
def test_the_default_mode_is_the_proven_one_and_does_not_warn(name, fresh_warnings):
    assert BUILDERS[name]().mode == "private"
    assert not [w for w in fresh_warnings if issubclass(w.category, UnprovenModeWarning)]
    assert noise_calibration(1.0, 0.3, 3)["epsilon_step"] is None  # every logit, no sampling step


def test_the_predictor_has_no_proven_mode_and_its_default_says_where_the_proven_one_is(fresh_warnings):
    """Lu et al.'s output perturbation rests on Δz_T, which is not a proven bound: even its default warns."""
    assert _predictor().mode == "private"
    _predictor()
    mine = [w for w in fresh_warnings if issubclass(w.category, UnprovenModeWarning)]
    assert len(mine) == 1
    assert "none proven" in str(mine[0].message) and "OutputPerturbationHead" in str(mine[0].message)


@pytest.mark.parametrize("name", list(BUILDERS))
def test_the_reference_mode_warns_once_per_class(name, fresh_warnings):
    BUILDERS[name](mode="reference")
    BUILDERS[name](mode="reference")
    mine = [w for w in fresh_warnings if issubclass(w.category, UnprovenModeWarning) and f"{name}(" in str(w.message)]
    assert len(mine) == 1, [str(w.message) for w in fresh_warnings]
    assert "none proven" in str(mine[0].message) and "mode='private'" in str(mine[0].message)
    # not hidden by the common UserWarning filter
    assert issubclass(UnprovenModeWarning, privacy_warnings.PrivacyLeakWarning)
    assert not issubclass(UnprovenModeWarning, UserWarning)


def test_default_input_perturbation_records_a_proven_release():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 4))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    ip = _ip()
    ip.perturb(x, (x[:, 0] > 0).astype(np.float32))
    assert ip.release.guarantee == "proven" and ip.release.epsilon_provable is not None
    assert ip.ledger.epsilon_provable() is not None


def test_default_predictor_records_the_private_mode_not_the_reproduction():
    """Output perturbation's private mode is proven only given its sensitivity bound Δz_T; the default
    records that release (noise on every logit), never the paper's one-logit reproduction."""
    pred = _predictor()
    pred.predict_proba(np.zeros((2, 5), np.float32))
    release = pred.ledger.releases[0]
    assert release.mechanism == "output_perturbation/private/laplace"
    assert not release.reproduction and not pred.ledger.is_reproduction
