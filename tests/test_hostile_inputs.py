"""Hostile inputs to every public entry point: a named ValueError/TypeError, before any budget is spent.

Each case calls one public entry point of ``tfdpmech.__all__`` (or the ``tfdpmech compare``
command) with one malformed argument — NaN/inf, wrong shapes and dtypes (complex, object, strings),
strings and bools for numbers, negative/zero/huge/subnormal budgets, δ outside (0, 1), empty arrays,
unbuilt or subclassed models, wrong types for ledger and callback arguments — and asserts:

* it raises ``ValueError`` or ``TypeError``;
* the message names the argument (the name appears as a word in the message);
* where a ledger is passed, the ledger is still empty afterwards (no budget spent first).

``test_every_public_entry_point_is_covered`` fails when ``tfdpmech.__all__`` gains a callable entry
point that no case exercises.
"""

from __future__ import annotations

import functools
import os
import re
import tempfile

import keras
import numpy as np
import pytest

import tfdpmech
from tfdpmech import (
    AFRRS, AFRRSReference, AdLM, AdLMReference, BatchMinMax, BatchStatisticsNormalization, PCDBNReference, BoundedLRN, ChebyshevEnergy, ConvexifiedCrossEntropy, ConvRBM, DPPredictor,
    FunctionalSoftmaxHead, ILM, ILMReference, InputNoise, InputPerturbation, InputPerturbationAssumptions, NoisyOutputNeuron, PerturbedBias, PrivacyBudget,
    PrivacyLedger, PrivateCDBN, PrivateData, QueryBudgetAccountant, Release, TaylorCrossEntropy, UnitClip,
    compute_bounds, format_epsilon, taylor_accuracy,
)
from tfdpmech import audit, data, models, noise, validation
from tfdpmech.mechanisms import adlm as relevance  # LRP and the private relevance
from tfdpmech.mechanisms.adlm import allocation
from tfdpmech.mechanisms.pcdbn import chebyshev

SHAPE, CLASSES, N = (4, 4, 1), 3, 40

# --- hostile values ------------------------------------------------------------------------------------------
NAN, INF = float("nan"), float("inf")
# for a positive real (ε, learning rates, bounds, ...)
BAD_POSITIVE = {"nan": NAN, "inf": INF, "neg": -1.0, "zero": 0.0, "str": "1.0", "bool": True, "huge_int": 10**400,
                "subnormal": 5e-324, "complex": 1 + 2j, "list": [1.0]}
BAD_EPSILON = dict(BAD_POSITIVE, too_large=1e300)
BAD_DELTA = {"zero": 0.0, "one": 1.0, "neg": -1e-5, "above": 1.5, "nan": NAN, "str": "1e-5", "bool": True,
             "huge_int": 10**400, "complex": 1e-5j}
BAD_INT = {"zero": 0, "neg": -3, "float": 2.5, "str": "10", "bool": True, "nan": NAN, "none_like": [1]}


class NotALedger:
    def record(self, release):  # quacks like a ledger: the type check must still refuse it
        return release


def _features(kind):
    x = np.random.default_rng(0).random((N,) + SHAPE).astype(np.float32)
    if kind == "nan":
        x[3, 0, 0, 0] = np.nan
    elif kind == "inf":
        x[3, 0, 0, 0] = np.inf
    elif kind == "complex":
        x = x + 0.1j
    elif kind == "object":
        x = x.astype(object)
    elif kind == "str":
        x = x.astype(str)
    elif kind == "empty":
        x = x[:0]
    elif kind == "flat":
        x = x.reshape(N, -1)
    elif kind == "out_of_range":
        x = x * 3.0
    elif kind == "none":
        x = None
    return x


BAD_X = ("nan", "inf", "complex", "object", "str", "empty", "flat", "out_of_range", "none")


def _labels(kind="ok"):
    y = np.eye(CLASSES, dtype=np.float32)[np.arange(N) % CLASSES]
    if kind == "nan":
        y[0, 0] = np.nan
    elif kind == "soft":
        y = y * 0.5
    elif kind == "short":
        y = y[:-1]
    elif kind == "classes":
        y = np.eye(CLASSES + 2, dtype=np.float32)[np.arange(N) % (CLASSES + 2)]
    elif kind == "str":
        y = y.astype(str)
    elif kind == "complex":
        y = y + 0j
    return y


BAD_Y = ("nan", "soft", "short", "classes", "str", "complex")


@functools.lru_cache(maxsize=None)
def _ok_x():
    return _features("ok")


def private_model():
    return models.mlp(CLASSES, input_shape=SHAPE, first_units=8, hidden_units=4)


def relevance_model():
    return keras.Sequential([keras.Input(SHAPE), keras.layers.Flatten(), keras.layers.Dense(6, activation="relu"),
                             keras.layers.Dense(CLASSES)])


class Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(CLASSES)

    def call(self, x):
        return self.dense(keras.layers.Flatten()(x))


def unbuilt():
    return keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(CLASSES)])


BAD_MODELS = {"unbuilt": unbuilt, "subclassed": Subclassed, "string": lambda: "model", "none": lambda: None,
              "array": lambda: np.zeros(3)}


@functools.lru_cache(maxsize=None)
def _op_model():
    return models.convexified_mlp(5, CLASSES, hidden_units=4, l2=0.01)


@functools.lru_cache(maxsize=None)
def _op_bounds():
    return compute_bounds(_op_model(), n_train=100)


@functools.lru_cache(maxsize=None)
def _ip_data():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(N, 5))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, (x[:, 0] > 0).astype(np.float32)


def _release(**kw):
    args = dict(component="c", mechanism="laplace", epsilon_claimed=1.0, epsilon_provable=1.0, basis="b")
    args.update(kw)
    return Release(**args)


# --- the cases ---------------------------------------------------------------------------------------------------
# Each case: (id, argument name the message must name, thunk(ledger) -> None). The thunk passes `ledger`
# to whatever records releases, so the test can check that nothing was recorded.
CASES = []


NAMED = (ValueError, TypeError)


def case(case_id, arg, thunk, entry, *, exc=NAMED, marks=()):
    CASES.append(pytest.param(arg, thunk, entry, exc, id=case_id, marks=marks))


def _adlm(ledger, cls=AdLM, **kw):
    args = dict(eps1=0.25, eps2=0.25, eps3=0.5, batch_size=20, seed=0, ledger=ledger)
    args.update(kw)
    return cls(**args)


# AdLM / ILM constructors
for name in ("eps1", "eps2", "eps3"):
    for k, v in BAD_EPSILON.items():
        case(f"AdLM-{name}-{k}", name, lambda led, name=name, v=v: _adlm(led, **{name: v}), "AdLM")
for k, v in BAD_INT.items():
    case(f"AdLM-batch_size-{k}", "batch_size", lambda led, v=v: _adlm(led, batch_size=v), "AdLM")
for k, v in {"str": "fast", "int": 3, "none": None}.items():
    case(f"AdLM-noise_mode-{k}", "noise_mode", lambda led, v=v: _adlm(led, noise_mode=v), "AdLM")
    case(f"AdLM-delta_h0_policy-{k}", "delta_h0_policy", lambda led, v=v: _adlm(led, delta_h0_policy=v), "AdLM")
for k, v in {"str": "1", "empty": (), "three": (3,), "bool": (True,), "int": 1}.items():
    case(f"AdLM-perturb_orders-{k}", "perturb_orders", lambda led, v=v: _adlm(led, perturb_orders=v), "AdLM")
for k, v in dict(BAD_POSITIVE).items():
    case(f"AdLM-relevance_floor-{k}", "relevance_floor", lambda led, v=v: _adlm(led, relevance_floor=v), "AdLM")
for k, v in {"short": (1.0,), "long": (0, 1, 2), "str": "ab", "reversed": (1.0, -1.0), "nan": (NAN, 1.0),
             "strings": ("a", "b"), "scalar": 5.0}.items():
    case(f"AdLM-clip_noisy_inputs-{k}", "clip_noisy_inputs", lambda led, v=v: _adlm(led, clip_noisy_inputs=v), "AdLM")
case("AdLM-bias_noise-str", "bias_noise", lambda led: _adlm(led, bias_noise="no"), "AdLM")
case("AdLM-seed-str", "seed", lambda led: _adlm(led, seed="0"), "AdLM")
case("AdLM-epsilon-mismatch", "epsilon", lambda led: _adlm(led, epsilon=2.0), "AdLM")
for k, v in {"str": "ledger", "dict": {}, "duck": NotALedger(), "list": []}.items():
    case(f"AdLM-ledger-{k}", "ledger", lambda led, v=v: _adlm(None, ledger=v), "AdLM")
    case(f"ILM-ledger-{k}", "ledger", lambda led, v=v: ILM(0.5, 0.5, 20, ledger=v), "ILM")
for k, v in BAD_EPSILON.items():
    case(f"ILM-eps2-{k}", "eps2", lambda led, v=v: ILM(v, 0.5, 20, ledger=led), "ILM")
    case(f"AdLM.from_total-epsilon-{k}", "epsilon", lambda led, v=v: AdLM.from_total(v, 20, ledger=led), "AdLM")
    case(f"ILM.from_total-epsilon-{k}", "epsilon", lambda led, v=v: ILM.from_total(v, 20, ledger=led), "ILM")
for k, v in {"over": (0.9, 0.9, 0.9), "two": (0.5, 0.5), "four": (0.25,) * 4, "neg": (-0.5, 1.0, 0.5),
             "zero": (0.0, 0.5, 0.5), "nan": (NAN, 0.5, 0.5), "str": "abc", "strs": ("a", "b", "c"), "none": None,
             "dict": {"a": 1}, "bools": (True, False, False)}.items():
    case(f"AdLM.from_total-split-{k}", "split", lambda led, v=v: AdLM.from_total(1.0, 20, split=v, ledger=led),
         "AdLM")
    case(f"ILM.from_total-split-{k}", "split", lambda led, v=v: ILM.from_total(1.0, 20, split=v, ledger=led), "ILM")

# AdLM / ILM perturb: every check before any noise or release
for kind in BAD_X:
    case(f"ILM.perturb-x-{kind}", "x",
         lambda led, kind=kind: ILM(0.5, 0.5, 20, seed=0, ledger=led).perturb(_features(kind), _labels(), private_model()),
         "ILM")
for kind in BAD_Y:
    case(f"ILM.perturb-y-{kind}", "y",
         lambda led, kind=kind: ILM(0.5, 0.5, 20, seed=0, ledger=led).perturb(_ok_x(), _labels(kind), private_model()),
         "ILM")
for k, make in BAD_MODELS.items():
    case(f"ILM.perturb-model-{k}", "model",
         lambda led, make=make: ILM(0.5, 0.5, 20, seed=0, ledger=led).perturb(_ok_x(), _labels(), make()), "ILM")
case("ILM.perturb-model-unbounded", "UnitClip",
     lambda led: ILM(0.5, 0.5, 20, bias_noise=False, ledger=led).perturb(
         _ok_x(), _labels(), models.standard_mlp(CLASSES, input_shape=SHAPE)),
     "ILM")
case("ILM.perturb-batch_size-remainder", "batch_size",
     lambda led: ILM(0.5, 0.5, 30, seed=0, ledger=led).perturb(_ok_x(), _labels(), private_model()), "ILM")
case("ILM.perturb-batch_size-above_n", "batch_size",
     lambda led: ILM(0.5, 0.5, 64, seed=0, ledger=led).perturb(_ok_x(), _labels(), private_model()), "ILM")
case("ILM.perturb-drop_remainder-str", "drop_remainder",
     lambda led: ILM(0.5, 0.5, 20, ledger=led).perturb(_ok_x(), _labels(), private_model(), drop_remainder="yes"),
     "ILM")
case("ILM.perturb-noise_mode-no_input_noise", "InputNoise",
     lambda led: ILM(0.5, 0.5, 20, noise_mode="shared_per_step", ledger=led).perturb(_ok_x(), _labels(),
                                                                                     private_model()), "ILM")
case("AdLM.perturb-relevance-missing", "fit_relevance",
     lambda led: _adlm(led).perturb(_ok_x(), _labels(), private_model()), "AdLM")
case("ILM.callback-model-str", "model", lambda led: ILM(0.5, 0.5, 20, ledger=led).callback("model"), "ILM")
case("ILM.fit_relevance", "ILM", lambda led: ILM(0.5, 0.5, 20, ledger=led).fit_relevance(None, _ok_x(), _labels()),
     "ILM")

# AdLM.fit_relevance (spends ε1): all arguments refused before
for kind in BAD_X:
    case(f"AdLM.fit_relevance-x-{kind}", "x",
         lambda led, kind=kind: _adlm(led).fit_relevance(relevance_model(), _features(kind), _labels()), "AdLM")
for kind in ("nan", "soft", "short", "classes", "str"):
    case(f"AdLM.fit_relevance-y-{kind}", "y",
         lambda led, kind=kind: _adlm(led).fit_relevance(relevance_model(), _ok_x(), _labels(kind)), "AdLM")
for k, v in {"neg": -1.0, "nan": NAN, "str": "1", "bool": True}.items():
    case(f"AdLM.fit_relevance-mu-{k}", "mu", lambda led, v=v: _adlm(led).fit_relevance(relevance_model(), _ok_x(),
                                                                                       _labels(), mu=v), "AdLM")
case("AdLM.fit_relevance-start", "start",
     lambda led: _adlm(led).fit_relevance(relevance_model(), _ok_x(), _labels(), start="middle"), "AdLM")
case("AdLM.fit_relevance-batch_size", "batch_size",
     lambda led: _adlm(led).fit_relevance(relevance_model(), _ok_x(), _labels(), batch_size=0), "AdLM")
case("AdLM.fit_relevance-trained_on_private_data", "trained_on_private_data",
     lambda led: _adlm(led).fit_relevance(relevance_model(), _ok_x(), _labels(), trained_on_private_data="no"),
     "AdLM")
for k, make in BAD_MODELS.items():
    case(f"AdLM.fit_relevance-model-{k}", "model",
         lambda led, make=make: _adlm(led).fit_relevance(make(), _ok_x(), _labels()), "AdLM")

# PrivateData
case("PrivateData.to_dataset-batch_size", "batch_size",
     lambda led: PrivateData(np.zeros((4, 2), np.float32), np.zeros((4, 3, 3), np.float32), 2, "per_example_frozen",
                             "f").to_dataset(batch_size=3), "PrivateData")

# InputPerturbation
def _ip(led, **kw):
    args = dict(epsilon=1.0, delta=1e-5, epochs=3, ledger=led)
    args.update(kw)
    return InputPerturbation(**args)


for k, v in BAD_EPSILON.items():
    case(f"InputPerturbation-epsilon-{k}", "epsilon", lambda led, v=v: _ip(led, epsilon=v), "InputPerturbation")
for k, v in BAD_DELTA.items():
    case(f"InputPerturbation-delta-{k}", "delta", lambda led, v=v: _ip(led, delta=v), "InputPerturbation")
for k, v in BAD_INT.items():
    case(f"InputPerturbation-epochs-{k}", "epochs", lambda led, v=v: _ip(led, epochs=v), "InputPerturbation")
for name in ("l2", "feature_norm_bound"):
    for k in ("nan", "neg", "str", "bool", "huge_int"):
        case(f"InputPerturbation-{name}-{k}", name, lambda led, name=name, k=k: _ip(led, **{name: BAD_POSITIVE[k]}),
             "InputPerturbation")
for name in ("mode", "accountant"):
    case(f"InputPerturbation-{name}-unknown", name, lambda led, name=name: _ip(led, **{name: "unknown"}),
         "InputPerturbation")
for k, v in {"dict": {"kappa": 2.0}, "str": "pl", "none_like": [None]}.items():
    case(f"InputPerturbation-assumptions-{k}", "assumptions", lambda led, v=v: _ip(led, assumptions=v),
         "InputPerturbation")
case("InputPerturbation-unknown-keyword", "kapa", lambda led: _ip(led, kapa=2.0), "InputPerturbation")


# InputPerturbationAssumptions (built alone, and inside the mechanism's constructor)
def _ipa(led, **kw):
    return _ip(led, mode="reference", assumptions=InputPerturbationAssumptions(**kw))


for name in ("G", "kappa", "pl_constant", "c"):
    for k in ("nan", "inf", "neg", "zero", "str", "bool", "huge_int", "subnormal", "complex", "list"):
        case(f"InputPerturbationAssumptions-{name}-{k}", name,
             lambda led, name=name, k=k: _ipa(led, **{name: BAD_POSITIVE[k]}), "InputPerturbationAssumptions")
for name in ("noise_structure", "condition", "l2_convention", "g_convention"):
    for k, v in {"unknown": "unknown", "none": None, "int": 1}.items():
        case(f"InputPerturbationAssumptions-{name}-{k}", name, lambda led, name=name, v=v: _ipa(led, **{name: v}),
             "InputPerturbationAssumptions")
for name in ("strict", "paper_literal_pl"):
    for k, v in {"str": "yes", "int": 1, "none": None, "nan": NAN}.items():
        case(f"InputPerturbationAssumptions-{name}-{k}", name, lambda led, name=name, v=v: _ipa(led, **{name: v}),
             "InputPerturbationAssumptions")
case("InputPerturbationAssumptions-paper_literal_pl-without-pl", "paper_literal_pl",
     lambda led: InputPerturbationAssumptions(paper_literal_pl=True), "InputPerturbationAssumptions")
case("InputPerturbationAssumptions-shared-private", "noise_structure",
     lambda led: _ip(led, mode="private", assumptions=InputPerturbationAssumptions(noise_structure="shared")),
     "InputPerturbationAssumptions")
for k, v in {"one": 1, "str": "2", "float": 2.5}.items():
    case(f"InputPerturbation-num_classes-{k}", "num_classes", lambda led, v=v: _ip(led, num_classes=v),
         "InputPerturbation")
case("InputPerturbation-n-one", "n", lambda led: _ip(led, n=1), "InputPerturbation")
case("InputPerturbation-batch_size-str", "batch_size", lambda led: _ip(led, batch_size="8"), "InputPerturbation")
case("InputPerturbation-label_epsilon-reference", "label_epsilon", lambda led: _ip(led, mode="reference", label_epsilon=0.1),
     "InputPerturbation")
case("InputPerturbation-label_epsilon-too_big", "label_epsilon",
     lambda led: _ip(led, mode="private", label_epsilon=1.0), "InputPerturbation")
case("InputPerturbation-seed-float", "seed", lambda led: _ip(led, seed=1.5), "InputPerturbation")
for k, v in {"str": "ledger", "duck": NotALedger()}.items():
    case(f"InputPerturbation-ledger-{k}", "ledger", lambda led, v=v: _ip(None, ledger=v), "InputPerturbation")


def _ip_x(kind):
    x, _ = _ip_data()
    x = x.copy()
    if kind == "nan":
        x[2, 1] = np.nan
    elif kind == "inf":
        x[2, 1] = -np.inf
    elif kind == "complex":
        x = x + 0.5j
    elif kind == "object":
        x = x.astype(object)
    elif kind == "str":
        x = x.astype(str)
    elif kind == "empty":
        x = x[:0]
    elif kind == "3d":
        x = x[:, :, None]
    elif kind == "norm":
        x = x * 5
    elif kind == "one_row":
        x = x[:1]
    return x


for kind in ("nan", "inf", "complex", "object", "str", "empty", "3d", "norm", "one_row"):
    case(f"InputPerturbation.perturb-x-{kind}", "x",
         lambda led, kind=kind: _ip(led).perturb(_ip_x(kind), _ip_data()[1][:len(_ip_x(kind))]), "InputPerturbation")
for k, v in {"three_classes": np.arange(N) % 3, "nan": np.full(N, np.nan), "short": np.zeros(N - 1),
             "str": np.array(["a"] * N), "complex": np.zeros(N) + 1j}.items():
    case(f"InputPerturbation.perturb-y-{k}", "y", lambda led, v=v: _ip(led).perturb(_ip_data()[0], v),
         "InputPerturbation")
case("InputPerturbation.perturb-n-mismatch", "n", lambda led: _ip(led, n=N + 1).perturb(*_ip_data()),
     "InputPerturbation")
case("InputPerturbation.fit-x_noisy-raw", "x_noisy",
     lambda led: _fit_raw_ip(led), "InputPerturbation")


def _fit_raw_ip(led):
    ip = _ip(None)
    ip.perturb(*_ip_data())
    x, y = _ip_data()
    ip.fit(ip.make_linear_model(), x, y)


case("InputPerturbation.fit-fit_kwargs", "validation_split",
     lambda led: _fit_split_ip(), "InputPerturbation")


def _fit_split_ip():
    ip = _ip(None)
    xn, yn = ip.perturb(*_ip_data())
    ip.fit(ip.make_linear_model(), xn, yn, validation_split=0.2)


case("InputPerturbation.make_linear_model-d", "d", lambda led: _ip(led).make_linear_model("5"), "InputPerturbation")

# Output perturbation: compute_bounds and DPPredictor (charges a query budget, records answers)
for k, v in BAD_INT.items():
    case(f"compute_bounds-n_train-{k}", "n_train", lambda led, v=v: compute_bounds(_op_model(), n_train=v),
         "compute_bounds")
for k in ("nan", "neg", "str", "bool"):
    case(f"compute_bounds-l2-{k}", "l2", lambda led, k=k: compute_bounds(_op_model(), 100, l2=BAD_POSITIVE[k]),
         "compute_bounds")
    case(f"compute_bounds-input_bound-{k}", "input_bound",
         lambda led, k=k: compute_bounds(_op_model(), 100, input_bound=BAD_POSITIVE[k]), "compute_bounds")
for name in ("lambda_convention", "sensitivity_mode"):
    case(f"compute_bounds-{name}-unknown", name, lambda led, name=name: compute_bounds(_op_model(), 100,
                                                                                       **{name: "x"}),
         "compute_bounds")
for k, make in BAD_MODELS.items():
    case(f"compute_bounds-model-{k}", "model", lambda led, make=make: compute_bounds(make(), 100), "compute_bounds")


def _predictor(led, **kw):
    acct = kw.pop("accountant", None) or QueryBudgetAccountant(1.0, max_queries=10)
    args = dict(noise="laplace", mode="private", seed=0, ledger=led)
    args.update(kw)
    return DPPredictor(_op_model(), _op_bounds(), acct, **args), acct


for name, v in {"noise": "uniform", "gaussian_split": "other", "mode": "some"}.items():
    case(f"DPPredictor-{name}-unknown", name, lambda led, name=name, v=v: _predictor(led, **{name: v}), "DPPredictor")
case("DPPredictor-bounds-dict", "bounds",
     lambda led: DPPredictor(_op_model(), {}, QueryBudgetAccountant(1.0, max_queries=10), ledger=led), "DPPredictor")
case("DPPredictor-accountant-float", "accountant", lambda led: DPPredictor(_op_model(), _op_bounds(), 1.0, ledger=led),
     "DPPredictor")
for k, v in {"str": "ledger", "duck": NotALedger()}.items():
    case(f"DPPredictor-ledger-{k}", "ledger", lambda led, v=v: _predictor(None, ledger=v), "DPPredictor")
case("DPPredictor-seed-str", "seed", lambda led: _predictor(led, seed="1"), "DPPredictor")
case("DPPredictor-logits_model-str", "model",
     lambda led: DPPredictor("m", _op_bounds(), QueryBudgetAccountant(1.0, max_queries=10), ledger=led), "DPPredictor")


def _query(led, x):
    pred, acct = _predictor(led)
    try:
        pred.predict_proba(x)
    finally:
        assert acct.spent == 0, "a refused query must not be charged"


for k, x in {"nan": np.full((2, 5), np.nan), "complex": np.zeros((2, 5)) + 1j, "str": np.full((2, 5), "a"),
             "wide": np.zeros((2, 6)), "range": np.full((2, 5), 9.0), "empty": np.zeros((0, 5)),
             "object": np.zeros((2, 5), dtype=object), "none": None}.items():
    case(f"DPPredictor.predict_proba-x-{k}", "x", lambda led, x=x: _query(led, x), "DPPredictor")
case("DPPredictor.release-k", "k", lambda led: _predictor(led)[0].release("3"), "DPPredictor")

# Query budget
for k, v in BAD_EPSILON.items():
    case(f"QueryBudgetAccountant-total_epsilon-{k}", "total_epsilon",
         lambda led, v=v: QueryBudgetAccountant(v, max_queries=10), "QueryBudgetAccountant")
    case(f"QueryBudgetAccountant-per_query_epsilon-{k}", "per_query_epsilon",
         lambda led, v=v: QueryBudgetAccountant(1.0, per_query_epsilon=v), "QueryBudgetAccountant")
for k, v in BAD_INT.items():
    case(f"QueryBudgetAccountant-max_queries-{k}", "max_queries",
         lambda led, v=v: QueryBudgetAccountant(1.0, max_queries=v), "QueryBudgetAccountant")
case("QueryBudgetAccountant-composition", "composition",
     lambda led: QueryBudgetAccountant(1.0, max_queries=3, composition="advanced"), "QueryBudgetAccountant")
case("QueryBudgetAccountant-max_queries-both", "max_queries",
     lambda led: QueryBudgetAccountant(1.0, max_queries=3, per_query_epsilon=0.1), "QueryBudgetAccountant")
for k, v in {"zero": 0, "neg": -1, "float": 1.5, "str": "1", "bool": True}.items():
    case(f"QueryBudgetAccountant.charge-queries-{k}", "queries",
         lambda led, v=v: QueryBudgetAccountant(1.0, max_queries=3).charge(v), "QueryBudgetAccountant")
# a mistyped directory must not silently start a fresh budget; a directory is not a state file
ABSENT_DIR = os.path.join(tempfile.gettempdir(), "tfdpmech-absent-directory-7c1e")
case("QueryBudgetAccountant-state_path-missing_directory", "state_path",
     lambda led: QueryBudgetAccountant(1.0, max_queries=3, state_path=os.path.join(ABSENT_DIR, "budget.json")),
     "QueryBudgetAccountant")
case("QueryBudgetAccountant-state_path-directory", "state_path",
     lambda led: QueryBudgetAccountant(1.0, max_queries=3, state_path=tempfile.gettempdir()), "QueryBudgetAccountant")
case("PrivacyLedger.load-path-directory", "directory", lambda led: PrivacyLedger.load(tempfile.gettempdir()),
     "PrivacyLedger")

# Ledger, releases, callbacks
for k, v in {"str": "ledger", "none": None, "duck": NotALedger(), "dict": {}}.items():
    case(f"PrivacyBudget-ledger-{k}", "ledger", lambda led, v=v: PrivacyBudget(v), "PrivacyBudget")
case("PrivacyLedger.record-release-dict", "release", lambda led: led.record({"epsilon_claimed": 1.0}), "PrivacyLedger")
case("PrivacyLedger-releases-str", "release", lambda led: PrivacyLedger(["x"]), "PrivacyLedger")
for k, v in {"str": "1", "neg": -1.0, "nan": NAN, "bool": True, "huge_int": 10**400, "complex": 1j}.items():
    case(f"Release-epsilon_claimed-{k}", "epsilon_claimed", lambda led, v=v: _release(epsilon_claimed=v), "Release")
    case(f"Release-epsilon_provable-{k}", "epsilon_provable", lambda led, v=v: _release(epsilon_provable=v),
         "Release")
for k, v in {"one": 1.0, "neg": -0.1, "str": "0", "nan": NAN}.items():
    case(f"Release-delta-{k}", "delta", lambda led, v=v: _release(delta=v), "Release")
case("Release-per_epoch-str", "per_epoch", lambda led: _release(per_epoch="no"), "Release")
case("Release-basis-int", "basis", lambda led: _release(basis=3), "Release")
for k, v in {"str": "2", "neg": -3, "nan": NAN, "bool": True}.items():
    case(f"PrivacyLedger.epsilon_claimed-epochs-{k}", "epochs", lambda led, v=v: led.epsilon_claimed(v),
         "PrivacyLedger")
for k, v in {"str": "1", "nan": NAN, "neg": -1.0}.items():
    case(f"format_epsilon-claimed-{k}", "claimed", lambda led, v=v: format_epsilon(v, 1.0), "format_epsilon")
case("format_epsilon-delta-str", "delta", lambda led: format_epsilon(1.0, 1.0, "0"), "format_epsilon")

# AFRRS (region budgets), the reference classes (the authors' code paths), BatchStatisticsNormalization
def _afrrs(led, cls=AFRRS, **kw):
    args = dict(eps1=0.2, eps2=0.2, eps3=0.2, batch_size=20, seed=0, ledger=led)
    args.update(kw)
    return cls(**args)


for k, v in BAD_EPSILON.items():
    case(f"AFRRS-eps2-{k}", "eps2", lambda led, v=v: _afrrs(led, eps2=v), "AFRRS")
for k, v in {"nan": NAN, "str": "0.1", "bool": True, "complex": 1j, "list": [0.1]}.items():
    case(f"AFRRS-gamma-{k}", "gamma", lambda led, v=v: _afrrs(led, gamma=v), "AFRRS")
    case(f"AFRRSReference-gamma-{k}", "gamma", lambda led, v=v: _afrrs(led, AFRRSReference, gamma=v), "AFRRSReference")
for k in ("zero", "float", "str", "bool"):
    case(f"AFRRS-n_regions-{k}", "n_regions", lambda led, k=k: _afrrs(led, n_regions=BAD_INT[k]), "AFRRS")
case("AFRRS-mode", "mode", lambda led: _afrrs(led, mode="authors"), "AFRRS")
case("AdLM-mode", "mode", lambda led: _adlm(led, mode="authors"), "AdLM")
case("AdLM-mode-reference", "mode", lambda led: _adlm(led, mode="reference"), "AdLM")
case("AFRRS-mode-reference", "mode", lambda led: _afrrs(led, mode="reference"), "AFRRS")
case("AdLMReference-noise_mode", "noise_mode", lambda led: _adlm(led, AdLMReference, noise_mode="shared_frozen"),
     "AdLMReference")
for name in ("delta2", "learning_rate"):
    for k in ("nan", "inf", "neg", "str", "bool"):
        case(f"AdLMReference-{name}-{k}", name,
             lambda led, name=name, k=k: _adlm(led, AdLMReference, **{name: BAD_POSITIVE[k]}), "AdLMReference")
for k in ("zero", "float", "str", "bool"):
    case(f"AdLMReference-batch_size-{k}", "batch_size", lambda led, k=k: _adlm(led, AdLMReference, batch_size=BAD_INT[k]),
         "AdLMReference")
case("AdLMReference-ledger-duck", "ledger", lambda led: _adlm(None, AdLMReference, ledger=NotALedger()), "AdLMReference")
for kind in ("nan", "inf", "complex", "object", "str", "empty", "out_of_range", "none"):
    case(f"AFRRS.fit_relevance-x-{kind}", "x",
         lambda led, kind=kind: _afrrs(led).fit_relevance(relevance_model(), _features(kind), _labels()), "AFRRS")
    case(f"ILMReference.fit-x-{kind}", "x",
         lambda led, kind=kind: ILMReference(0.2, 0.2, 20, seed=0, ledger=led).fit(_features(kind), _labels(), steps=1),
         "ILMReference")
for k in ("zero", "float", "str", "bool"):
    case(f"ILMReference.fit-steps-{k}", "steps",
         lambda led, k=k: ILMReference(0.2, 0.2, 20, seed=0, ledger=led).fit(
             np.zeros((N, 28, 28, 1), np.float32), _labels(), steps=BAD_INT[k]), "ILMReference")


def _pcdbn_reference(led, **kw):
    args = dict(epsilon=0.5, batch_size=10, maps=(2, 2), pretrain_epochs=1, seed=0, ledger=led)
    args.update(kw)
    return PCDBNReference(**args)


for k, v in BAD_EPSILON.items():
    case(f"PCDBNReference-epsilon-{k}", "epsilon", lambda led, v=v: _pcdbn_reference(led, epsilon=v), "PCDBNReference")
for name in ("batch_size", "hidden_units", "filter_size"):
    for k in ("zero", "float", "str", "bool"):
        case(f"PCDBNReference-{name}-{k}", name, lambda led, name=name, k=k: _pcdbn_reference(led, **{name: BAD_INT[k]}),
             "PCDBNReference")
for k in ("neg", "float", "str", "bool"):
    case(f"PCDBNReference-pretrain_epochs-{k}", "pretrain_epochs",
         lambda led, k=k: _pcdbn_reference(led, pretrain_epochs=BAD_INT[k]), "PCDBNReference")
for k, v in {"str": "ab", "zero": (0, 2), "empty": (), "float": (2.5,), "int": 3}.items():
    case(f"PCDBNReference-maps-{k}", "maps", lambda led, v=v: _pcdbn_reference(led, maps=v), "PCDBNReference")
for name in ("pretrain_lr", "finetune_lr"):
    for k in ("nan", "neg", "str", "bool"):
        case(f"PCDBNReference-{name}-{k}", name, lambda led, name=name, k=k: _pcdbn_reference(led, **{name: BAD_POSITIVE[k]}),
             "PCDBNReference")
case("PCDBNReference-ledger-duck", "ledger", lambda led: _pcdbn_reference(None, ledger=NotALedger()), "PCDBNReference")
for kind in ("nan", "inf", "complex", "object", "str", "empty", "out_of_range", "none", "flat"):
    case(f"PCDBNReference.fit-x-{kind}", "x",
         lambda led, kind=kind: _pcdbn_reference(led).fit(_features(kind), _labels(), epochs=1), "PCDBNReference")
for k in ("zero", "float", "str", "bool"):
    case(f"PCDBNReference.fit-epochs-{k}", "epochs",
         lambda led, k=k: _pcdbn_reference(led).fit(_features("ok"), _labels(), epochs=BAD_INT[k]), "PCDBNReference")
for k in ("nan", "neg", "zero", "str", "bool"):
    case(f"BatchStatisticsNormalization-epsilon-{k}", "epsilon",
         lambda led, k=k: BatchStatisticsNormalization(BAD_POSITIVE[k]), "BatchStatisticsNormalization")
case("BatchStatisticsNormalization-trainable_affine-str", "trainable_affine",
     lambda led: BatchStatisticsNormalization(trainable_affine="yes"), "BatchStatisticsNormalization")

# pCDBN
def _cdbn(led, **kw):
    args = dict(num_classes=CLASSES, mode="private", epsilon=2.0, pretrain_epochs=1, batch_size=20, seed=0,
                ledger=led)
    args.update(kw)
    return PrivateCDBN(**args)


def _cdbn_model(led, model=None, **kw):
    """make_private(a one-layer cdbn_network, PrivateCDBN(...)), compiled."""
    network = model if model is not None else tfdpmech.cdbn_network([ConvRBM(2, 3, degree=3)], SHAPE, CLASSES)
    private = tfdpmech.make_private(network, _cdbn(led, **kw))
    private.compile()
    return private


for k, v in BAD_EPSILON.items():
    case(f"PrivateCDBN-epsilon-{k}", "epsilon", lambda led, v=v: _cdbn(led, epsilon=v), "PrivateCDBN")
for name in ("pretrain_epochs", "batch_size", "head_epochs", "num_classes", "neg_chains", "gibbs_steps",
             "max_monomials"):
    for k in ("zero", "float", "str", "bool"):
        case(f"PrivateCDBN-{name}-{k}", name, lambda led, name=name, k=k: _cdbn(led, **{name: BAD_INT[k]}),
             "PrivateCDBN")
for name in ("learning_rate", "head_learning_rate", "fc_scale", "head_ridge", "l1"):
    for k in ("nan", "neg", "str", "bool"):
        case(f"PrivateCDBN-{name}-{k}", name, lambda led, name=name, k=k: _cdbn(led, **{name: BAD_POSITIVE[k]}),
             "PrivateCDBN")
for k, v in {"over": (0.9, 0.9), "short": (1.0,), "neg": (-0.5, 1.5), "str": "half", "nan": (NAN, 0.5),
             "number": 0.5, "dict_keys": {"a": 1.0}, "dict_sum": {"crbm_layer_1": 5.0, "output_layer": 5.0}}.items():
    case(f"PrivateCDBN-split-{k}", "split", lambda led, v=v: _cdbn_model(led, split=v), "PrivateCDBN")
case("PrivateCDBN-mode", "mode", lambda led: _cdbn(led, mode="functional"), "PrivateCDBN")
case("PrivateCDBN-head_mechanism", "head_mechanism", lambda led: _cdbn(led, head_mechanism="gauss"), "PrivateCDBN")
for k, network in {"no_convrbm": lambda: keras.Sequential([keras.Input(SHAPE), keras.layers.Flatten(),
                                                           keras.layers.Dense(CLASSES)]),
                   "mlp": private_model, "unbuilt": lambda: keras.Sequential([ConvRBM(2, 3), keras.layers.Flatten(),
                                                                                keras.layers.Dense(CLASSES)])}.items():
    case(f"PrivateCDBN-model-{k}", "model", lambda led, network=network: _cdbn_model(led, network()), "PrivateCDBN")
for k, v in {"str": "ledger", "duck": NotALedger()}.items():
    case(f"PrivateCDBN-ledger-{k}", "ledger", lambda led, v=v: _cdbn(None, ledger=v), "PrivateCDBN")
for kind in ("nan", "inf", "complex", "object", "str", "empty", "out_of_range", "none", "flat"):
    case(f"PrivateCDBN.fit-x-{kind}", "x", lambda led, kind=kind: _cdbn_model(led).fit(_features(kind), _labels()),
         "PrivateCDBN")
for kind in ("nan", "soft", "short", "classes", "str", "complex"):
    case(f"PrivateCDBN.fit-y-{kind}", "y", lambda led, kind=kind: _cdbn_model(led).fit(_ok_x(), _labels(kind)),
         "PrivateCDBN")
case("PrivateCDBN.fit-epochs", "epochs", lambda led: _cdbn_model(led).fit(_ok_x(), _labels(), epochs=2), "PrivateCDBN")
for k, kw in {"fc_units-zero": {"fc_units": 0}, "fc_units-float": {"fc_units": 2.5}, "num_classes-one": {"num_classes": 1},
              "head_mechanism": {"head_mechanism": "gauss"}, "input_shape": {"input_shape": "28x28"},
              "layers": {"layers": ["conv"]}}.items():
    args = dict(layers=[ConvRBM(2, 3)], input_shape=SHAPE, num_classes=CLASSES)
    case(f"cdbn_network-{k}", k.split("-")[0], lambda led, args={**args, **kw}: tfdpmech.cdbn_network(**args),
         "cdbn_network")


def _energy(led=None, **kw):
    args = dict(mode="private", epsilon=1.0, seed=0)
    args.update(kw)
    layer = args.pop("layer", None) or ConvRBM(2, 3, degree=3)
    return ChebyshevEnergy(layer, **args)


for k, v in BAD_EPSILON.items():
    case(f"ChebyshevEnergy-epsilon-{k}", "epsilon", lambda led, v=v: _energy(epsilon=v), "ChebyshevEnergy")
case("ChebyshevEnergy-layer-str", "layer", lambda led: _energy(layer="rbm"), "ChebyshevEnergy")
case("ChebyshevEnergy-mode", "mode", lambda led: _energy(mode="x"), "ChebyshevEnergy")
for k in ("nan", "neg", "str"):
    case(f"ChebyshevEnergy-l1-{k}", "l1", lambda led, k=k: _energy(l1=BAD_POSITIVE[k]), "ChebyshevEnergy")
for kind in ("nan", "complex", "str", "empty", "out_of_range"):
    case(f"ChebyshevEnergy.fit-x-{kind}", "x", lambda led, kind=kind: _energy().fit(_features(kind)),
         "ChebyshevEnergy")
for k in ("zero", "str", "float"):
    case(f"ChebyshevEnergy.fit-epochs-{k}", "epochs", lambda led, k=k: _energy().fit(_ok_x(), epochs=BAD_INT[k]),
         "ChebyshevEnergy")
    case(f"ChebyshevEnergy.fit-batch_size-{k}", "batch_size",
         lambda led, k=k: _energy().fit(_ok_x(), batch_size=BAD_INT[k]), "ChebyshevEnergy")

# losses and metrics
for k, v in BAD_EPSILON.items():
    case(f"FunctionalSoftmaxHead-epsilon-{k}", "epsilon", lambda led, v=v: FunctionalSoftmaxHead(3, epsilon=v),
         "FunctionalSoftmaxHead")
for k, v in {"one": 1, "str": "3", "float": 2.5, "bool": True}.items():
    case(f"FunctionalSoftmaxHead-num_classes-{k}", "num_classes",
         lambda led, v=v: FunctionalSoftmaxHead(v, epsilon=1.0), "FunctionalSoftmaxHead")
for k in ("nan", "neg", "str"):
    case(f"FunctionalSoftmaxHead-ridge-{k}", "ridge",
         lambda led, k=k: FunctionalSoftmaxHead(3, epsilon=1.0, ridge=BAD_POSITIVE[k]), "FunctionalSoftmaxHead")
for k, feats in {"nan": np.full((N, 4), np.nan), "complex": np.zeros((N, 4)) + 1j, "str": np.full((N, 4), "a"),
                 "range": np.full((N, 4), 2.0), "empty": np.zeros((0, 4)), "1d": np.zeros(N)}.items():
    case(f"FunctionalSoftmaxHead.fit-features-{k}", "features",
         lambda led, feats=feats: FunctionalSoftmaxHead(3, epsilon=1.0, seed=0).fit(feats, _labels()),
         "FunctionalSoftmaxHead")
for kind in ("nan", "soft", "short", "classes", "str"):
    case(f"FunctionalSoftmaxHead.fit-y-{kind}", "y",
         lambda led, kind=kind: FunctionalSoftmaxHead(3, epsilon=1.0, seed=0).fit(np.zeros((N, 4)), _labels(kind)),
         "FunctionalSoftmaxHead")
for k, v in BAD_INT.items():
    case(f"TaylorCrossEntropy-batch_size-{k}", "batch_size", lambda led, v=v: TaylorCrossEntropy(batch_size=v),
         "TaylorCrossEntropy")
for k in ("nan", "neg", "zero", "str", "bool", "huge_int"):
    case(f"ConvexifiedCrossEntropy-alpha-{k}", "alpha", lambda led, k=k: ConvexifiedCrossEntropy(BAD_POSITIVE[k]),
         "ConvexifiedCrossEntropy")
case("ConvexifiedCrossEntropy-mode", "mode", lambda led: ConvexifiedCrossEntropy(mode="x"), "ConvexifiedCrossEntropy")
# perturbed coefficients at a batch size nobody stated: refused by default (the recorded ε could be too low)
case("TaylorCrossEntropy-batch_size-unstated", "batch_size",
     lambda led: TaylorCrossEntropy()(np.zeros((2, 3, 3), np.float32), np.zeros((2, 3), np.float32)),
     "TaylorCrossEntropy")
case("TaylorCrossEntropy-y_true-rank", "y_true",
     lambda led: TaylorCrossEntropy()(np.zeros((2, 3, 3, 1), np.float32), np.zeros((2, 3), np.float32)),
     "TaylorCrossEntropy")
case("taylor_accuracy-y_true-classes", "y_true",
     lambda led: taylor_accuracy(np.zeros((2, 4), np.float32), np.zeros((2, 3), np.float32)), "taylor_accuracy")

# the functional-mechanism head on public or random features (heads/, features/)
@functools.lru_cache(maxsize=None)
def _random_feats():
    return tfdpmech.random_features(SHAPE, units=8, seed=0)


def _fm_head(**kw):
    args = dict(mechanism="gaussian", epsilon=1.0, delta=1e-5, seed=0)
    args.update(kw)
    features = args.pop("features", None) or _random_feats()
    return tfdpmech.FunctionalHead(features, CLASSES, **args)


for k, v in BAD_EPSILON.items():
    case(f"FunctionalHead-epsilon-{k}", "epsilon", lambda led, v=v: _fm_head(epsilon=v), "FunctionalHead")
for k, v in BAD_DELTA.items():
    case(f"FunctionalHead-delta-{k}", "delta", lambda led, v=v: _fm_head(delta=v), "FunctionalHead")
case("FunctionalHead-delta-laplace", "delta", lambda led: _fm_head(mechanism="laplace", delta=1e-5), "FunctionalHead")
case("FunctionalHead-mechanism-unknown", "mechanism", lambda led: _fm_head(mechanism="uniform"), "FunctionalHead")
case("FunctionalHead-features-model", "features", lambda led: _fm_head(features=relevance_model()), "FunctionalHead")
for k, v in {"one": 1, "str": "3", "float": 2.5, "bool": True}.items():
    case(f"FunctionalHead-num_classes-{k}", "num_classes",
         lambda led, v=v: tfdpmech.FunctionalHead(_random_feats(), v, epsilon=1.0, delta=1e-5), "FunctionalHead")
for name in ("ridge", "ridge_factor", "quadratic_weight"):
    for k in ("nan", "neg", "str", "bool"):
        case(f"FunctionalHead-{name}-{k}", name, lambda led, name=name, k=k: _fm_head(**{name: BAD_POSITIVE[k]}),
             "FunctionalHead")
case("FunctionalHead-nonnegative-str", "nonnegative", lambda led: _fm_head(nonnegative="yes"), "FunctionalHead")
case("FunctionalHead-batch_size-zero", "batch_size", lambda led: _fm_head(batch_size=0), "FunctionalHead")


def _fm_fit(x, y):
    head = _fm_head()
    before = len(head.ledger)  # the features' ε = 0 provenance
    try:
        head.fit(x, y)
    finally:
        assert len(head.ledger) == before and head.release is None, "a refused fit must not release"


for kind in ("nan", "inf", "complex", "object", "str", "empty", "flat", "none"):
    case(f"FunctionalHead.fit-x-{kind}", "x", lambda led, kind=kind: _fm_fit(_features(kind), _labels()),
         "FunctionalHead")
for kind in BAD_Y:
    case(f"FunctionalHead.fit-y-{kind}", "y", lambda led, kind=kind: _fm_fit(_ok_x(), _labels(kind)),
         "FunctionalHead")
for k, make in BAD_MODELS.items():
    if k != "subclassed":
        case(f"public_features-model-{k}", "model", lambda led, make=make: tfdpmech.public_features(make(), "x"),
             "public_features")
case("public_features-layer-missing", "layer", lambda led: tfdpmech.public_features(relevance_model(), "nolayer"),
     "public_features")
for name, bad in {"units": BAD_INT, "gamma": BAD_POSITIVE}.items():
    for k in ("zero", "str", "bool", "nan" if name == "gamma" else "float"):
        case(f"random_features-{name}-{k}", name,
             lambda led, name=name, k=k, bad=bad: tfdpmech.random_features(SHAPE, **{name: bad[k]}),
             "random_features")
case("random_features-seed-none", "seed", lambda led: tfdpmech.random_features(SHAPE, seed=None), "random_features")
case("random_features-input_shape-neg", "input_shape", lambda led: tfdpmech.random_features((-4, 4)),
     "random_features")
case("features.split_public-n_public-neg", "n_public",
     lambda led: tfdpmech.features.split_public(data.load("mnist_sample"), -5), "features")
case("accounting.laplace_scale-epsilon-str", "epsilon",
     lambda led: tfdpmech.accounting.gaussian.laplace_scale(1.0, "1"), "accounting")
case("accounting.gaussian_sigma-delta-one", "delta",
     lambda led: tfdpmech.accounting.gaussian.gaussian_sigma(1.0, 1.0, 1.0), "accounting")


# the output-perturbation head (an estimator like the functional head)
def _op_head(**kw):
    args = dict(epsilon=1.0, delta=1e-5, seed=0)
    args.update(kw)
    return tfdpmech.OutputPerturbationHead(_random_feats(), CLASSES, **args)


for k, v in BAD_EPSILON.items():
    case(f"OutputPerturbationHead-epsilon-{k}", "epsilon", lambda led, v=v: _op_head(epsilon=v),
         "OutputPerturbationHead")
for k, v in BAD_DELTA.items():
    case(f"OutputPerturbationHead-delta-{k}", "delta", lambda led, v=v: _op_head(delta=v), "OutputPerturbationHead")
case("OutputPerturbationHead-delta-gamma", "delta", lambda led: _op_head(mechanism="gamma"), "OutputPerturbationHead")
case("OutputPerturbationHead-mechanism-unknown", "mechanism", lambda led: _op_head(mechanism="laplace"),
     "OutputPerturbationHead")
for k, v in {"one": 1, "str": "3", "bool": True}.items():
    case(f"OutputPerturbationHead-num_classes-{k}", "num_classes", lambda led, v=v: tfdpmech.OutputPerturbationHead(
        _random_feats(), v, epsilon=1.0, delta=1e-5), "OutputPerturbationHead")
case("OutputPerturbationHead-features-model", "features",
     lambda led: tfdpmech.OutputPerturbationHead(relevance_model(), CLASSES, epsilon=1.0, delta=1e-5),
     "OutputPerturbationHead")

# layers
for k, v in {"str": "a", "nan": NAN, "bool": True, "out": 2.0}.items():
    case(f"UnitClip-low-{k}", "low", lambda led, v=v: UnitClip(low=v), "UnitClip")
    case(f"UnitClip-high-{k}", "high", lambda led, v=v: UnitClip(high=v if k != "out" else -2.0), "UnitClip")
for name in ("q", "alpha", "beta"):
    for k in ("str", "nan", "neg", "bool"):
        case(f"BoundedLRN-{name}-{k}", name, lambda led, name=name, k=k: BoundedLRN(**{name: BAD_POSITIVE[k]}),
             "BoundedLRN")
for k in ("str", "zero", "float"):
    case(f"BoundedLRN-size-{k}", "size", lambda led, k=k: BoundedLRN(size=BAD_INT[k]), "BoundedLRN")
for k, v in {"str": "a", "nan": NAN, "one": 1.0, "neg": -0.5}.items():
    case(f"BatchMinMax-momentum-{k}", "momentum", lambda led, v=v: BatchMinMax(momentum=v), "BatchMinMax")
for k in ("str", "zero", "nan"):
    case(f"BatchMinMax-epsilon-{k}", "epsilon", lambda led, k=k: BatchMinMax(epsilon=BAD_POSITIVE[k]), "BatchMinMax")
for k, v in {"str": "ab", "neg": (-2, 2), "float": (2.5, 2), "zero": (0, 3)}.items():
    case(f"InputNoise-feature_shape-{k}", "feature_shape", lambda led, v=v: InputNoise(feature_shape=v), "InputNoise")
for k, v in {"neg": [1.0, -0.5], "nan": [1.0, NAN], "str": ["a", "b"], "complex": [1j]}.items():
    case(f"InputNoise-scales-{k}", "scales", lambda led, v=v: InputNoise(scales=v), "InputNoise")
for k, v in {"short": (1.0,), "str": "ab", "reversed": (1.0, 0.0)}.items():
    case(f"InputNoise-clip-{k}", "clip", lambda led, v=v: InputNoise(feature_shape=(2,), clip=v), "InputNoise")
case("InputNoise-seed-str", "seed", lambda led: InputNoise(feature_shape=(2,), seed="1"), "InputNoise")
for k, v in {"nan": [NAN], "str": ["a"], "complex": [1j]}.items():
    case(f"PerturbedBias-b_bar-{k}", "b_bar", lambda led, v=v: PerturbedBias(b_bar=v), "PerturbedBias")
for k in ("str", "zero", "float"):
    case(f"PerturbedBias-units-{k}", "units", lambda led, k=k: PerturbedBias(units=BAD_INT[k]), "PerturbedBias")
for name in ("filters", "kernel_size", "strides", "pool_size", "degree"):
    for k in ("str", "zero", "float", "bool"):
        case(f"ConvRBM-{name}-{k}", name,
             lambda led, name=name, k=k: ConvRBM(**dict(dict(filters=2, kernel_size=3), **{name: BAD_INT[k]})),
             "ConvRBM")
for name in ("weight_bound", "visible_max", "z"):
    for k in ("str", "nan", "neg"):
        case(f"ConvRBM-{name}-{k}", name, lambda led, name=name, k=k: ConvRBM(2, 3, **{name: BAD_POSITIVE[k]}),
             "ConvRBM")
for name in ("padding", "approx", "normalizer", "pooling", "inference_activation"):
    case(f"ConvRBM-{name}-unknown", name, lambda led, name=name: ConvRBM(2, 3, **{name: "unknown"}), "ConvRBM")


def _neuron(**kw):
    args = dict(epsilon_query=1.0, delta_z=0.3, delta_p=1.0, num_classes=3)
    args.update(kw)
    return NoisyOutputNeuron(**args)


for k, v in BAD_EPSILON.items():
    case(f"NoisyOutputNeuron-epsilon_query-{k}", "epsilon_query", lambda led, v=v: _neuron(epsilon_query=v),
         "NoisyOutputNeuron")
for name in ("delta_z", "delta_p"):
    for k in ("str", "nan", "neg", "zero", "bool"):
        case(f"NoisyOutputNeuron-{name}-{k}", name, lambda led, name=name, k=k: _neuron(**{name: BAD_POSITIVE[k]}),
             "NoisyOutputNeuron")
case("NoisyOutputNeuron-delta_p-above", "delta_p", lambda led: _neuron(delta_p=2.0), "NoisyOutputNeuron")
for k in ("str", "zero", "float"):
    case(f"NoisyOutputNeuron-num_classes-{k}", "num_classes", lambda led, k=k: _neuron(num_classes=BAD_INT[k]),
         "NoisyOutputNeuron")
for name in ("noise", "gaussian_split", "mode", "compute_dtype"):
    case(f"NoisyOutputNeuron-{name}-unknown", name, lambda led, name=name: _neuron(**{name: "x"}), "NoisyOutputNeuron")
case("NoisyOutputNeuron-seed-str", "seed", lambda led: _neuron(seed="1"), "NoisyOutputNeuron")

# subpackages: data, models, allocation, noise, relevance, chebyshev, audit, validation
case("data.load-name-unknown", "name", lambda led: data.load("nonexistent_set"), "data")
case("data.load-name-int", "name", lambda led: data.load(5), "data")
case("data.load-test_size-neg", "test_size", lambda led: data.load("mnist_sample", test_size=-5), "data")
case("data.load-test_size-str", "test_size", lambda led: data.load("mnist_sample", test_size="5"), "data")
case("data.load-seed-str", "seed", lambda led: data.load("mnist_sample", seed="0"), "data")
for k, v in {"str": "a", "nan": NAN, "equal": 0.0}.items():
    case(f"data.scale_to_unit-high-{k}", "high", lambda led, v=v: data.scale_to_unit(np.ones(3), 0.0, v), "data")
case("data.scale_to_unit-x-complex", "x", lambda led: data.scale_to_unit(np.ones(3) + 1j, 0.0, 1.0), "data")
case("data.scale_to_unit-x-str", "x", lambda led: data.scale_to_unit(np.array(["a"]), 0.0, 1.0), "data")
case("data.read_idx-path-missing", "/nonexistent/file-idx3-ubyte",  # a missing file: FileNotFoundError naming it
     lambda led: data.read_idx("/nonexistent/file-idx3-ubyte"), "data", exc=FileNotFoundError)
for fn in ("mnist_cnn", "mlp", "standard_cnn", "standard_mlp"):
    for k in ("str", "one_class", "float"):
        v = {"str": "10", "one_class": 1, "float": 2.5}[k]
        case(f"models.{fn}-num_classes-{k}", "num_classes", lambda led, fn=fn, v=v: getattr(models, fn)(v), "models")
case("models.linear_model-d-str", "d", lambda led: models.linear_model("5"), "models")
case("models.linear_model-l2-neg", "l2", lambda led: models.linear_model(5, l2=-1.0), "models")
case("models.convexified_mlp-input_dim-zero", "input_dim", lambda led: models.convexified_mlp(0, 3), "models")
case("models.convexified_mlp-l2-str", "l2", lambda led: models.convexified_mlp(5, 3, l2="0.1"), "models")
case("allocation.get_allocation-allocation", "allocation", lambda led: allocation.get_allocation("x"), "allocation")
case("allocation.RelevanceAllocation-relevance-nan", "relevance",
     lambda led: allocation.RelevanceAllocation(np.full(4, np.nan)), "allocation")
case("allocation.RelevanceAllocation-floor-str", "floor",
     lambda led: allocation.RelevanceAllocation(np.ones(4), floor="x"), "allocation")
case("allocation.RelevanceAllocation-relevance-shape", "relevance",
     lambda led: allocation.RelevanceAllocation(np.ones(6)).ratios((2, 2)), "allocation")
case("noise.make_rng-seed-str", "seed", lambda led: noise.make_rng("0"), "noise")
case("noise.make_rng-seed-float", "seed", lambda led: noise.make_rng(1.5), "noise")
case("noise.laplace-scale-neg", "scale", lambda led: noise.laplace(-1.0, 3, noise.make_rng(0)), "noise")
case("noise.laplace-scale-nan", "scale", lambda led: noise.laplace(NAN, 3, noise.make_rng(0)), "noise")
case("noise.gaussian-sigma-str", "sigma", lambda led: noise.gaussian("a", 3, noise.make_rng(0)), "noise")
case("relevance.relevance_sensitivity-d-str", "d", lambda led: relevance.relevance_sensitivity("3", 10), "relevance")
case("relevance.normalize_per_example-r-1d", "r", lambda led: relevance.normalize_per_example(np.ones(3)),
     "relevance")
for k, v in BAD_EPSILON.items():
    case(f"relevance.private_relevance-epsilon-{k}", "epsilon",
         lambda led, v=v: relevance.private_relevance(relevance_model(), _ok_x(), _labels(), v, ledger=led),
         "relevance")
case("relevance.private_relevance-ledger-str", "ledger",
     lambda led: relevance.private_relevance(relevance_model(), _ok_x(), _labels(), 1.0, ledger="x"), "relevance")
for kind in ("nan", "complex", "str", "empty", "flat"):
    case(f"relevance.lrp_relevance-x-{kind}", "x",
         lambda led, kind=kind: relevance.lrp_relevance(relevance_model(), _features(kind), _labels()), "relevance")
for k, v in {"str": "7", "zero": 0, "float": 2.5}.items():
    case(f"chebyshev.check_degree-degree-{k}", "degree", lambda led, v=v: chebyshev.check_degree(v), "chebyshev")
case("chebyshev.approximation_alpha-approx", "approx", lambda led: chebyshev.approximation_alpha("x"), "chebyshev")
case("audit.split_target_and_shadows-n-neg", "n", lambda led: audit.split_target_and_shadows(100, -1, 2), "audit")
case("audit.split_target_and_shadows-k-str", "k", lambda led: audit.split_target_and_shadows(100, 10, "2"), "audit")
case("audit.ShadowModelAttack-num_classes-str", "num_classes", lambda led: audit.ShadowModelAttack("3"), "audit")
case("audit.ShadowModelAttack.fit-probs-nan", "probs",
     lambda led: audit.ShadowModelAttack(3).fit(np.full((4, 3), np.nan), np.zeros(4), np.zeros(4)), "audit")
case("audit.membership_advantage-pred_members-str", "pred_members",
     lambda led: audit.membership_advantage(np.array(["a"]), np.zeros(3)), "audit")
case("audit.tf_privacy_attack_floor-n_members-zero", "n_members",
     lambda led: audit.tf_privacy_attack_floor(0, 10, 3), "audit")
# one-run canary audit (Steinke, Nasr & Jagielski 2023)
for name in ("correct", "guesses", "m"):
    for k, v in {"neg": -1, "float": 2.5, "str": "3", "bool": True}.items():
        kwargs = dict(correct=3, guesses=5, m=10)
        kwargs[name] = v
        case(f"audit.epsilon_lower_bound-{name}-{k}", name,
             lambda led, kw=kwargs: audit.epsilon_lower_bound(kw["correct"], kw["guesses"], kw["m"]), "audit")
case("audit.epsilon_lower_bound-guesses-above_m", "guesses", lambda led: audit.epsilon_lower_bound(3, 20, 10), "audit")
for k, v in {"one": 1.0, "zero": 0.0, "str": "0.95", "nan": NAN}.items():
    case(f"audit.epsilon_lower_bound-confidence-{k}", "confidence",
         lambda led, v=v: audit.epsilon_lower_bound(3, 5, 10, confidence=v), "audit")
for k, v in {"one": 1.0, "neg": -0.1, "str": "0"}.items():
    case(f"audit.epsilon_lower_bound-delta-{k}", "delta",
         lambda led, v=v: audit.epsilon_lower_bound(3, 5, 10, delta=v), "audit")
for k, v in {"nan": np.full(6, np.nan), "str": np.array(["a"] * 6), "complex": np.zeros(6) + 1j,
             "2d": np.zeros((6, 2)), "empty": np.zeros(0)}.items():
    case(f"audit.audit_scores-scores-{k}", "scores",
         lambda led, v=v: audit.audit_scores(v, np.arange(6) % 2 == 0), "audit")
for k, v in {"short": np.ones(5, bool), "ints": np.arange(6), "str": np.array(["y"] * 6)}.items():
    case(f"audit.audit_scores-membership-{k}", "membership",
         lambda led, v=v: audit.audit_scores(np.linspace(0, 1, 6), v), "audit")
case("audit.audit_scores-k_plus-too_many", "k_plus",
     lambda led: audit.audit_scores(np.linspace(0, 1, 6), np.arange(6) % 2 == 0, k_plus=5, k_minus=5), "audit")
for fn in ("noise_canaries", "digits_canaries"):
    for k, v in {"zero": 0, "str": "10", "float": 2.5}.items():
        case(f"audit.{fn}-m-{k}", "m", lambda led, fn=fn, v=v: getattr(audit, fn)(v), "audit")
case("audit.noise_canaries-shape-neg", "shape", lambda led: audit.noise_canaries(4, shape=(-1, 2)), "audit")
case("audit.canary_audit-canaries_x-nan", "canaries_x",
     lambda led: audit.canary_audit(lambda x, y: None, lambda t, x, y: np.zeros(len(x)), np.full((6, 2), np.nan),
                                    np.zeros(6)), "audit")
case("audit.canary_audit-train_fn-str", "train_fn",
     lambda led: audit.canary_audit("train", lambda t, x, y: np.zeros(len(x)), np.zeros((6, 2)), np.zeros(6)), "audit")
case("validation.check_epsilon-epsilon-huge", "epsilon", lambda led: validation.check_epsilon(10**400), "validation")
case("validation.check_delta-delta-str", "delta", lambda led: validation.check_delta("0.1"), "validation")


# DP-SGD (engine "auto": tensorflow-privacy on TF 2.15, tfdpmech's own on Keras 3): constructor, compile,
# dataset -- the release is recorded at compile
def dp_case(case_id, arg, thunk):
    case(case_id, arg, thunk, "DPSGD")


def _dpsgd(led, **kw):
    from tfdpmech.mechanisms.dpsgd import ShuffledDPSGD
    args = dict(epsilon=2.0, delta=1e-3, batch_size=20, epochs=1, n=N, ledger=led)
    args.update(kw)
    return ShuffledDPSGD(**args)


def _dp_dataset(make, x, y):
    dp = make(None)
    dp.compile(models.standard_mlp(CLASSES, input_shape=SHAPE, first_units=4))
    dp.dataset(x, y)


def _dp_shared_cases(name, make, int_args):
    """The cases both DP-SGD classes share: ε, δ, the integer sizes, the ledger, the model, the dataset."""
    for k, v in BAD_EPSILON.items():
        dp_case(f"{name}-epsilon-{k}", "epsilon", lambda led, v=v: make(led, epsilon=v))
    for k, v in BAD_DELTA.items():
        dp_case(f"{name}-delta-{k}", "delta", lambda led, v=v: make(led, delta=v))
    for arg in int_args:
        for k, v in BAD_INT.items():
            dp_case(f"{name}-{arg}-{k}", arg, lambda led, arg=arg, v=v: make(led, **{arg: v}))
    for k, v in {"str": "ledger", "duck": NotALedger()}.items():
        dp_case(f"{name}-ledger-{k}", "ledger", lambda led, v=v: make(None, ledger=v))
    for k, build in BAD_MODELS.items():
        dp_case(f"{name}.compile-model-{k}", "model", lambda led, build=build: make(led).compile(build()))
    for kind in ("nan", "inf", "complex", "object", "str", "empty", "none"):
        dp_case(f"{name}.dataset-x-{kind}", "x", lambda led, kind=kind: _dp_dataset(make, _features(kind), _labels()))
    for kind in ("nan", "soft", "short", "classes", "str", "complex"):
        dp_case(f"{name}.dataset-y-{kind}", "y", lambda led, kind=kind: _dp_dataset(make, _ok_x(), _labels(kind)))
    dp_case(f"{name}.dataset-n-mismatch", "n", lambda led: _dp_dataset(make, _ok_x()[:20], _labels()[:20]))


_dp_shared_cases("ShuffledDPSGD", _dpsgd, ("batch_size", "epochs", "n"))
dp_case("ShuffledDPSGD-epochs-huge", "epochs", lambda led: _dpsgd(led, epochs=10**400))
dp_case("ShuffledDPSGD-batch_size-remainder", "batch_size", lambda led: _dpsgd(led, batch_size=30))
dp_case("ShuffledDPSGD-drop_remainder-str", "drop_remainder", lambda led: _dpsgd(led, batch_size=30, drop_remainder="yes"))
for k in ("nan", "neg", "str", "bool", "huge_int"):
    dp_case(f"ShuffledDPSGD-l2_norm_clip-{k}", "l2_norm_clip", lambda led, k=k: _dpsgd(led, l2_norm_clip=BAD_POSITIVE[k]))
    dp_case(f"ShuffledDPSGD-learning_rate-{k}", "learning_rate",
            lambda led, k=k: _dpsgd(led, optimizer=_opt(learning_rate=BAD_POSITIVE[k])))
for name in ("optimizer", "path"):
    dp_case(f"ShuffledDPSGD-{name}-unknown", name, lambda led, name=name: _dpsgd(led, **{name: "x"}))
dp_case("ShuffledDPSGD-num_microbatches-7", "num_microbatches", lambda led: _dpsgd(led, num_microbatches=7))
dp_case("ShuffledDPSGD-num_microbatches-str", "num_microbatches", lambda led: _dpsgd(led, num_microbatches="4"))
dp_case("ShuffledDPSGD.compile-model-batch_mixing", "BatchMinMax", lambda led: _dpsgd(led).compile(private_model()))
dp_case("ShuffledDPSGD.compile-loss-str", "loss",
        lambda led: _dpsgd(led).compile(models.standard_mlp(CLASSES, input_shape=SHAPE), loss="mse"))

dp_case("ShuffledDPSGD.dataset-y-ids_out_of_range", "y",
        lambda led: _dp_dataset(_dpsgd, _ok_x(), np.arange(N) % (CLASSES + 1)))
dp_case("ShuffledDPSGD.callback-verbose-str", "verbose", lambda led: _dpsgd(led).callback(verbose="1"))


# Poisson-sampled DP-SGD (the default DP-SGD of the comparison) and the stated recipe
def _opt(name="adam", **kw):
    from tfdpmech.mechanisms.dpsgd import OptimizerSettings
    return OptimizerSettings(name, **kw)


def _poisson(led, **kw):
    from tfdpmech.mechanisms.dpsgd import DPSGD
    args = dict(epsilon=2.0, delta=1e-3, expected_batch_size=10, epochs=1, n=N, ledger=led)
    args.update(kw)
    return DPSGD(**args)


_dp_shared_cases("DPSGD", _poisson, ("expected_batch_size", "epochs", "n"))
dp_case("DPSGD-expected_batch_size-above_n", "expected_batch_size",
        lambda led: _poisson(led, expected_batch_size=N + 1))
for k, v in {"zero": 0.0, "above": 1.5, "nan": NAN, "str": "0.1", "bool": True}.items():
    dp_case(f"DPSGD-sampling_probability-{k}", "sampling_probability",
            lambda led, v=v: _poisson(led, expected_batch_size=None, sampling_probability=v))
dp_case("DPSGD-noise_multiplier-both", "noise_multiplier", lambda led: _poisson(led, noise_multiplier=1.0))
for k in ("nan", "neg", "str", "bool"):
    dp_case(f"DPSGD-noise_multiplier-{k}", "noise_multiplier",
            lambda led, k=k: _poisson(led, epsilon=None, noise_multiplier=BAD_POSITIVE[k]))
    dp_case(f"DPSGD-l2_norm_clip-{k}", "l2_norm_clip", lambda led, k=k: _poisson(led, l2_norm_clip=BAD_POSITIVE[k]))
for k, v in {"one": 1.0, "neg": -0.5, "str": "0.9", "adam": 0.5}.items():
    dp_case(f"DPSGD-momentum-{k}", "momentum",
            lambda led, k=k, v=v: _poisson(led, optimizer=_opt("adam" if k == "adam" else "sgd", momentum=v)))
for k, v in {"one": 1.0, "zero": 0.0, "str": "0.99"}.items():
    dp_case(f"DPSGD-ema_momentum-{k}", "ema_momentum", lambda led, v=v: _poisson(led, optimizer=_opt(ema_momentum=v)))
dp_case("DPSGD-lr_schedule-unknown", "lr_schedule", lambda led: _poisson(led, optimizer=_opt(lr_schedule="x")))
for name in ("accountant", "optimizer", "path"):
    dp_case(f"DPSGD-{name}-unknown", name, lambda led, name=name: _poisson(led, **{name: "x"}))
# OptimizerSettings (built alone, and inside either constructor)
for k in ("nan", "inf", "neg", "zero", "str", "bool", "huge_int", "subnormal", "complex", "list"):
    case(f"OptimizerSettings-learning_rate-{k}", "learning_rate",
         lambda led, k=k: _opt(learning_rate=BAD_POSITIVE[k]), "dpsgd")
for k, v in {"one": 1.0, "neg": -0.5, "nan": NAN, "inf": INF, "str": "0.9", "bool": True, "complex": 0.5j,
             "none": None, "adam": 0.5}.items():
    case(f"OptimizerSettings-momentum-{k}", "momentum",
         lambda led, k=k, v=v: _opt("adam" if k == "adam" else "sgd", momentum=v), "dpsgd")
for k, v in {"one": 1.0, "zero": 0.0, "neg": -0.5, "nan": NAN, "str": "0.99", "bool": True, "complex": 0.5j}.items():
    case(f"OptimizerSettings-ema_momentum-{k}", "ema_momentum", lambda led, v=v: _opt(ema_momentum=v), "dpsgd")
for name in ("name", "lr_schedule"):
    for k, v in {"unknown": "x", "none": None, "int": 1, "upper": "ADAM" if name == "name" else "COSINE"}.items():
        case(f"OptimizerSettings-{name}-{k}", name, lambda led, name=name, v=v: _opt(**{name: v}), "dpsgd")
for field, value in {"momentum": 0.9, "lr_schedule": "cosine", "ema_momentum": 0.99}.items():
    dp_case(f"ShuffledDPSGD-OptimizerSettings-{field}", field,
            lambda led, field=field, value=value: _dpsgd(led, optimizer=_opt("sgd", **{field: value})))
for k, v in {"int": 1, "dict": {"name": "adam"}, "none": None, "class": keras.optimizers.Adam}.items():
    dp_case(f"DPSGD-optimizer-{k}", "optimizer", lambda led, v=v: _poisson(led, optimizer=v))
    dp_case(f"ShuffledDPSGD-optimizer-{k}", "optimizer", lambda led, v=v: _dpsgd(led, optimizer=v))
dp_case("DPSGD-unknown-keyword", "learnig_rate", lambda led: _poisson(led, learnig_rate=0.1))
dp_case("DPSGD-path-microbatch", "path", lambda led: _poisson(led, path="microbatch"))
for k, v in {"zero": 0.0, "above": 2.0, "str": "0.5", "nan": NAN}.items():
    case(f"dpsgd.PoissonSampler-q-{k}", "q", lambda led, v=v: tfdpmech.mechanisms.dpsgd.PoissonSampler(10, v), "dpsgd")
    case(f"dpsgd.padded_batch_size-q-{k}", "q", lambda led, v=v: tfdpmech.mechanisms.dpsgd.padded_batch_size(10, v), "dpsgd")
case("dpsgd.PoissonSampler-n-str", "n", lambda led: tfdpmech.mechanisms.dpsgd.PoissonSampler("10", 0.5), "dpsgd")
case("dpsgd.poisson_dataset-steps_per_epoch-zero", "steps_per_epoch",
     lambda led: tfdpmech.mechanisms.dpsgd.poisson_dataset(np.zeros((4, 2)), np.zeros(4), 0.5, 0), "dpsgd")
case("dpsgd.poisson_dataset-y-short", "y",
     lambda led: tfdpmech.mechanisms.dpsgd.poisson_dataset(np.zeros((4, 2)), np.zeros(3), 0.5, 2), "dpsgd")
dp_case("dpsgd.make_dpsgd-sampling-unknown", "sampling",
        lambda led: tfdpmech.mechanisms.dpsgd.make_dpsgd(1.0, 1e-5, 1000, sampling="uniform", ledger=led))
for k, v in BAD_EPSILON.items():
    dp_case(f"dpsgd.make_dpsgd-epsilon-{k}", "epsilon", lambda led, v=v: tfdpmech.mechanisms.dpsgd.make_dpsgd(v, 1e-5, 2000,
                                                                                                  ledger=led))
case("dpsgd.tanh_mlp-num_classes-str", "num_classes", lambda led: tfdpmech.mechanisms.dpsgd.tanh_mlp("10"), "dpsgd")
case("dpsgd.tanh_mlp-input_scaling-unknown", "input_scaling", lambda led: tfdpmech.mechanisms.dpsgd.tanh_mlp(input_scaling="x"),
     "dpsgd")


# --- the test ----------------------------------------------------------------------------------------------------
# --- the mechanism contract: prepare, PreparedFit.fit and the release primitive -------------------------------------
def _contract_release():
    return _release(component="stat", epsilon_claimed=1.0, epsilon_provable=1.0)


# make_private: the one entry point of the training mechanisms
case("make_private-model-layer", "model",
     lambda led: tfdpmech.make_private(keras.layers.Dense(3), tfdpmech.DPSGD(1.0, 1e-5, 10, 1, 100, ledger=led)),
     "make_private")
case("make_private-mechanism-dict", "mechanism", lambda led: tfdpmech.make_private(private_model(), {"epsilon": 1.0}),
     "make_private")
case("make_private-mechanism-head", "mechanism",
     lambda led: tfdpmech.make_private(private_model(), _fm_head()), "make_private")
case("make_private-option-unknown", "relevance",
     lambda led: tfdpmech.make_private(private_model(), _adlm(led), relevance=None), "make_private")
case("make_private-fit-no-relevance-model", "relevance_model",
     lambda led: _compiled(tfdpmech.make_private(private_model(), _adlm(led))).fit(_ok_x(), _labels()),
     "make_private")
case("make_private-fit-before-compile", "compile",
     lambda led: tfdpmech.make_private(private_model(), _adlm(led)).fit(_ok_x(), _labels()), "make_private",
     exc=RuntimeError)


def _compiled(model):
    model.compile()
    return model


case("Mechanism-prepare-no-relevance-model", "relevance_model",
     lambda led: _adlm(led).prepare(private_model(), _ok_x(), _labels()), "Mechanism")
case("Mechanism-prepare-head-with-model", "model",
     lambda led: tfdpmech.FunctionalHead(None, 3, mechanism="laplace", epsilon=1.0).prepare(private_model(), _ok_x(),
                                                                                       _labels()), "Mechanism")
case("Mechanism-prepare-head-no-data", "x",
     lambda led: tfdpmech.FunctionalHead(None, 3, mechanism="laplace", epsilon=1.0).prepare(), "Mechanism")
case("Mechanism-prepare-cdbn-without-model", "model",
     lambda led: tfdpmech.PrivateCDBN(epsilon=1.0, ledger=led).prepare(x=_ok_x(), y=_labels()), "Mechanism")
case("PrivateCDBN-mode-reference", "mode", lambda led: tfdpmech.PrivateCDBN(mode="reference", epsilon=1.0),
     "PrivateCDBN")
case("PreparedFit-fit-other-epochs", "epochs",
     lambda led: tfdpmech.PreparedFit(private_model(), [0.0], epochs=2).fit(epochs=3), "PreparedFit")
case("PreparedFit-fit-batch-size", "batch_size",
     lambda led: tfdpmech.PreparedFit(private_model(), [0.0], epochs=2).fit(batch_size=7), "PreparedFit")
case("contract.release-value-without-rng", "value",
     lambda led: tfdpmech.contract.release(led, _contract_release(), value=np.zeros(3)),
     "contract")
case("contract.release-rng-without-value", "value",
     lambda led: tfdpmech.contract.release(led, _contract_release(), rng=np.random.default_rng(0)), "contract")


# replace_batch_norm: GroupNormalization in place of each trainable BatchNormalization
def _bn_model():
    return keras.Sequential([keras.Input(SHAPE), keras.layers.Conv2D(4, 2), keras.layers.BatchNormalization(),
                             keras.layers.Flatten(), keras.layers.Dense(CLASSES)])


class _SubclassedBatchNorm(keras.Model):
    def __init__(self):
        super().__init__()
        self.norm, self.head = keras.layers.BatchNormalization(), keras.layers.Dense(CLASSES)

    def call(self, x, training=None):
        return self.head(self.norm(x, training=training))


def _subclassed_bn_model():
    model = _SubclassedBatchNorm()
    model(np.zeros((1, 4), np.float32))
    return model


_replace_batch_norm = tfdpmech.mechanisms.dpsgd.replace_batch_norm
case("replace_batch_norm-model-layer", "model",
     lambda led: _replace_batch_norm(keras.layers.BatchNormalization()), "replace_batch_norm")
case("replace_batch_norm-model-subclassed", "model",
     lambda led: _replace_batch_norm(_subclassed_bn_model()), "replace_batch_norm")
case("replace_batch_norm-model-unbuilt", "model",
     lambda led: _replace_batch_norm(keras.Sequential([keras.layers.BatchNormalization()])), "replace_batch_norm")
for _k, _v in {"not-dividing": 3, "zero": 0, "negative": -2, "text": "4", "float": 2.0, "bool": True,
               "nan": float("nan")}.items():
    case(f"replace_batch_norm-groups-{_k}", "groups",
         lambda led, v=_v: _replace_batch_norm(_bn_model(), groups=v, verbose=False), "replace_batch_norm")
case("replace_batch_norm-verbose-text", "verbose",
     lambda led: _replace_batch_norm(_bn_model(), verbose="yes"), "replace_batch_norm")


# resume: a loaded model continues the DP-SGD run its optimizer carries
def _model_with_run(led):
    model = tfdpmech.make_private(keras.Sequential([keras.Input((3,)), keras.layers.Dense(CLASSES)]),
                                  _poisson(led, ledger=None))
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(np.zeros((N, 3), np.float32), np.zeros(N, np.int64), verbose=0)  # one epoch of its run, saved with it
    return model


case("resume-model-layer", "model", lambda led: tfdpmech.resume(keras.layers.Dense(3)), "resume")
case("resume-model-without-run", "model", lambda led: tfdpmech.resume(private_model()), "resume")
for _k, _v in {"text": "1", "negative": -1, "float": 1.5}.items():
    case(f"resume-seed-{_k}", "seed", lambda led, v=_v: tfdpmech.resume(_model_with_run(led), seed=v), "resume")
for _k, _v in {"zero": 0, "negative": -4, "float": 2.5, "text": "8", "bool": True}.items():
    dp_case(f"DPSGD-physical_batch_size-{_k}", "physical_batch_size",
            lambda led, v=_v: _poisson(led, physical_batch_size=v))


def _two_outputs():
    inputs = keras.Input((3,))
    return keras.Model(inputs, [keras.layers.Dense(CLASSES, name="cls")(inputs), keras.layers.Dense(1, name="reg")(inputs)])


_CLS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
for _k, _loss, _weights in (("unknown-output", {"cls": _CLS, "other": keras.losses.MeanSquaredError()}, None),
                            ("too-few", [_CLS], None), ("not-a-loss", {"cls": "mse"}, None),
                            ("none-at-all", {"cls": None, "reg": None}, None)):
    dp_case(f"DPSGD.compile-loss-{_k}", "loss",
            lambda led, lo=_loss, w=_weights: tfdpmech.make_private(_two_outputs(), _poisson(led)).compile(loss=lo))
for _k, _w in {"negative": {"cls": -1.0}, "nan": {"cls": NAN}, "text": {"cls": "1"}, "single-loss": None}.items():
    dp_case(f"DPSGD.compile-loss_weights-{_k}", "loss_weights",
            lambda led, w=_w: tfdpmech.make_private(_two_outputs(), _poisson(led)).compile(
                loss={"cls": _CLS, "reg": keras.losses.MeanSquaredError()} if w is not None else _CLS,
                loss_weights=w if w is not None else [1.0, 2.0]))

def _names_argument(message: str, arg: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(arg)}(?![A-Za-z0-9_])", message) is not None


@pytest.mark.parametrize("arg, thunk, entry, exc", CASES)
def test_hostile_input_is_refused_with_a_named_error(arg, thunk, entry, exc):
    ledger = PrivacyLedger()
    with pytest.raises(exc) as info:
        thunk(ledger)
    message = str(info.value)
    assert _names_argument(message, arg), f"the message does not name {arg!r}: {message}"
    assert len(ledger) == 0, f"budget was spent before the refusal: {ledger.releases}"


def test_every_public_entry_point_is_covered():
    public = {name: getattr(tfdpmech, name) for name in tfdpmech.__all__}
    modules = {name for name, obj in public.items() if type(obj).__name__ == "module"}
    entry_points = {name for name, obj in public.items() if name not in modules and callable(obj)
                    and not (isinstance(obj, type) and issubclass(obj, BaseException))}
    # subpackages whose public callables are all re-exported at the top level (covered by name above)
    namespaces = {"accounting", "layers", "losses", "mechanisms", "metrics"}
    covered = {p.values[2] for p in CASES}
    missing = sorted((entry_points | (modules - namespaces)) - covered)
    assert not missing, f"public entry points without a hostile-input case: {missing}"
    assert len(CASES) >= 800


# --- the command line ------------------------------------------------------------------------------------------
CLI_CASES = {
    "epsilons-text": (["--epsilons", "abc"], "--epsilons"),
    "epsilons-negative": (["--epsilons", "-1"], "epsilon"),
    "epsilons-zero": (["--epsilons", "0"], "epsilon"),
    "epsilons-nan": (["--epsilons", "nan"], "epsilon"),
    "epsilons-inf": (["--epsilons", "inf"], "epsilon"),
    "epsilons-huge": (["--epsilons", "1e400"], "epsilon"),
    "epsilons-subnormal": (["--epsilons", "5e-324"], "epsilon"),
    "epsilons-empty": (["--epsilons", ","], "ε"),
    "delta-zero": (["--delta", "0"], "delta"),
    "delta-one": (["--delta", "1"], "delta"),
    "delta-text": (["--delta", "small"], "--delta"),
    "epochs-zero": (["--epochs", "0"], "epochs"),
    "epochs-float": (["--epochs", "1.5"], "--epochs"),
    "batch-size-neg": (["--batch-size", "-2"], "batch_size"),
    "seeds-text": (["--seeds", "a"], "--seeds"),
    "methods-unknown": (["--methods", "nosuchmethod"], "nosuchmethod"),
    "dataset-unknown": (["--dataset", "nosuchdata"], "nosuchdata"),
    "model-unknown": (["--model", "resnet"], "model"),
    "public-neg": (["--public", "-5"], "public"),
    "audit-unknown": (["--audit", "xray"], "audit"),
    "preset-unknown": (["--preset", "nosuchpreset"], "nosuchpreset"),
    "learning-rate-text": (["--learning-rate", "fast"], "--learning-rate"),
}


@pytest.mark.parametrize("argv, arg", list(CLI_CASES.values()), ids=list(CLI_CASES))
def test_compare_cli_refuses_hostile_flags(tmp_path, capsys, argv, arg):
    from tfdpmech.cli import main

    out = tmp_path / "results"
    try:
        status = main(["compare", "--quick", "--quiet", "--out", str(out), *argv])
    except SystemExit as exc:  # argparse: a flag that does not parse
        status = exc.code
    err = capsys.readouterr().err
    assert status == 2, err
    assert arg in err, f"the error does not name {arg!r}: {err}"
    assert not out.exists(), "nothing may be trained or written before the flags are checked"


def test_a_mistyped_budget_directory_is_not_created(tmp_path):
    path = tmp_path / "no_such_dir" / "budget.json"
    with pytest.raises(ValueError, match="does not exist") as info:
        QueryBudgetAccountant(1.0, max_queries=3, state_path=path)
    assert "os.makedirs" in str(info.value)
    assert not path.parent.exists()


def test_a_ledger_path_that_is_a_directory_says_so(tmp_path):
    with pytest.raises(ValueError, match="is a directory; pass the path of the ledger JSON file") as info:
        PrivacyLedger.load(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_compare_blames_the_batch_size_it_was_given(tmp_path, capsys):
    """--batch-size above the whole training split names --batch-size, not the --public that was not passed."""
    from tfdpmech.cli import main

    out = tmp_path / "results"
    status = main(["compare", "--quick", "--quiet", "--methods", "nonprivate", "--audit", "none",
                   "--batch-size", "100000", "--out", str(out)])
    err = capsys.readouterr().err
    assert status != 0
    assert "--batch-size" in err and "batch_size=100000" in err and "--public" not in err, err
    assert not out.exists()


BENCH_CASES = {
    "max-private-negative": (["--max-private", "-5"], "max_private"),
    "max-private-text": (["--max-private", "many"], "--max-private"),
    "methods-unknown": (["--methods", "nosuchmethod"], "nosuchmethod"),
    "epsilon-negative": (["--epsilon", "-1"], "epsilon"),
    "epsilon-nan": (["--epsilon", "nan"], "epsilon"),
    "epochs-zero": (["--epochs", "0"], "epochs"),
    "repeats-zero": (["--repeats", "0"], "repeats"),
}


@pytest.mark.parametrize("argv, arg", list(BENCH_CASES.values()), ids=list(BENCH_CASES))
def test_bench_cli_refuses_hostile_flags_as_compare_does(tmp_path, capsys, argv, arg):
    from tfdpmech.cli import main

    out = tmp_path / "bench.json"
    try:
        status = main(["bench", "--no-memory", "--out", str(out), *argv])
    except SystemExit as exc:  # argparse: a flag that does not parse
        status = exc.code
    err = capsys.readouterr().err
    assert status == 2, err
    assert arg in err, f"the error does not name {arg!r}: {err}"
    assert "Traceback" not in err
    assert not out.exists(), "nothing may be trained or written before the flags are checked"
