"""InputPerturbationAssumptions: the theory's knobs in one frozen object.

``InputPerturbation`` takes them only as ``assumptions=InputPerturbationAssumptions(...)``, never as
loose keywords; every field changes σ, the constants or the release it records.
"""

import dataclasses
import inspect
import warnings

import numpy as np
import pytest

import tfdpmech
from tfdpmech.mechanisms.input_perturbation import InputPerturbation, InputPerturbationAssumptions

from .helpers import synthetic

# one non-default value per field (with the fields it needs), the mode and batch size it matters with
FIELDS = {
    "condition": (dict(condition="pl"), "reference", None),
    "pl_constant": (dict(pl_constant=0.02), "reference", None),
    "c": (dict(c=3.0), "reference", None),
    "kappa": (dict(kappa=2.0), "reference", None),
    "paper_literal_pl": (dict(condition="pl", paper_literal_pl=True), "reference", None),
    "G": (dict(G=3.0), "reference", None),
    "g_convention": (dict(g_convention="data_term"), "reference", None),
    "l2_convention": (dict(l2_convention="keras"), "private", None),
    "noise_structure": (dict(noise_structure="shared"), "reference", None),
    "strict": (dict(strict=False), "reference", 20),
}


def _run(mode, batch_size, **kw):
    x, y = synthetic(60, 3)
    ip = InputPerturbation(0.3, 1e-4, 4, l2=0.05, batch_size=batch_size, seed=3, mode=mode, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # shared noise, mini-batch extrapolation
        x_noisy, y_train = ip.perturb(x, y)
    return ip, x_noisy, y_train


def test_the_fields_are_not_constructor_keywords():
    fields = {f.name for f in dataclasses.fields(InputPerturbationAssumptions)}
    assert set(FIELDS) == fields
    params = inspect.signature(InputPerturbation.__init__).parameters
    assert not fields & set(params)
    assert not [p for p in params.values() if p.kind is p.VAR_KEYWORD]
    assert tfdpmech.InputPerturbationAssumptions is InputPerturbationAssumptions


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_every_field_reaches_the_mechanism_and_matters(field):
    values, mode, batch_size = FIELDS[field]
    run, x_noisy, _ = _run(mode, batch_size, assumptions=InputPerturbationAssumptions(**values))
    assert run.assumptions == InputPerturbationAssumptions(**values)
    assert x_noisy.shape == synthetic(60, 3)[0].shape and np.all(np.isfinite(x_noisy))
    # the field matters: the default assumptions give another σ, other constants or another record
    if field == "strict":
        with pytest.raises(ValueError, match="full-batch"):
            _run(mode, batch_size)
        return
    default = _run(mode, batch_size)[0]
    assert (default.sigma != run.sigma or default.constants != run.constants
            or default.release.details != run.release.details)


def test_defaults_are_theorem_1_with_the_logistic_constants():
    a = InputPerturbationAssumptions()
    assert (a.condition, a.pl_constant, a.c, a.kappa, a.paper_literal_pl, a.G, a.g_convention, a.l2_convention,
            a.noise_structure, a.strict) == ("strong_convexity", None, None, 1.0, False, None, "full", "half",
                                             "per_record", True)
    assert InputPerturbation(1.0, 1e-5, 3).assumptions == a
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.kappa = 2.0


def test_bad_fields_name_the_field_value_and_fix():
    cases = [
        (dict(condition="convex"), ValueError, "InputPerturbationAssumptions.condition"),
        (dict(kappa=0.0), ValueError, "InputPerturbationAssumptions.kappa"),
        (dict(c=-1.0), ValueError, "InputPerturbationAssumptions.c"),
        (dict(pl_constant="0.1"), TypeError, "InputPerturbationAssumptions.pl_constant"),
        (dict(G=float("nan")), ValueError, "InputPerturbationAssumptions.G"),
        (dict(g_convention="half"), ValueError, "InputPerturbationAssumptions.g_convention"),
        (dict(l2_convention="full"), ValueError, "InputPerturbationAssumptions.l2_convention"),
        (dict(noise_structure="global"), ValueError, "InputPerturbationAssumptions.noise_structure"),
        (dict(strict="yes"), TypeError, "InputPerturbationAssumptions.strict"),
        (dict(paper_literal_pl=1), TypeError, "InputPerturbationAssumptions.paper_literal_pl"),
        (dict(paper_literal_pl=True), ValueError, "paper_literal_pl"),
    ]
    for fields, exc, name in cases:
        with pytest.raises(exc, match=name.replace(".", r"\.")) as info:
            InputPerturbationAssumptions(**fields)
        message = str(info.value)
        value = next(iter(fields.values()))
        if fields != dict(paper_literal_pl=True):
            assert repr(value) in message or str(value) in message, message
        assert any(w in message for w in ("must be", "pass")), message


def test_a_loose_field_or_a_misspelling_is_a_type_error_before_any_budget_is_spent():
    ledger = tfdpmech.PrivacyLedger()
    with pytest.raises(TypeError, match="kappa"):
        InputPerturbation(1.0, 1e-5, 3, kappa=2.0, ledger=ledger)
    with pytest.raises(TypeError, match="kapa"):
        InputPerturbation(1.0, 1e-5, 3, kapa=2.0, ledger=ledger)
    with pytest.raises(TypeError, match="assumptions"):
        InputPerturbation(1.0, 1e-5, 3, assumptions={"kappa": 2.0}, ledger=ledger)
    assert len(ledger) == 0
