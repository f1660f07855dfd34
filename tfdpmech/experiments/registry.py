"""The method registry: every method the runner offers answers one contract.

A method is registered once; ``prepare(ctx, epsilon, seed)`` does the method's private work for
one run and returns a :class:`Prepared` (a model, how to train it, its ledger). A method built on
a :class:`~tfdpmech.contract.Mechanism` is registered with :func:`register_mechanism` and a
``build(ctx, epsilon, seed) -> Build`` (the mechanism, the model, the records and the options of its
entry point); the one generic adapter runs them through the public entry point a user calls
(:class:`Build`), times it and reads the notes from the mechanism's
:meth:`~tfdpmech.contract.Mechanism.describe`::

    from tfdpmech.experiments import Build, register_mechanism

    def build(ctx, epsilon, seed):   # trained as make_private(model, mechanism); compile(); fit(x, y)
        return Build(MyMechanism(epsilon, seed=seed), ctx.build("standard"), ctx.x_private, ctx.y_private,
                     compile={"optimizer": ctx.optimizer()})

    register_mechanism("mine", build, "my mechanism (paper §3): proven", mode="private", paper="mine")

:func:`register_method` takes a hand-written ``prepare`` (the methods without a mechanism: no
privacy, a library's regulariser).

Names: ``<paper>_<mode>`` where a run is the paper mechanism's ``mode=`` as it stands
(``reference``: claimed, ``private``: proven), a variant appended (``pcdbn_private_gauss``);
``<family>_<variant>`` where the run is named by what differs (``adlm_per_record``,
``adlm_shared``, ``fm_head_gauss``, ``dpsgd_head``); descriptive names for the rest
(``nonprivate``, ``public_only``). A mode word in a name is the method's mode. One function has
one name.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import numpy as np

from ..private_training import make_private

__all__ = ["MODES", "Method", "Prepared", "Build", "METHODS", "register_method", "register_mechanism", "method",
           "available_methods"]

MODES = ("reference", "private", "none")


@dataclasses.dataclass
class Prepared:
    """What a method hands to the runner for one run.

    Attributes:
        model: the Keras model whose answers are evaluated (None if ``fit`` returns it).
        train: the training data for ``model.fit``; None when ``fit`` trains or nothing is left to train.
        ledger: the run's :class:`~tfdpmech.accounting.ledger.PrivacyLedger` (None: no privacy).
        callbacks: Keras callbacks for ``model.fit`` (e.g. the ledger's budget callback).
        fit: optional ``fit(epochs, callbacks) -> model | None`` replacing ``model.fit(train, ...)``; a
            returned model replaces ``model``.
        epochs: the number of epochs this method trains (None: the comparison's ``epochs``).
        predict_proba: optional ``x -> class probabilities`` for answers privatised per query.
        per: ``"training"`` (the ledger covers the run) or ``"query"`` (one answered query).
        preprocessing_seconds: time spent on the method's once-only private work; None: the runner times
            the whole ``prepare`` call.
        examples_per_epoch: records seen per epoch (for throughput); None: the private set size.
        notes: facts for the report.
        seconds_in_fit, notes_after_fit: for a mechanism that makes its once-only release in the first
            ``fit`` (through ``make_private``), read after training: ``() -> seconds`` of that release (the
            runner counts them as preprocessing, not training) and ``() -> notes`` (what the mechanism
            knows once it has released, e.g. its noise scale).
        resumable: the model ``make_private`` compiled (the one trained, which ``model`` may wrap): a run saved
            after an epoch resumes from its variables (:mod:`.run_parts`); None: the run restarts from its start.
        curve: for a run that evaluates itself (and resumes itself at any step), ``() -> {"epochs", "accuracy",
            "seconds", "part_starts", "train_seconds"}`` read after training, in place of the runner's
            per-epoch record (:meth:`.measuring.EpochRecorder.adopt`).
    """

    model: object
    train: object = None
    ledger: object = None
    callbacks: list = dataclasses.field(default_factory=list)
    fit: Callable | None = None
    epochs: int | None = None
    predict_proba: Callable | None = None
    per: str = "training"
    preprocessing_seconds: float | None = None
    examples_per_epoch: int | None = None
    notes: dict = dataclasses.field(default_factory=dict)
    seconds_in_fit: Callable | None = None
    notes_after_fit: Callable | None = None
    resumable: object = None
    curve: Callable | None = None

    def probabilities(self, x) -> np.ndarray:
        """Class probabilities for ``x``; a single logit column is read as binary (sigmoid)."""
        if self.predict_proba is not None:
            return np.asarray(self.predict_proba(x))
        import tensorflow as tf

        # a direct call in chunks: much cheaper than Model.predict for the small test sets of a comparison
        logits = np.concatenate([np.asarray(self.model(x[i:i + 2000], training=False))
                                 for i in range(0, len(x), 2000)])
        if logits.ndim == 2 and logits.shape[1] == 1:
            p = tf.sigmoid(logits).numpy()
            return np.concatenate([1.0 - p, p], axis=1)
        return tf.nn.softmax(logits).numpy()

    def train_for(self, epochs: int, callbacks: list) -> None:
        """Train as the method says: its ``fit`` (a returned model replaces :attr:`model`) or ``model.fit(train)``."""
        if self.fit is not None:
            model = self.fit(epochs, callbacks)
            if model is not None:
                self.model = model
        elif self.train is not None:
            self.model.fit(self.train, epochs=epochs, verbose=0, callbacks=callbacks)


@dataclasses.dataclass(frozen=True)
class Method:
    """A registered method (see :func:`register_method`)."""

    name: str
    prepare: Callable
    description: str
    mode: str
    paper: str | None = None
    takes_epsilon: bool = True
    data: tuple = ("image",)
    uses_public: bool = False
    requires: tuple = ()
    options: tuple | None = None

    def unavailable(self) -> str | None:
        """None if the method can run in this installation, else why not."""
        for module, hint in self.requires:
            try:
                __import__(module)
            except Exception:  # tensorflow_privacy raises more than ImportError on Keras 3
                return f"method {self.name!r} needs {module}, which does not import here: {hint}"
        return None


METHODS: dict[str, Method] = {}


def register_method(name: str, prepare: Callable, description: str, *, mode: str, paper: str | None = None,
                    takes_epsilon: bool | None = None, data: tuple = ("image",), uses_public: bool = False,
                    requires: tuple = (), options: tuple | None = None) -> Method:
    """Register ``prepare(ctx, epsilon, seed) -> Prepared`` under ``name`` and return the :class:`Method`.

    ``options``: the names of the comparison's ``options`` the method reads (None: any of them). A
    finished run is found again by its settings and those options only (:mod:`.run_store`), so a
    preset's option for another method does not make it stale; ``"option[entry]"`` names one entry of a dict
    option (the method's own entry of a per-method option).

    Raises:
        ValueError: ``mode`` is not one of ``"reference"``, ``"private"``, ``"none"``; ``name`` is taken.
    """
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} for method {name!r}; use one of {MODES}")
    if not isinstance(name, str) or not name or "," in name:
        raise ValueError(f"method name {name!r} must be a non-empty string without commas")
    if name in METHODS and METHODS[name].prepare is not prepare:
        raise ValueError(f"method {name!r} is already registered ({METHODS[name].description}); pick another name")
    if takes_epsilon is None:
        takes_epsilon = mode != "none"
    METHODS[name] = Method(name, prepare, description, mode, paper, takes_epsilon, tuple(data), uses_public,
                           tuple(requires), None if options is None else tuple(options))
    return METHODS[name]


@dataclasses.dataclass
class Build:
    """What the ``build(ctx, epsilon, seed)`` of :func:`register_mechanism` returns for one run.

    The run goes through the entry point a user calls for the mechanism's shape:

    - ``compile`` given (a training mechanism that trains ``model``): ``make_private(model, mechanism,
      **options)``, ``model.compile(**compile)``, then ``model.fit(x, y, epochs=..., callbacks=...)``;
    - a closed-form head (an estimator): ``mechanism.fit(x, y, **options)``, its ``model`` answers;
    - the rest (a query-time mechanism, a mechanism that builds the network it trains, a DP-SGD run
      compiled as tensorflow-privacy's model or with shuffled batches):
      ``mechanism.prepare(model, x, y, **options)``, then the prepared ``fit``.

    Attributes:
        mechanism: a :class:`~tfdpmech.contract.Mechanism`, constructed with the run's budget and seed.
        model, x, y: the model it trains (None where it builds its own) and the private records.
        options: the further keywords of that entry point.
        compile: ``model.compile`` arguments for the ``make_private`` shape; None for the others.
        notes: facts of the run's set-up that are the method's choice, not the mechanism's (recipe,
            network, public source); reported beside ``mechanism.describe()``.
        prepared: :class:`Prepared` fields that differ from what the entry point gives (the model answered
            with when the mechanism trains a part of it, the epochs, a per-query ledger, records per epoch).
    """

    mechanism: object
    model: object = None
    x: object = None
    y: object = None
    options: dict = dataclasses.field(default_factory=dict)
    compile: dict | None = None
    notes: dict = dataclasses.field(default_factory=dict)
    prepared: dict = dataclasses.field(default_factory=dict)


def _through_entry_point(built: Build) -> dict:
    """:class:`Prepared` fields of one run, set up through the public entry point of its shape (see :class:`Build`)."""
    mech = built.mechanism
    if built.compile is not None:
        model = make_private(built.model, mech, **built.options)
        model.compile(**built.compile)

        def fit(epochs, callbacks):  # the mechanism's own callbacks are added by the private model's fit
            model.fit(built.x, built.y, epochs=epochs, callbacks=callbacks, verbose=0)

        def seconds_in_fit():  # the stages the mechanism timed itself (a release at the first fit)
            return float(sum((getattr(mech, "seconds", None) or {}).values()))
        return {"model": model, "fit": fit, "seconds_in_fit": seconds_in_fit, "resumable": model,
                "notes_after_fit": lambda: {**mech.describe(), **built.notes}}
    if mech.kind == "closed_form":
        mech.fit(built.x, built.y, **built.options)
        return {"model": mech.model, "epochs": 1}
    run = mech.prepare(built.model, built.x, built.y, **built.options)
    if run.trained:
        return {"model": run.model, "epochs": 1}

    def fit(epochs, callbacks):
        # a run whose budget fixed its epochs trains those
        run.fit(None if run.epochs is not None else epochs, callbacks,
                **({} if run.custom_fit is not None else {"verbose": 0}))
        return run.model if run.custom_fit is not None else None  # a custom loop's model exists once it has trained
    return {"model": run.model, "fit": fit, "epochs": run.epochs}


def mechanism_prepare(build: Callable, mode: str) -> Callable:
    """The one adapter: ``build``, the run's entry point (see :class:`Build`), timed (the public model's
    training excluded: it is reported beside), turned into a :class:`Prepared` with the mechanism's own
    ledger and notes."""
    def prepare(ctx, epsilon, seed) -> Prepared:
        public_before = ctx.public_seconds_spent(seed)
        start = time.perf_counter()
        built = build(ctx, epsilon, seed)
        fields = _through_entry_point(built)
        seconds = time.perf_counter() - start
        public_after = ctx.public_seconds_spent(seed)
        if public_before is None and public_after is not None:  # what getting it took here, not its training
            seconds -= public_after
        mech = built.mechanism
        fields.update(ledger=None if mode == "none" else mech.ledger, per="query" if mech.kind == "query" else "training",
                      preprocessing_seconds=seconds, notes={**mech.describe(), **built.notes})
        fields.update(built.prepared)
        return Prepared(**fields)
    prepare.build = build
    return prepare


def register_mechanism(name: str, build: Callable, description: str, *, mode: str, paper: str | None = None,
                       takes_epsilon: bool | None = None, data: tuple = ("image",), uses_public: bool = False,
                       requires: tuple = (), options: tuple | None = None) -> Method:
    """Register a method built on the mechanism contract: ``build(ctx, epsilon, seed) -> Build``.

    The method's ``prepare`` is :func:`mechanism_prepare`; the other arguments are those of
    :func:`register_method`.
    """
    return register_method(name, mechanism_prepare(build, mode), description, mode=mode, paper=paper,
                           takes_epsilon=takes_epsilon, data=data, uses_public=uses_public, requires=requires,
                           options=options)


def method(name: str) -> Method:
    """The registered method ``name``; ValueError naming the choices otherwise."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose from {sorted(METHODS)} (`tfdpmech methods` lists them)")
    return METHODS[name]


def available_methods(names, note: Callable[[str], None]) -> tuple:
    """The methods of a default list (a preset's, the bench's) this installation can run; each one
    skipped is told to ``note`` with the reason. Names the user typed are not filtered: the
    configuration's check refuses an unavailable one by name."""
    kept = []
    for name in names:
        reason = method(name).unavailable()
        if reason:
            note(f"skipping {name}: {reason}")
        else:
            kept.append(name)
    return tuple(kept)
