"""The method contract: registration, mode words, the Prepared record, the one adapter over the mechanism contract."""

import numpy as np
import pytest

from tfdpmech.experiments import METHODS, Build, CompareConfig, Prepared, register_mechanism, register_method
from tfdpmech.experiments.registry import method


def test_every_method_uses_a_mode_word():
    assert METHODS
    for m in METHODS.values():
        assert m.mode in ("reference", "private", "none"), m.name
        assert m.takes_epsilon == (m.mode != "none") or m.name.startswith("public")


def test_register_rejects_unknown_mode_and_duplicate_name():
    with pytest.raises(ValueError, match="mode='paper'"):
        register_method("x_bad_mode", lambda ctx, e, s: None, "d", mode="paper")
    with pytest.raises(ValueError, match="already registered"):
        register_method("nonprivate", lambda ctx, e, s: None, "d", mode="none")
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        method("nope")


def test_single_logit_is_read_as_binary_probabilities():
    def model(x, training=False):
        return np.array([[0.0], [100.0]], np.float32)

    p = Prepared(model).probabilities(np.zeros((2, 3)))
    np.testing.assert_allclose(p, [[0.5, 0.5], [0.0, 1.0]], atol=1e-6)


# the methods with no Mechanism behind them: no privacy, the public model alone, a library's regulariser
WITHOUT_MECHANISM = {"nonprivate", "public_only", "kifer"}


def test_every_mechanism_method_goes_through_the_one_adapter():
    for name, m in METHODS.items():
        if name in WITHOUT_MECHANISM or (name.startswith("nonprivate_") and m.mode == "none"):  # no privacy
            continue
        assert getattr(m.prepare, "build", None) is not None, f"{name} is not registered with register_mechanism"


def test_the_adapter_turns_prepare_into_the_runners_record():
    from tfdpmech.accounting.ledger import PrivacyLedger
    from tfdpmech.contract import Mechanism, PreparedFit

    calls = []

    class Stub:  # answers the contract without subclassing Mechanism (whose subclasses other tests enumerate)
        kind = "training"
        described = {"noise_scale": "scale", "unset": "missing"}
        scale = 2.5
        describe = Mechanism.describe

        def __init__(self):
            self.ledger = PrivacyLedger()
            self.seconds = {"solve": 0.1}

        def prepare(self, model=None, x=None, y=None, **options):
            calls.append((model, x, y, options))
            return PreparedFit(model, data="batches", callbacks=["budget"], epochs=3)

    class Ctx:
        def public_seconds_spent(self, seed):
            return None

    def build(ctx, epsilon, seed):
        return Build(Stub(), "model", "x", "y", {"seed": seed}, notes={"recipe": "r"},
                     prepared={"examples_per_epoch": 7})

    register_mechanism("x_stub_method", build, "a stub", mode="private")
    try:
        prepared = METHODS["x_stub_method"].prepare(Ctx(), 1.0, 4)
    finally:
        del METHODS["x_stub_method"]
    assert calls == [("model", "x", "y", {"seed": 4})]  # the contract's prepare, with the builder's arguments
    assert isinstance(prepared.ledger, PrivacyLedger) and prepared.epochs == 3 and prepared.examples_per_epoch == 7
    assert prepared.notes == {"noise_scale": 2.5, "solve_seconds": 0.1, "recipe": "r"}  # from the mechanism
    assert prepared.callbacks == [] and prepared.fit is not None  # the mechanism's callbacks run inside its fit
    assert prepared.per == "training" and prepared.preprocessing_seconds >= 0


def test_a_method_named_twice_runs_once_and_an_unknown_name_is_refused():
    config = CompareConfig(methods=("fm_head", "fm_head"), public=300)
    assert config.validate().methods == ("fm_head", "public_only")
    with pytest.raises(ValueError, match="unknown method 'fm_head_old'.*fm_head"):
        method("fm_head_old")
    with pytest.raises(ValueError, match="unknown method 'fm_head_old'"):
        CompareConfig(methods=("fm_head_old",)).validate()


def test_registry_refuses_a_duplicate():
    with pytest.raises(ValueError, match="already registered"):
        register_mechanism("fm_head", lambda ctx, e, s: None, "d", mode="private")


def test_names_follow_one_scheme():
    # '_private' / '_reference' only as a paper method's mode (last, or before a variant), matching its mode word
    for name, m in METHODS.items():
        for word in ("private", "reference"):
            if f"_{word}" in name:
                assert m.mode == word and m.paper, name


def test_the_adapter_runs_the_make_private_shape_as_a_user_would():
    import keras

    from tfdpmech.accounting.ledger import PrivacyLedger
    from tfdpmech.contract import Mechanism

    calls = []

    class Stub:  # a training mechanism whose release happens in the first fit (as AdLM's)
        kind = "training"
        described = {"noise_scale": "scale"}
        scale = None
        describe = Mechanism.describe

        def __init__(self):
            self.ledger = PrivacyLedger()

        def private_model(self, model, **options):
            def compile(**kwargs):
                calls.append(("compile", kwargs))

            def fit(x, y, **kwargs):
                calls.append(("fit", x, y, kwargs["epochs"], kwargs["callbacks"]))
                self.scale, self.seconds = 2.5, {"release": 0.25}  # known once released
            model.compile, model.fit = compile, fit
            calls.append(("make_private", options))
            return model

    Mechanism.register(Stub)  # a virtual subclass: make_private takes it, the walks over subclasses do not see it

    class Ctx:
        def public_seconds_spent(self, seed):
            return None

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])

    def build(ctx, epsilon, seed):
        return Build(Stub(), model, "x", "y", {"relevance_model": None}, compile={"optimizer": "adam"},
                     notes={"recipe": "r"})

    register_mechanism("x_stub_private_model", build, "a stub", mode="private")
    try:
        prepared = METHODS["x_stub_private_model"].prepare(Ctx(), 1.0, 4)
    finally:
        del METHODS["x_stub_private_model"]
    assert calls == [("make_private", {"relevance_model": None}), ("compile", {"optimizer": "adam"})]
    assert prepared.model is model and prepared.notes == {"recipe": "r"}  # nothing released yet
    prepared.train_for(3, ["recorder"])
    assert calls[-1] == ("fit", "x", "y", 3, ["recorder"])  # fit(x, y) with the runner's epochs and callbacks
    assert prepared.notes_after_fit() == {"noise_scale": 2.5, "release_seconds": 0.25, "recipe": "r"}
    assert prepared.seconds_in_fit() == 0.25  # moved from training to preprocessing by the runner


def test_a_public_model_trained_elsewhere_takes_nothing_off_the_methods_own_time():
    """Loaded (a resumed comparison) or copied (a sweep's earlier comparison), the public model cost this prepare
    only the load: that is what leaves its time, not the 500 s its training once took."""
    import time

    from tfdpmech.accounting.ledger import PrivacyLedger
    from tfdpmech.contract import PreparedFit

    class Stub:
        kind = "training"
        described = {}
        seconds = {}

        def __init__(self):
            self.ledger = PrivacyLedger()

        def describe(self):
            return {}

        def prepare(self, model=None, x=None, y=None, **options):
            return PreparedFit(model, data="batches", epochs=1)

    class Ctx:
        spent = None

        def public_seconds_spent(self, seed):
            return self.spent

        def public_training_seconds(self, seed):  # its training elsewhere: reported beside, never subtracted
            return None if self.spent is None else 500.0

    def build(ctx, epsilon, seed):
        time.sleep(0.02)
        ctx.spent = 0.01  # of which the public model's load took half; it was trained elsewhere
        return Build(Stub(), "model", "x", "y", {})

    register_mechanism("x_stub_public", build, "a stub", mode="private")
    try:
        prepared = METHODS["x_stub_public"].prepare(Ctx(), 1.0, 0)
    finally:
        del METHODS["x_stub_public"]
    assert 0.005 <= prepared.preprocessing_seconds < 1.0
