"""The method registry: every method the runner offers answers one contract.

A method is registered once with :func:`register_method`; ``prepare(ctx, epsilon, seed)`` does
the method's private work for one run and returns a :class:`Prepared` (a model, how to train
it, its ledger). Adding a method takes a few lines::

    from tfdpmech.experiments import Prepared, register_method

    def prepare(ctx, epsilon, seed):
        model = ctx.build("standard")
        model.compile("adam", loss=keras.losses.CategoricalCrossentropy(from_logits=True))
        return Prepared(model, ctx.train_dataset(seed), ledger=my_ledger(epsilon))

    register_method("mine", prepare, "my mechanism (paper §3)", mode="private")
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

__all__ = ["MODES", "Method", "Prepared", "METHODS", "ALIASES", "register_method", "register_alias", "canonical_name",
           "method", "available_methods"]

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

    def unavailable(self) -> str | None:
        """None if the method can run in this installation, else why not."""
        for module, hint in self.requires:
            try:
                __import__(module)
            except Exception:  # tensorflow_privacy raises more than ImportError on Keras 3
                return f"method {self.name!r} needs {module}, which does not import here: {hint}"
        return None


METHODS: dict[str, Method] = {}
# an old method name -> (its current name, why it changed): accepted wherever a method is named, run and
# reported under the current name (the configuration maps it before anything runs)
ALIASES: dict[str, tuple[str, str]] = {}


def register_method(name: str, prepare: Callable, description: str, *, mode: str, paper: str | None = None,
                    takes_epsilon: bool | None = None, data: tuple = ("image",), uses_public: bool = False,
                    requires: tuple = ()) -> Method:
    """Register ``prepare(ctx, epsilon, seed) -> Prepared`` under ``name`` and return the :class:`Method`.

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
                           tuple(requires))
    return METHODS[name]


def register_alias(old: str, new: str, why: str) -> None:
    """Accept ``old`` as a name of the registered method ``new`` (runs and reports say ``new``)."""
    if new not in METHODS:
        raise ValueError(f"alias {old!r} -> {new!r}: no method {new!r} is registered")
    if old in METHODS:
        raise ValueError(f"alias {old!r} would hide the registered method {old!r}; pick another name")
    ALIASES[old] = (new, why)


def canonical_name(name: str) -> str:
    """The current name of ``name`` (itself unless it is an alias in :data:`ALIASES`)."""
    return ALIASES[name][0] if isinstance(name, str) and name in ALIASES else name


def method(name: str) -> Method:
    """The registered method ``name`` (an alias gives its current method); ValueError naming the choices otherwise."""
    name = canonical_name(name)
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
