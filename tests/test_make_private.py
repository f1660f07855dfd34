"""``tfdpmech.make_private(model, mechanism)``: the same three lines train every mechanism that trains a
given Keras model, and the other shapes are refused naming their own."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import tfdpmech
from tfdpmech import AdLM, AFRRS, DPSGD, ILM, FunctionalHead, InputPerturbation, PCDBNReference, make_private, models
from tfdpmech.mechanisms.dpsgd import ShuffledDPSGD
from tfdpmech.mechanisms.output_perturbation import OutputPerturbationHead

from .test_mechanism_contract import L, N, images, public_model, unit_ball_rows  # noqa: F401  (shared fixtures)


def _weights_after(train):
    keras.utils.set_random_seed(0)
    model = models.mlp(first_units=16, hidden_units=8)
    return train(model), model.get_weights()


@pytest.mark.parametrize("cls", [AdLM, ILM, AFRRS])
def test_adlm_family_trains_through_make_private_compile_fit_as_prepare_does(images, public_model, cls):
    x, y, _, _ = images

    def three_lines(model):
        mech = cls.from_total(1.0, L, seed=0)
        private = make_private(model, mech, relevance_model=public_model, shuffle_seed=0)
        assert private is model and model.privacy_ledger is mech.ledger
        model.compile(optimizer="adam")
        assert len(mech.ledger) == 0  # nothing is released before fit sees the records
        history = model.fit(x, y, epochs=2, verbose=0)
        assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
        return mech

    def prepared(model):
        mech = cls.from_total(1.0, L, seed=0)
        mech.prepare(model, x, y, relevance_model=public_model, optimizer="adam", shuffle_seed=0,
                     verbose=0).fit(epochs=2, verbose=0)
        return mech

    mech, weights = _weights_after(three_lines)
    same, expected = _weights_after(prepared)
    for a, b in zip(weights, expected):
        np.testing.assert_array_equal(a, b)  # the same release and training, to the seed
    assert [r.to_dict() for r in mech.ledger.releases] == [r.to_dict() for r in same.ledger.releases]
    assert all(r.guarantee == "proven" for r in mech.ledger.releases)


def test_a_later_fit_trains_on_the_same_release_and_other_records_are_refused(images, public_model):
    x, y, _, _ = images
    model = models.mlp(first_units=16, hidden_units=8)
    mech = AdLM.from_total(1.0, L, seed=0)
    make_private(model, mech, relevance_model=public_model)
    with pytest.raises(RuntimeError, match="compile the private model before fit"):
        model.fit(x, y)
    with pytest.raises(ValueError, match="trains with its own loss"):
        model.compile(optimizer="adam", loss="mse")
    model.compile(optimizer="adam")
    with pytest.raises(ValueError, match=r"x, y: the first fit takes the private records"):
        model.fit(epochs=1)
    assert len(mech.ledger) == 0
    for keras_argument in ({"batch_size": 32}, {"shuffle": False}, {"sample_weight": np.ones(N)}):
        with pytest.raises(TypeError, match=rf"\['{next(iter(keras_argument))}'\] do not apply to a private model"):
            model.fit(x, y, epochs=1, **keras_argument)  # refused before the release, not after it
    assert len(mech.ledger) == 0
    model.fit(x, y, epochs=1, verbose=0)
    spent = [r.to_dict() for r in mech.ledger.releases]
    model.fit(epochs=1, verbose=0)  # post-processing of the release: nothing new in the ledger
    assert [r.to_dict() for r in mech.ledger.releases] == spent
    with pytest.raises(ValueError, match="released once, from the records of the first fit"):
        model.fit(x, y, epochs=1)
    assert [r.to_dict() for r in mech.ledger.releases] == spent


def test_input_perturbation_trains_through_make_private_as_prepare_does():
    x, y = unit_ball_rows()
    ip = InputPerturbation(1.0, 1e-4, epochs=5, seed=0)
    model = make_private(ip.make_linear_model(x.shape[1]), ip)
    with pytest.raises(ValueError, match=r"\['optimizer'\]: InputPerturbation sets its own optimizer"):
        model.compile(optimizer="adam")
    model.compile()
    with pytest.raises(ValueError, match=r"epochs=6: InputPerturbation's budget was computed for epochs=5"):
        model.fit(x, y, epochs=6)  # refused before the features are perturbed
    assert len(ip.ledger) == 0 and ip.sigma is None
    history = model.fit(x, y)
    assert len(history.history["loss"]) == 5 and "ip_epsilon" in history.history  # the T steps the budget names
    same = InputPerturbation(1.0, 1e-4, epochs=5, seed=0)
    run = same.prepare(same.make_linear_model(x.shape[1]), x, y)
    run.fit()
    for a, b in zip(model.get_weights(), run.model.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert [r.to_dict() for r in ip.ledger.releases] == [r.to_dict() for r in same.ledger.releases]
    assert ip.ledger.releases[0].guarantee == "proven"


def test_unknown_options_and_adlm_without_relevance_model_are_refused_before_any_release(images):
    x, y, _, _ = images
    mech = AdLM.from_total(1.0, L, seed=0)
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['relevance'\]; it takes \['relevance_model'"):
        make_private(models.mlp(first_units=16, hidden_units=8), mech, relevance=None)
    model = make_private(models.mlp(first_units=16, hidden_units=8), mech)
    model.compile()
    with pytest.raises(ValueError, match="relevance_model"):
        model.fit(x, y)
    assert len(mech.ledger) == 0


@pytest.mark.parametrize("make", [
    lambda: FunctionalHead(None, 2, mechanism="gaussian", epsilon=1.0, delta=1e-5, seed=0),
    lambda: OutputPerturbationHead(None, 2, epsilon=1.0, delta=1e-5, seed=0),
], ids=["FunctionalHead", "OutputPerturbationHead"])
def test_a_head_is_fitted_in_one_line_that_returns_the_trained_keras_model_with_its_ledger(make):
    x, y = unit_ball_rows()
    head = make()
    model = head.fit(x, y)
    assert isinstance(model, keras.Model) and model is head.model
    assert model.privacy_ledger is head.ledger and head.ledger.epsilon_provable() == pytest.approx(1.0)
    assert model.predict(x[:5], verbose=0).shape == (5, 2)  # logits of the released head


@pytest.mark.parametrize("make, fix", [
    (lambda: FunctionalHead(None, 3, mechanism="laplace", epsilon=1.0, seed=0), r"FunctionalHead\(...\)\.fit\(x, y\)"),
    (lambda: OutputPerturbationHead(None, 3, epsilon=1.0, delta=1e-5, seed=0), r"estimator"),
    (lambda: PCDBNReference(0.5, batch_size=100, seed=0), r"trains the network it builds itself"),
    (lambda: ShuffledDPSGD(1.0, 1e-5, 10, 1, 1000), r"Poisson-sampled DP-SGD \(tfdpmech\.DPSGD\)"),
])
def test_mechanisms_of_another_shape_are_refused_naming_their_own(make, fix):
    mech = make()
    with pytest.raises(TypeError, match=fix):
        make_private(models.standard_mlp(), mech)
    assert len(mech.ledger) == 0


def test_a_query_time_mechanism_is_refused_naming_its_shape():
    import warnings

    from tfdpmech.accounting.query_budget import QueryBudgetAccountant
    from tfdpmech.mechanisms.output_perturbation import DPPredictor, compute_bounds

    trained = models.convexified_mlp(6, 3, hidden_units=8)
    with warnings.catch_warnings():  # its ε is none proven, and it says so once per process
        warnings.simplefilter("ignore")
        predictor = DPPredictor(trained, compute_bounds(trained, n_train=200), QueryBudgetAccountant(4.0, max_queries=4))
    with pytest.raises(TypeError, match=r"DPPredictor\(trained_model, \.\.\.\) answers queries"):
        make_private(models.standard_mlp(), predictor)
    assert len(predictor.ledger) == 0


def test_what_is_not_a_model_or_not_a_mechanism_is_a_type_error_naming_it():
    dp = DPSGD(1.0, 1e-5, expected_batch_size=10, epochs=1, n=1000)
    with pytest.raises(TypeError, match="model must be a built keras.Model, got Dense"):
        make_private(keras.layers.Dense(3), dp)
    with pytest.raises(TypeError, match=r"mechanism must be a tfdpmech mechanism .* got dict"):
        make_private(models.standard_mlp(), {"epsilon": 1.0})
    with pytest.raises(TypeError, match=r"takes no further options, got \['seed'\]"):
        make_private(models.standard_mlp(), dp, seed=0)
    assert len(dp.ledger) == 0
    make_private(models.standard_mlp(), dp).compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match="already compiled a model"):  # one run, one model, one release
        make_private(models.standard_mlp(), dp)
    assert len(dp.ledger) == 0  # make_private's model records its release at the first fit


@pytest.mark.skipif(not tfdpmech.mechanisms.dpsgd.tf_privacy_available(), reason="needs tensorflow-privacy")
def test_a_tensorflow_privacy_run_is_refused_with_the_fix():
    dp = DPSGD(1.0, 1e-5, expected_batch_size=10, epochs=1, n=1000, engine="tensorflow_privacy")
    with pytest.raises(ValueError, match=r"DPSGD\(\.\.\.\) without engine="):
        make_private(models.standard_mlp(), dp)
    assert dp.model is None and len(dp.ledger) == 0
