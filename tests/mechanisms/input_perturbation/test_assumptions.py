"""InputPerturbationAssumptions: the theory's knobs in one frozen object, and the former keywords mapped to it.

Each former keyword of ``InputPerturbation`` gives the same σ, noisy data, release and report as the
same field of ``InputPerturbationAssumptions``; the former spelling warns once per process.
"""

import dataclasses
import inspect
import warnings

import numpy as np
import pytest

import tfdpmech
from tfdpmech import _deprecation
from tfdpmech.mechanisms.input_perturbation import InputPerturbation, InputPerturbationAssumptions
from tfdpmech.mechanisms.input_perturbation.assumptions import LEGACY_KEYWORDS

from .helpers import synthetic

WARN_KEY = "InputPerturbation(**assumption keywords)"

# one non-default value per former keyword (with the fields it needs), the mode and batch size it matters with
FORMER = {
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


def test_the_former_keywords_are_the_fields():
    assert set(FORMER) == set(LEGACY_KEYWORDS) == {f.name for f in dataclasses.fields(InputPerturbationAssumptions)}
    params = inspect.signature(InputPerturbation.__init__).parameters
    assert not set(LEGACY_KEYWORDS) & set(params)
    assert len([p for p in params.values() if p.kind is not p.VAR_KEYWORD]) - 1 == 15  # 24 before
    assert tfdpmech.InputPerturbationAssumptions is InputPerturbationAssumptions


@pytest.mark.parametrize("keyword", sorted(FORMER))
def test_former_keyword_gives_the_same_result_as_the_field(keyword):
    values, mode, batch_size = FORMER[keyword]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old, x_old, y_old = _run(mode, batch_size, **values)
    new, x_new, y_new = _run(mode, batch_size, assumptions=InputPerturbationAssumptions(**values))
    assert old.assumptions == new.assumptions == InputPerturbationAssumptions(**values)
    assert old.sigma == new.sigma
    np.testing.assert_array_equal(x_old, x_new)
    np.testing.assert_array_equal(y_old, y_new)
    assert old.release.details == new.release.details and old.release.basis == new.release.basis
    assert old.constants == new.constants
    for attr in ("G", "curvature", "c", "kappa", "paper_literal_pl", "condition", "noise_structure", "strict",
                 "n_effective", "T_effective"):
        assert getattr(old, attr) == getattr(new, attr), attr
    old_report, new_report = old.report(), new.report()
    assert old_report == new_report
    # and the field matters: the default assumptions give another σ, other constants or another record
    if keyword == "strict":
        with pytest.raises(ValueError, match="full-batch"):
            _run(mode, batch_size)
        return
    default = _run(mode, batch_size)[0]
    assert (default.sigma != new.sigma or default.constants != new.constants
            or default.release.details != new.release.details)


def test_defaults_are_theorem_1_with_the_logistic_constants():
    a = InputPerturbationAssumptions()
    assert (a.condition, a.pl_constant, a.c, a.kappa, a.paper_literal_pl, a.G, a.g_convention, a.l2_convention,
            a.noise_structure, a.strict) == ("strong_convexity", None, None, 1.0, False, None, "full", "half",
                                             "per_record", True)
    assert InputPerturbation(1.0, 1e-5, 3).assumptions == a
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.kappa = 2.0


def test_former_keywords_warn_once_per_process_naming_the_new_spelling():
    _deprecation._warned.discard(WARN_KEY)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        InputPerturbation(0.3, 1e-4, 4, mode="reference", kappa=2.0)
        InputPerturbation(0.3, 1e-4, 4, mode="reference", condition="pl")
        InputPerturbation(0.3, 1e-4, 4, mode="reference", assumptions=InputPerturbationAssumptions(kappa=2.0))
    ours = [w for w in caught if issubclass(w.category, DeprecationWarning) and "InputPerturbation" in str(w.message)]
    assert len(ours) == 1
    message = str(ours[0].message)
    assert "assumptions=InputPerturbationAssumptions(kappa=...)" in message and "kept for one release" in message
    assert ours[0].filename == __file__  # the warning points at the caller's line


def test_new_spelling_raises_no_deprecation_warning():
    _deprecation._warned.discard(WARN_KEY)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        InputPerturbation(0.3, 1e-4, 4, mode="reference", assumptions=InputPerturbationAssumptions(condition="pl"))
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning) and "tfdpmech" in str(w.message)]


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


def test_mixing_or_misspelling_is_a_type_error_before_any_budget_is_spent():
    ledger = tfdpmech.PrivacyLedger()
    with pytest.raises(TypeError, match="kappa"):
        InputPerturbation(1.0, 1e-5, 3, kappa=2.0, assumptions=InputPerturbationAssumptions(), ledger=ledger)
    with pytest.raises(TypeError, match="kapa"):
        InputPerturbation(1.0, 1e-5, 3, kapa=2.0, ledger=ledger)
    with pytest.raises(TypeError, match="assumptions"):
        InputPerturbation(1.0, 1e-5, 3, assumptions={"kappa": 2.0}, ledger=ledger)
    assert len(ledger) == 0
