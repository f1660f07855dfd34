"""Side-by-side runner: every method × ε × seed on the same split, model family and test set.

Each method is an entry of :data:`METHODS`; a new mechanism joins with one
:func:`register_method` call. A method's ``prepare`` function does the private (once-only)
work and returns a compiled model, its training dataset and its ledger; the runner then trains
all methods the same way and measures the same things: test accuracy per epoch, claimed and
provable ε, δ, wall time per epoch, examples/s, peak memory and, when tensorflow-privacy's
attack code is installed, the membership-inference advantage of its threshold and
logistic-regression attacks (members: private training records; non-members: the test set).

Output perturbation (Lu et al.) trains without noise and privatises every answer: its ε is per
query, not per training run, and the report says so.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from . import data as data_module
from . import models
from .accounting.ledger import PrivacyLedger
from .losses import TaylorCrossEntropy, taylor_coefficients
from .mechanisms import AdLM, ILM
from .validation import check_delta, check_epsilon, check_positive_int

__all__ = ["CompareConfig", "Prepared", "METHODS", "register_method", "run_comparison", "MODEL_FAMILIES",
           "available_default_methods"]

# model family -> (private model builder for the noise-once mechanisms, standard builder for DP-SGD)
MODEL_FAMILIES = {
    "mlp": (models.mlp, models.standard_mlp),
    "cnn": (models.mnist_cnn, models.standard_cnn),
}


@dataclasses.dataclass
class CompareConfig:
    """What to run. Defaults fit the embedded MNIST sample on a 2-core CPU in under 10 minutes."""

    dataset: str = "mnist_sample"
    methods: tuple = ("nonprivate", "dpsgd", "adlm", "ilm", "adlm_shared", "outpert", "outpert_all_logits")
    epsilons: tuple = (0.25, 0.5, 1.0, 2.0, 8.0)
    seeds: tuple = (0, 1)
    epochs: int = 15
    batch_size: int = 200
    model: str = "mlp"
    delta: float = 1e-5
    public_size: int = 1000
    learning_rate: float = 5e-3
    out: str = "results"
    verbose: int = 1
    audit: bool = True

    def validate(self) -> "CompareConfig":
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            raise ValueError(f"unknown method(s) {unknown or '(none given)'}; choose from {sorted(METHODS)}")
        if self.dataset not in data_module.KNOWN_DATASETS:
            raise ValueError(f"unknown dataset {self.dataset!r}; choose from {list(data_module.KNOWN_DATASETS)}")
        if self.model not in MODEL_FAMILIES:
            raise ValueError(f"unknown model {self.model!r}; choose from {sorted(MODEL_FAMILIES)}")
        if not self.epsilons:
            raise ValueError("the ε list is empty; pass e.g. --epsilons 0.5,2,8")
        self.epsilons = tuple(check_epsilon(e, "epsilon") for e in self.epsilons)
        self.delta = check_delta(self.delta)
        self.epochs = check_positive_int(self.epochs, "epochs")
        self.batch_size = check_positive_int(self.batch_size, "batch_size")
        if not self.seeds:
            raise ValueError("the seed list is empty; pass e.g. --seeds 0,1")
        for method in self.methods:
            METHODS[method].check_available()
        return self


@dataclasses.dataclass
class Prepared:
    """What a method hands to the runner: a compiled model, its data and its ledger.

    ``predict_proba`` (x → class probabilities) replaces ``softmax(model.predict(x))`` for
    methods whose answers are privatised at query time; ``per`` is ``"training"`` (the ledger
    covers the whole run) or ``"query"`` (the ledger covers one answered query).
    """

    model: keras.Model
    train: tf.data.Dataset
    ledger: PrivacyLedger | None
    callbacks: list = dataclasses.field(default_factory=list)
    preprocessing_seconds: float = 0.0
    noise_mode: str | None = None
    predict_proba: Callable | None = None
    per: str = "training"

    def probabilities(self, x) -> np.ndarray:
        if self.predict_proba is not None:
            return np.asarray(self.predict_proba(x))
        return tf.nn.softmax(self.model.predict(x, batch_size=1000, verbose=0)).numpy()


@dataclasses.dataclass
class Method:
    name: str
    prepare: Callable  # (context, epsilon | None, seed) -> Prepared
    description: str
    private: bool = True
    requires: tuple = ()

    def check_available(self) -> None:
        for module, hint in self.requires:
            try:
                __import__(module)
            except ImportError:
                raise ValueError(f"method {self.name!r} needs {module}, which is not installed: {hint}") from None


METHODS: dict[str, Method] = {}


def register_method(name: str, prepare: Callable, description: str, *, private: bool = True,
                    requires: tuple = ()) -> None:
    """Add a method to the runner; ``prepare(context, epsilon, seed) -> Prepared``."""
    METHODS[name] = Method(name, prepare, description, private, requires)


@dataclasses.dataclass
class Context:
    """The data and settings shared by every run (one split, one test set)."""

    config: CompareConfig
    x_private: np.ndarray
    y_private: np.ndarray
    x_public: np.ndarray
    y_public: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    relevance_models: dict = dataclasses.field(default_factory=dict)

    def private_builder(self, **kwargs):
        builder = MODEL_FAMILIES[self.config.model][0]
        return builder(self.num_classes, input_shape=self.x_private.shape[1:], **kwargs)

    def standard_builder(self):
        builder = MODEL_FAMILIES[self.config.model][1]
        return builder(self.num_classes, input_shape=self.x_private.shape[1:])

    def optimizer(self):
        return keras.optimizers.Adam(self.config.learning_rate)

    def relevance_model(self, seed):
        """A noise-free model trained on the public split only (spec §9 A5), cached per seed."""
        if seed not in self.relevance_models:
            keras.utils.set_random_seed(10_000 + seed)
            model = self.private_builder()
            model.compile(self.optimizer(), loss=TaylorCrossEntropy())
            model.fit(self.x_public, self.y_public, epochs=5, batch_size=50, verbose=0)
            self.relevance_models[seed] = model
        return self.relevance_models[seed]


# --- methods ------------------------------------------------------------------------------------
def _nonprivate(ctx: Context, epsilon, seed) -> Prepared:
    """The AdLM model and Taylor loss with the noise off: same code path, no privacy."""
    model = ctx.private_builder()
    model.compile(ctx.optimizer(), loss=TaylorCrossEntropy(batch_size=ctx.config.batch_size))
    coeffs = taylor_coefficients(ctx.y_private)
    train = (tf.data.Dataset.from_tensor_slices((ctx.x_private, coeffs))
             .shuffle(len(coeffs), seed=seed).batch(ctx.config.batch_size, drop_remainder=True))
    return Prepared(model, train, None)


def _noise_once(cls, noise_mode):
    def prepare(ctx: Context, epsilon, seed) -> Prepared:
        start = time.perf_counter()
        mech = cls.from_total(epsilon, ctx.config.batch_size, seed=seed, noise_mode=noise_mode)
        if mech.allocation_name == "relevance":
            mech.fit_relevance(ctx.relevance_model(seed), ctx.x_private, ctx.y_private)
        model = ctx.private_builder(input_noise=noise_mode == "shared_per_step")
        data = mech.perturb(ctx.x_private, ctx.y_private, model)
        model.compile(ctx.optimizer(), loss=mech.loss())
        return Prepared(model, data.to_dataset(seed=seed), mech.ledger,
                        [mech.callback(model, verbose=0)], time.perf_counter() - start, noise_mode)
    return prepare


def _dpsgd(ctx: Context, epsilon, seed) -> Prepared:
    from .dpsgd import DPSGD

    start = time.perf_counter()
    cfg = ctx.config
    dp = DPSGD(epsilon, cfg.delta, cfg.batch_size, cfg.epochs, len(ctx.x_private),
               learning_rate=cfg.learning_rate)
    model = dp.compile(ctx.standard_builder())
    return Prepared(model, dp.dataset(ctx.x_private, ctx.y_private, seed=seed), dp.ledger,
                    [dp.callback(verbose=0)], time.perf_counter() - start, dp.path)


OUTPUT_PERTURBATION_L2 = 0.001  # Lu et al. Table 4


def _output_perturbation(mechanism):
    """Lu et al. Algorithm 1 (``single_neuron``) or the ``all_logits`` variant, Laplace noise, ε per query."""

    def prepare(ctx: Context, epsilon, seed) -> Prepared:
        from .mechanisms.output_perturbation import DPPredictor, compute_bounds
        from .accounting.query_budget import QueryBudgetAccountant
        from .models.convexified import convexified_mlp

        start = time.perf_counter()
        flat = ctx.x_private.reshape(len(ctx.x_private), -1)
        model = convexified_mlp(flat.shape[1], ctx.num_classes, l2=OUTPUT_PERTURBATION_L2,
                                learning_rate=ctx.config.learning_rate)
        # the bounds read the architecture, the L2 coefficient and n, not the weights (Eq. 15, 18–21)
        bounds = compute_bounds(model, n_train=len(flat))
        predictor = DPPredictor(model, bounds, QueryBudgetAccountant(epsilon, max_queries=1), noise="laplace",
                                mechanism=mechanism, seed=seed + 1)

        def predict_proba(x):  # an evaluation harness: every row is one query at ε, not charged
            with predictor.evaluation_mode():
                return predictor.predict_proba(np.reshape(x, (len(x), -1)))

        train = (tf.data.Dataset.from_tensor_slices((flat, ctx.y_private))
                 .shuffle(len(flat), seed=seed).batch(ctx.config.batch_size))
        return Prepared(model, train, PrivacyLedger([predictor.release(1)]), [], time.perf_counter() - start,
                        f"{mechanism}/laplace", predict_proba, per="query")

    return prepare


register_method("nonprivate", _nonprivate, "no privacy: the AdLM model and Taylor loss with the noise off",
                private=False)
register_method("adlm", _noise_once(AdLM, "per_example_frozen"),
                "AdLM, per-record noise drawn once (Algorithm 1 literally; provable per-record bound)")
register_method("ilm", _noise_once(ILM, "per_example_frozen"),
                "ILM, identical per-record noise drawn once (provable per-record bound)")
register_method("adlm_shared", _noise_once(AdLM, "shared_frozen"),
                "AdLM reproduction mode: one noise draw shared by all records (claimed only, none proven)")
register_method("outpert", _output_perturbation("single_neuron"),
                "Lu et al. Algorithm 1 (output perturbation, Laplace): convexified MLP trained without noise, one "
                "noisy output neuron per query; ε per query, claimed only (spec A1–A2)")
register_method("outpert_all_logits", _output_perturbation("all_logits"),
                "output perturbation, Laplace noise on all logits: ε per query, proven only given the Δz_T "
                "sensitivity bound (spec A1)")
register_method("dpsgd", _dpsgd, "DP-SGD through tensorflow-privacy, σ calibrated to (ε, δ)",
                requires=(("tensorflow_privacy", "pip install 'tfdpmech[dpsgd]' (needs TensorFlow 2.15)"),))


def available_default_methods(note=print) -> tuple:
    """The default methods this installation can run; ``note`` is told about each one skipped."""
    methods = []
    for name in CompareConfig().methods:
        try:
            METHODS[name].check_available()
            methods.append(name)
        except ValueError as exc:
            note(f"skipping {name}: {exc}")
    return tuple(methods)


# --- measuring ------------------------------------------------------------------------------------
class PeakMemory:
    """Peak memory during a block: GPU allocator peak when a GPU is used, else sampled process RSS."""

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.peak_bytes = 0
        self._gpu = bool(tf.config.list_logical_devices("GPU"))

    def __enter__(self):
        if self._gpu:
            tf.config.experimental.reset_memory_stats("GPU:0")
            return self
        import psutil

        self._proc = psutil.Process()
        self._stop = threading.Event()
        self.peak_bytes = self._proc.memory_info().rss
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(self.interval):
            self.peak_bytes = max(self.peak_bytes, self._proc.memory_info().rss)

    def __exit__(self, *exc):
        if self._gpu:
            self.peak_bytes = int(tf.config.experimental.get_memory_info("GPU:0")["peak"])
        else:
            self._stop.set()
            self._thread.join()
            self.peak_bytes = max(self.peak_bytes, self._proc.memory_info().rss)
        return False

    @property
    def kind(self) -> str:
        return "gpu_peak_allocated" if self._gpu else "process_peak_rss"


class EpochRecorder(keras.callbacks.Callback):
    """Train time and test accuracy (argmax of ``scores(x_test)``) after every epoch."""

    def __init__(self, x_test, labels, progress: Callable[[int, float], None] | None = None,
                 scores: Callable | None = None):
        super().__init__()
        self.x_test, self.labels, self.progress = x_test, labels, progress
        self.scores = scores
        self.seconds: list[float] = []
        self.accuracy: list[float] = []
        self.non_finite: list[bool] = []  # NaN/inf in the test outputs: training diverged

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self._start)
        scores = self.scores or (lambda x: self.model.predict(x, batch_size=1000, verbose=0))
        out = np.asarray(scores(self.x_test))
        self.non_finite.append(not bool(np.isfinite(out).all()))
        self.accuracy.append(float(np.mean(np.argmax(out, axis=-1) == self.labels)))
        if self.progress:
            self.progress(epoch + 1, self.accuracy[-1])


def _steps_per_epoch(n: int, batch_size: int) -> int:
    return n // batch_size


def _run_one(ctx: Context, method: Method, epsilon, seed, progress, audit: bool = False) -> dict:
    cfg = ctx.config
    keras.utils.set_random_seed(seed)
    with PeakMemory() as memory:
        prepared = method.prepare(ctx, epsilon, seed)
        recorder = EpochRecorder(ctx.x_test, np.argmax(ctx.y_test, axis=-1), progress, prepared.probabilities)
        prepared.model.fit(prepared.train, epochs=cfg.epochs, verbose=0,
                           callbacks=[*prepared.callbacks, recorder])
    ledger = prepared.ledger
    trained = _steps_per_epoch(len(ctx.x_private), cfg.batch_size) * cfg.batch_size
    steady = recorder.seconds[1:] or recorder.seconds  # the first epoch includes tracing
    return {
        "method": method.name,
        "epsilon_target": epsilon,
        "seed": seed,
        "noise_mode": prepared.noise_mode,
        "epsilon_claimed": None if ledger is None else ledger.epsilon_claimed(cfg.epochs),
        "epsilon_provable": None if ledger is None else ledger.epsilon_provable(cfg.epochs),
        "delta": 0.0 if ledger is None else ledger.delta(cfg.epochs),
        "reproduction": bool(ledger is not None and ledger.is_reproduction),
        "ledger": None if ledger is None else ledger.to_dict(cfg.epochs),
        "test_accuracy": recorder.accuracy[-1],
        "test_accuracy_per_epoch": recorder.accuracy,
        "diverged": recorder.non_finite[-1],
        "seconds_per_epoch": recorder.seconds,
        "examples_per_second": trained / float(np.mean(steady)),
        "preprocessing_seconds": prepared.preprocessing_seconds,
        "peak_memory_bytes": memory.peak_bytes,
        "peak_memory_kind": memory.kind,
        "per": prepared.per,
        "membership_inference": _audit(ctx, prepared) if audit and not recorder.non_finite[-1] else None,
    }


def _audit_status(config: CompareConfig) -> str:
    from .audit.membership_inference import TF_PRIVACY_MIA_HINT, tf_privacy_attacks_available

    if not config.audit:
        return "off (audit=False)"
    return "run" if tf_privacy_attacks_available() else TF_PRIVACY_MIA_HINT


def _audit_members(ctx: Context) -> int:
    return min(len(ctx.x_private), len(ctx.x_test))


def _audit_floor(ctx: Context) -> dict:
    """The attacks' advantage on outputs without membership signal, at the audit's sample sizes."""
    from .audit.membership_inference import tf_privacy_attack_floor

    return tf_privacy_attack_floor(_audit_members(ctx), len(ctx.x_test), ctx.num_classes)


def _audit(ctx: Context, prepared: Prepared) -> dict | None:
    """tensorflow-privacy's threshold and logistic-regression attacks on the trained model's answers.

    Members: the first ``len(x_test)`` private training records; non-members: the test set. The
    runner calls it only when the attack code is installed and the model did not diverge (NaN
    outputs have no membership signal to measure).
    """
    from .audit.membership_inference import run_tf_privacy_attacks

    m = _audit_members(ctx)
    attacks = run_tf_privacy_attacks(prepared.probabilities(ctx.x_private[:m]), prepared.probabilities(ctx.x_test),
                                     ctx.y_private[:m], ctx.y_test)
    return {"attacks": attacks, "advantage": max(a["advantage"] for a in attacks.values()),
            "members": m, "non_members": len(ctx.x_test)}


def build_context(config: CompareConfig) -> Context:
    """Load the dataset once and split the training part into private and public records."""
    splits = data_module.load(config.dataset)
    n_public = config.public_size
    if not 0 < n_public < len(splits.x_train) - config.batch_size:
        raise ValueError(
            f"public_size={n_public} must leave at least one batch of private records "
            f"(training set has {len(splits.x_train)})"
        )
    return Context(config, splits.x_train[n_public:], splits.y_train[n_public:], splits.x_train[:n_public],
                   splits.y_train[:n_public], splits.x_test, splits.y_test, splits.num_classes)


def run_comparison(config: CompareConfig, *, log=print) -> dict:
    """Run every method × ε × seed and return the results (see :mod:`tfdpmech.report` to write them)."""
    config.validate()
    ctx = build_context(config)
    plan = [(m, e, s) for m in config.methods for e in (config.epsilons if METHODS[m].private else (None,))
            for s in config.seeds]
    runs, started = [], time.perf_counter()
    device = "GPU" if tf.config.list_logical_devices("GPU") else "CPU"
    log(f"tfdpmech compare: {len(plan)} runs on {config.dataset} ({len(ctx.x_private)} private, "
        f"{len(ctx.x_public)} public, {len(ctx.x_test)} test records), model={config.model}, {device}")
    audit = _audit_status(config)
    if config.audit and audit != "run":
        log(f"note: no membership-inference audit: {audit}")
    for i, (name, epsilon, seed) in enumerate(plan, 1):
        label = f"[{i}/{len(plan)}] {name}" + (f" target ε={epsilon:g}" if epsilon is not None else "") + f" seed={seed}"

        def progress(epoch, acc, label=label, i=i):
            elapsed = time.perf_counter() - started
            done = (i - 1) + epoch / config.epochs
            eta = elapsed / done * (len(plan) - done)
            if config.verbose:
                log(f"{label} epoch {epoch}/{config.epochs} test acc {acc:.4f} | elapsed {elapsed:.0f}s, "
                    f"~{eta:.0f}s left")

        runs.append(_run_one(ctx, METHODS[name], epsilon, seed, progress, audit=audit == "run"))
    return {
        "config": dataclasses.asdict(config),
        "methods": {m: METHODS[m].description for m in config.methods},
        "environment": {
            "tensorflow": tf.__version__, "keras": keras.__version__, "device": device,
            "python": sys.version.split()[0], "cpu_count": os.cpu_count(),
        },
        "data": {"private": len(ctx.x_private), "public": len(ctx.x_public), "test": len(ctx.x_test)},
        "membership_inference": audit,
        "membership_inference_floor": _audit_floor(ctx) if audit == "run" else None,
        "runs": runs,
        "total_seconds": time.perf_counter() - started,
    }
