"""``epsilon_claimed`` and ``epsilon_provable`` are one kind of thing on each class, the same on all.

A total computed from a ledger is a method (it can take the number of epochs): the ledger's
``epsilon_claimed(epochs=None)`` / ``epsilon_provable(epochs=None)`` and the mechanisms that offer
their ledger's totals. A stored record (a ``Release``, a run's ``RunResult``) holds both as fields.
No class offers either name as a property.
"""

import dataclasses
import importlib
import inspect

import pytest

import tfdpmech
from tfdpmech.accounting import PrivacyLedger, Release
from tfdpmech.report import RunResult

NAMES = ("epsilon_claimed", "epsilon_provable")
PACKAGES = ("tfdpmech", "tfdpmech.accounting", "tfdpmech.mechanisms", "tfdpmech.mechanisms.functional_head", "tfdpmech.mechanisms.dpsgd",
            "tfdpmech.report", "tfdpmech.audit")


def _public_classes():
    seen = {}
    for name in PACKAGES:
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", ()):
            obj = getattr(module, attr)
            if inspect.isclass(obj):
                seen[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [seen[k] for k in sorted(seen)]


def _kind(cls, name):
    if dataclasses.is_dataclass(cls) and name in {f.name for f in dataclasses.fields(cls)}:
        return "field"
    for klass in cls.__mro__:
        if name in vars(klass):
            value = vars(klass)[name]
            if isinstance(value, property):
                return "property"
            return "method" if inspect.isfunction(value) else type(value).__name__
    return None


@pytest.mark.parametrize("cls", _public_classes(), ids=lambda c: c.__name__)
def test_claimed_and_provable_are_the_same_kind_and_never_a_property(cls):
    kinds = {name: _kind(cls, name) for name in NAMES}
    assert kinds["epsilon_claimed"] == kinds["epsilon_provable"], kinds
    assert kinds["epsilon_claimed"] in (None, "method", "field"), kinds


def test_totals_are_methods_records_hold_fields():
    assert _kind(PrivacyLedger, "epsilon_claimed") == "method"
    claimed = inspect.signature(PrivacyLedger.epsilon_claimed).parameters
    provable = inspect.signature(PrivacyLedger.epsilon_provable).parameters
    assert list(claimed) == list(provable) == ["self", "epochs"]
    assert _kind(tfdpmech.PrivateCDBN, "epsilon_claimed") == "method"
    assert _kind(Release, "epsilon_claimed") == _kind(RunResult, "epsilon_claimed") == "field"
