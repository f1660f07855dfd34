"""OptimizerSettings: the optimiser of a DP-SGD run in one frozen object.

``DPSGD`` / ``ShuffledDPSGD`` take the optimiser as a name or as ``OptimizerSettings``, never as loose
keywords; every field of the settings reaches the Keras optimizer the run builds.
"""

import dataclasses
import inspect

import keras
import pytest

import tfdpmech
from tfdpmech.mechanisms.dpsgd import ShuffledDPSGD, RECIPE, OptimizerSettings, DPSGD, make_dpsgd
from tfdpmech.mechanisms.dpsgd.runs.optimizer_settings import DEFAULT_LEARNING_RATES
from tfdpmech.mechanisms.dpsgd.runs.paths import tf_privacy_available

# one non-default value per settings field, with the optimizer name it needs
FIELDS = {
    "learning_rate": ("adam", dict(learning_rate=0.02)),
    "momentum": ("sgd", dict(momentum=0.9)),
    "lr_schedule": ("adam", dict(lr_schedule="cosine")),
    "ema_momentum": ("sgd", dict(ema_momentum=0.99)),
    "ema_warmup": ("adam", dict(ema_momentum=0.99, ema_warmup=True)),
}


def _poisson(**kw):
    return DPSGD(1.0, 1e-5, expected_batch_size=50, epochs=2, n=500, seed=0, **kw)


def _dpsgd(**kw):
    return ShuffledDPSGD(1.0, 1e-5, 50, 2, 500, path="vectorized", **kw)  # the path of a plain Keras optimizer


def _config(optimizer) -> dict:
    config = optimizer.get_config()
    config.pop("name", None)
    return config


def test_the_settings_fields_are_not_constructor_keywords():
    fields = {f.name for f in dataclasses.fields(OptimizerSettings)} - {"name"}
    assert set(FIELDS) == fields
    for cls in (DPSGD, ShuffledDPSGD):
        params = inspect.signature(cls.__init__).parameters
        assert not fields & set(params), cls
        assert not [p for p in params.values() if p.kind is p.VAR_KEYWORD], cls
    assert tfdpmech.mechanisms.dpsgd.OptimizerSettings is OptimizerSettings


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_every_field_reaches_the_poisson_run_and_its_optimizer(field):
    name, values = FIELDS[field]
    run = _poisson(optimizer=OptimizerSettings(name, **values))
    assert getattr(run, field) == values[field] and run.optimizer_settings == OptimizerSettings(name, **values)
    if field == "ema_warmup" and not keras.__version__.startswith("3"):
        with pytest.raises(ValueError, match="ema_warmup=True needs Keras 3"):
            run._optimizer(None)
        return
    # the field matters: the default settings build another optimizer
    assert _config(_poisson(optimizer=name)._optimizer(None)) != _config(run._optimizer(None))


def test_the_shuffled_run_takes_its_step_size_from_the_settings():
    run = _dpsgd(optimizer=OptimizerSettings("sgd", learning_rate=0.3))
    assert run.learning_rate == 0.3 and _dpsgd(optimizer="sgd").learning_rate == DEFAULT_LEARNING_RATES["sgd"]
    assert _config(run._optimizer(None))["learning_rate"] == pytest.approx(0.3)


def test_a_name_is_the_everyday_spelling_with_the_default_step_size():
    for name in ("adam", "sgd"):
        for make in (_poisson, _dpsgd):
            run = make(optimizer=name)
            assert run.optimizer_settings == OptimizerSettings(name)
            assert run.learning_rate == DEFAULT_LEARNING_RATES[name] == OptimizerSettings(name).step_size
    assert _poisson().optimizer_settings == OptimizerSettings()


@pytest.mark.skipif(not tf_privacy_available(), reason="tensorflow-privacy's DP optimizers need TensorFlow 2.15")
def test_tensorflow_privacy_dp_optimizer_is_built_from_the_settings():
    from tfdpmech.mechanisms.dpsgd.runs.paths import require_tf_privacy

    dp_optimizer_keras = require_tf_privacy()[3]
    dp = ShuffledDPSGD(1.0, 1e-5, 50, 2, 500, path="microbatch", num_microbatches=10, engine="tensorflow_privacy",
               optimizer=OptimizerSettings("sgd", learning_rate=0.3))
    optimizer = dp._optimizer(dp_optimizer_keras)
    assert isinstance(optimizer, keras.optimizers.legacy.SGD) and optimizer._num_microbatches == 10
    assert optimizer.get_config()["learning_rate"] == pytest.approx(0.3)


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
        (dict(ema_warmup=True), ValueError, "OptimizerSettings.ema_warmup"),
        (dict(ema_momentum=0.9, ema_warmup=1), TypeError, "OptimizerSettings.ema_warmup"),
    ]
    for fields, exc, name in cases:
        with pytest.raises(exc, match=name.replace(".", r"\.")) as info:
            OptimizerSettings(**fields)
        message = str(info.value)
        value = fields[name.split(".")[1]]
        assert repr(value) in message or str(value) in message, message
        assert any(w in message for w in ("must be", "must lie", "pass", "drop")), message


def test_a_loose_field_a_misspelling_or_a_poisson_only_field_is_refused_before_any_budget_is_spent():
    ledger = tfdpmech.PrivacyLedger()
    with pytest.raises(TypeError, match="momentum"):
        _poisson(optimizer="sgd", momentum=0.9, ledger=ledger)
    with pytest.raises(TypeError, match="learnig_rate"):
        _poisson(learnig_rate=0.1, ledger=ledger)
    with pytest.raises(TypeError, match="momentum"):
        _dpsgd(momentum=0.9, ledger=ledger)  # ShuffledDPSGD never took momentum
    with pytest.raises(TypeError, match="optimizer"):
        _poisson(optimizer={"name": "adam"}, ledger=ledger)
    with pytest.raises(ValueError, match=r"OptimizerSettings\.lr_schedule='cosine' is DPSGD's"):
        _dpsgd(optimizer=OptimizerSettings(lr_schedule="cosine"), ledger=ledger)
    with pytest.raises(ValueError, match="optimizer must be one of"):
        _dpsgd(optimizer="rmsprop", ledger=ledger)
    assert len(ledger) == 0
