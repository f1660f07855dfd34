"""OptimizerSettings: the optimiser of a DP-SGD run in one frozen object, and the former keywords mapped to it.

Each former keyword of ``PoissonDPSGD`` / ``DPSGD`` gives the same settings, the same Keras optimizer,
the same σ and steps and the same ledger release as the same field of ``OptimizerSettings``; the
former spelling warns once per process, the new one never.
"""

import dataclasses
import inspect
import warnings

import keras
import pytest

import tfdpmech
from tfdpmech import _deprecation
from tfdpmech.dpsgd import DPSGD, RECIPE, OptimizerSettings, PoissonDPSGD, make_dpsgd
from tfdpmech.dpsgd.optimizer_settings import DEFAULT_LEARNING_RATES, FORMER_KEYWORDS
from tfdpmech.dpsgd.paths import tf_privacy_available

POISSON_KEY = "PoissonDPSGD(**optimizer keywords)"
DPSGD_KEY = "DPSGD(**optimizer keywords)"

# one non-default value per former keyword, with the optimizer name it needs
FORMER = {
    "learning_rate": ("adam", dict(learning_rate=0.02)),
    "momentum": ("sgd", dict(momentum=0.9)),
    "lr_schedule": ("adam", dict(lr_schedule="cosine")),
    "ema_momentum": ("sgd", dict(ema_momentum=0.99)),
}


def _poisson(**kw):
    return PoissonDPSGD(1.0, 1e-5, expected_batch_size=50, epochs=2, n=500, seed=0, **kw)


def _dpsgd(**kw):
    return DPSGD(1.0, 1e-5, 50, 2, 500, path="vectorized", **kw)  # the path of a plain Keras optimizer


def _quiet(make, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return make(**kw)


def _config(optimizer) -> dict:
    config = optimizer.get_config()
    config.pop("name", None)
    return config


def _same_run(old, new):
    assert old.optimizer_settings == new.optimizer_settings
    assert (old.optimizer_name, old.learning_rate) == (new.optimizer_name, new.learning_rate)
    assert old.noise_multiplier == new.noise_multiplier and old.steps == new.steps
    assert old.epsilon_achieved == new.epsilon_achieved
    assert _config(old._optimizer(None)) == _config(new._optimizer(None))
    old_release, new_release = old._make_release(), new._make_release()
    assert old_release.details == new_release.details and old_release.basis == new_release.basis
    assert (old_release.epsilon_claimed, old_release.epsilon_provable) == (new_release.epsilon_claimed,
                                                                           new_release.epsilon_provable)


def test_the_former_keywords_are_fields_and_left_the_signatures():
    assert set(FORMER) == set(FORMER_KEYWORDS) <= {f.name for f in dataclasses.fields(OptimizerSettings)}
    for cls, count in ((PoissonDPSGD, 16), (DPSGD, 14)):  # 20 and 15 before
        params = inspect.signature(cls.__init__).parameters
        assert not set(FORMER_KEYWORDS) & set(params), cls
        assert len([p for p in params.values() if p.kind is not p.VAR_KEYWORD]) - 1 == count, cls
    assert tfdpmech.dpsgd.OptimizerSettings is OptimizerSettings


@pytest.mark.parametrize("keyword", sorted(FORMER))
def test_poisson_former_keyword_gives_the_same_run_as_the_field(keyword):
    name, values = FORMER[keyword]
    old = _quiet(_poisson, optimizer=name, **values)
    new = _poisson(optimizer=OptimizerSettings(name, **values))
    _same_run(old, new)
    assert getattr(old, keyword) == getattr(new, keyword) == values[keyword]
    # and the field matters: the default settings build another optimizer
    assert _config(_poisson(optimizer=name)._optimizer(None)) != _config(new._optimizer(None))


def test_dpsgd_former_learning_rate_gives_the_same_run_as_the_field():
    old = _quiet(_dpsgd, optimizer="sgd", learning_rate=0.3)
    new = _dpsgd(optimizer=OptimizerSettings("sgd", learning_rate=0.3))
    _same_run(old, new)
    assert new.learning_rate == 0.3 and _dpsgd(optimizer="sgd").learning_rate == DEFAULT_LEARNING_RATES["sgd"]


def test_a_name_is_the_everyday_spelling_with_the_default_step_size():
    for name in ("adam", "sgd"):
        for make in (_poisson, _dpsgd):
            run = make(optimizer=name)
            assert run.optimizer_settings == OptimizerSettings(name)
            assert run.learning_rate == DEFAULT_LEARNING_RATES[name] == OptimizerSettings(name).step_size
    assert _poisson().optimizer_settings == OptimizerSettings()


@pytest.mark.skipif(not tf_privacy_available(), reason="tensorflow-privacy's DP optimizers need TensorFlow 2.15")
def test_tensorflow_privacy_dp_optimizer_is_built_from_the_settings():
    from tfdpmech.dpsgd.paths import require_tf_privacy

    dp_optimizer_keras = require_tf_privacy()[3]
    dp = DPSGD(1.0, 1e-5, 50, 2, 500, path="microbatch", num_microbatches=10, engine="tensorflow_privacy",
               optimizer=OptimizerSettings("sgd", learning_rate=0.3))
    optimizer = dp._optimizer(dp_optimizer_keras)
    assert isinstance(optimizer, keras.optimizers.legacy.SGD) and optimizer._num_microbatches == 10
    assert optimizer.get_config()["learning_rate"] == pytest.approx(0.3)
    old = _quiet(DPSGD, epsilon=1.0, delta=1e-5, batch_size=50, epochs=2, n=500, path="microbatch",
                 num_microbatches=10, engine="tensorflow_privacy", optimizer="sgd", learning_rate=0.3)
    assert _config(old._optimizer(dp_optimizer_keras)) == _config(optimizer)


def test_former_keywords_warn_once_per_process_naming_the_new_spelling():
    for key in (POISSON_KEY, DPSGD_KEY):
        _deprecation._warned.discard(key)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _poisson(optimizer="sgd", momentum=0.9)
        _poisson(learning_rate=0.01)
        _poisson(optimizer=OptimizerSettings("sgd", momentum=0.9))
        _dpsgd(learning_rate=0.01)
        _dpsgd(learning_rate=0.02)
    ours = [w for w in caught if issubclass(w.category, DeprecationWarning) and "tfdpmech" in str(w.message)]
    assert len(ours) == 2, [str(w.message) for w in ours]
    poisson, dpsgd = (str(w.message) for w in ours)
    assert "optimizer=OptimizerSettings('sgd', momentum=...)" in poisson and "kept for one release" in poisson
    assert "optimizer=OptimizerSettings('adam', learning_rate=...)" in dpsgd
    assert all(w.filename == __file__ for w in ours)  # the warning points at the caller's line


def test_new_spelling_and_the_recipe_raise_no_deprecation_warning():
    for key in (POISSON_KEY, DPSGD_KEY):
        _deprecation._warned.discard(key)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _poisson(optimizer=OptimizerSettings("sgd", learning_rate=0.5, momentum=0.9, lr_schedule="cosine",
                                             ema_momentum=0.99))
        _dpsgd(optimizer=OptimizerSettings("sgd", learning_rate=0.5))
        _poisson(optimizer="adam")
        for sampling in ("poisson", "shuffled"):
            make_dpsgd(1.0, 1e-5, 7000, sampling=sampling)
            make_dpsgd(1.0, 1e-5, 7000, sampling=sampling, learning_rate=0.01, optimizer="sgd")
        make_dpsgd(1.0, 1e-5, 7000, recipe=RECIPE.replace(optimizer="sgd", momentum=0.9, lr_schedule="cosine",
                                                          ema_momentum=0.99))
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning) and "tfdpmech" in str(w.message)]


def test_the_recipe_passes_its_optimiser_as_settings():
    recipe = RECIPE.replace(optimizer="sgd", learning_rate=0.05, momentum=0.9, lr_schedule="cosine",
                            ema_momentum=0.99)
    settings = OptimizerSettings("sgd", learning_rate=0.05, momentum=0.9, lr_schedule="cosine", ema_momentum=0.99)
    assert recipe.optimizer_settings == settings
    assert make_dpsgd(1.0, 1e-5, 7000, recipe=recipe).optimizer_settings == settings
    # the recipe's optimiser fields as overrides replace its values; settings replace its optimiser
    assert make_dpsgd(1.0, 1e-5, 7000, learning_rate=0.01).optimizer_settings == OptimizerSettings("adam", 0.01)
    assert make_dpsgd(1.0, 1e-5, 7000, optimizer=settings).optimizer_settings == settings
    assert RECIPE.optimizer_settings == OptimizerSettings("adam", learning_rate=6e-3)


def test_defaults_and_frozen():
    s = OptimizerSettings()
    assert (s.name, s.learning_rate, s.momentum, s.lr_schedule, s.ema_momentum) == ("adam", None, 0.0, "constant",
                                                                                    None)
    assert s.step_size == 1e-3 and s.plain and s.extras() == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.learning_rate = 0.1


def test_bad_fields_name_the_field_value_and_fix():
    cases = [
        (dict(name="rmsprop"), ValueError, "OptimizerSettings.name"),
        (dict(learning_rate=0.0), ValueError, "OptimizerSettings.learning_rate"),
        (dict(learning_rate="0.1"), TypeError, "OptimizerSettings.learning_rate"),
        (dict(name="sgd", momentum=1.0), ValueError, "OptimizerSettings.momentum"),
        (dict(name="sgd", momentum="0.9"), TypeError, "OptimizerSettings.momentum"),
        (dict(momentum=0.5), ValueError, "OptimizerSettings.momentum"),
        (dict(lr_schedule="linear"), ValueError, "OptimizerSettings.lr_schedule"),
        (dict(ema_momentum=1.0), ValueError, "OptimizerSettings.ema_momentum"),
        (dict(ema_momentum=True), TypeError, "OptimizerSettings.ema_momentum"),
    ]
    for fields, exc, name in cases:
        with pytest.raises(exc, match=name.replace(".", r"\.")) as info:
            OptimizerSettings(**fields)
        message = str(info.value)
        value = fields[name.split(".")[1]]
        assert repr(value) in message or str(value) in message, message
        assert any(w in message for w in ("must be", "must lie", "pass", "drop")), message


def test_mixing_misspelling_or_a_poisson_only_field_is_refused_before_any_budget_is_spent():
    ledger = tfdpmech.PrivacyLedger()
    with pytest.raises(TypeError, match="momentum"):
        _poisson(optimizer=OptimizerSettings("sgd"), momentum=0.9, ledger=ledger)
    with pytest.raises(TypeError, match="learnig_rate"):
        _poisson(learnig_rate=0.1, ledger=ledger)
    with pytest.raises(TypeError, match="momentum"):
        _dpsgd(momentum=0.9, ledger=ledger)  # DPSGD never took momentum
    with pytest.raises(TypeError, match="optimizer"):
        _poisson(optimizer={"name": "adam"}, ledger=ledger)
    with pytest.raises(ValueError, match=r"OptimizerSettings\.lr_schedule='cosine' is PoissonDPSGD's"):
        _dpsgd(optimizer=OptimizerSettings(lr_schedule="cosine"), ledger=ledger)
    with pytest.raises(ValueError, match="optimizer must be one of"):
        _dpsgd(optimizer="rmsprop", ledger=ledger)
    assert len(ledger) == 0
