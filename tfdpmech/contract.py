"""The contract every mechanism answers, and the three shapes users meet it in.

Shaped like the libraries it sits beside: constructed with its budget and ``mode`` (as a
diffprivlib mechanism), every release is recorded through one primitive, :func:`release`, into one
:class:`PrivacyLedger` (as a tensorflow-privacy ``DPQuery`` yields its ``DpEvent``). Users meet it in
one of three shapes, each with one name:

- **training** mechanisms that train a given model (DP-SGD, AdLM, ILM, AFRRS, input perturbation,
  pCDBN on a CDBN model):
  ``tfdpmech.make_private(model, mechanism)`` (:meth:`Mechanism.private_model`), then the user's
  own ``model.compile`` / ``model.fit(x, y)``;
- **closed-form** heads (the functional and output-perturbation heads) are estimators:
  ``head.fit(x, y)`` releases once, solves and returns the trained Keras model;
- **query-time** mechanisms (:class:`~tfdpmech.mechanisms.DPPredictor`) wrap a trained model and
  spend budget on every answered batch.

Underneath, :meth:`Mechanism.prepare` turns a model and the private data into a
:class:`PreparedFit` (the model compiled with the mechanism's loss, its data and callbacks, as
Opacus's ``make_private`` returns model, optimizer and loader). ``make_private`` calls it at the
first ``fit`` for the AdLM family, input perturbation and pCDBN; the reference classes (the
authors' code paths), which train the network they build, are run through it directly:
``mechanism.prepare(x=x, y=y).fit()``.

``mode`` is ``"private"`` (the default everywhere: what is proven) or ``"reference"`` (the paper or
the authors' code as they ran it: ε claimed, none proven, with the reason in the ledger). Where the
authors' code path is a different algorithm, it is a class of its own (``AdLMReference``,
``ILMReference``, ``AFRRSReference``, ``PCDBNReference``), and the proven class refuses
``mode="reference"`` naming it (:func:`check_proven_mode`).
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from typing import Callable, ClassVar, NamedTuple

import numpy as np

from .accounting.ledger import PrivacyLedger, Release
from .noise import gaussian, laplace
from .validation import check_choice

__all__ = ["Mechanism", "ClosedFormMechanism", "PreparedFit", "release", "Released", "MECHANISM_MODES", "KINDS",
           "FIT_ARGUMENTS_FIXED_BY_THE_RELEASE"]

MECHANISM_MODES = ("private", "reference")
KINDS = ("training", "closed_form", "query")
# model.fit arguments that change which records a step sees, or their weights: a private model's accounting fixes them
FIT_ARGUMENTS_FIXED_BY_THE_RELEASE = (
    "batch_size", "shuffle", "steps_per_epoch", "sample_weight", "class_weight", "validation_split")


@dataclasses.dataclass
class PreparedFit:
    """What :meth:`Mechanism.prepare` returns: the pieces of one ``model.fit``.

    Attributes:
        model: the Keras model to train (compiled with the mechanism's loss), the trained model of a
            closed-form mechanism, or the wrapping model of a query-time one.
        data: what ``model.fit`` takes as ``x`` (a ``tf.data.Dataset`` or the released arrays), or
            None when nothing is left to train.
        callbacks: the mechanism's callbacks (budget logging, guards); pass them to ``fit``.
        epochs: the number of epochs the budget was computed for, or None when any number may run.
        y: labels to pass beside ``data`` when ``data`` is an array, else None.
        custom_fit: for a mechanism that trains with its own loop (the reference modes of the
            authors' code, pCDBN's layer-wise training, DP-ERM's full-batch descent):
            ``custom_fit(epochs, callbacks, **fit_kwargs)``.
    """

    model: object
    data: object = None
    callbacks: list = dataclasses.field(default_factory=list)
    epochs: int | None = None
    y: object = None
    custom_fit: Callable | None = None

    @property
    def trained(self) -> bool:
        """True when ``prepare`` already produced the final model (closed-form and query-time)."""
        return self.data is None and self.custom_fit is None

    def fit(self, epochs: int | None = None, callbacks=(), **kwargs):
        """Run the training the mechanism accounted for: ``model.fit(data, callbacks=...)``.

        Args:
            epochs: defaults to :attr:`epochs`; a different number than the budget was computed for
                is refused (more epochs would spend more than the ledger records).
            callbacks: extra Keras callbacks, run after the mechanism's own.
            **kwargs: further ``model.fit`` arguments (``verbose``, ``validation_data``...).

        Returns:
            the Keras ``History`` (or what the mechanism's own loop returns); None when
            :attr:`trained` (nothing to fit).

        Raises:
            ValueError: ``epochs`` other than :attr:`epochs`, or a keyword that the accounting fixes.
        """
        if epochs is None:
            epochs = self.epochs if self.epochs is not None else 1
        elif self.epochs is not None and epochs != self.epochs:
            raise ValueError(f"epochs={epochs!r}: the budget was computed for epochs={self.epochs}; prepare the "
                             f"mechanism for {epochs} epochs instead (it composes over the epochs it is told)")
        clash = sorted(set(kwargs) & {"x", "y", "batch_size", "shuffle"})
        if clash and self.data is not None:
            raise ValueError(f"{clash} are fixed by the prepared data (the batches the accounting assumes); drop them "
                             "from fit()")
        all_callbacks = [*self.callbacks, *callbacks]
        if self.custom_fit is not None:
            return self.custom_fit(epochs, all_callbacks, **kwargs)
        if self.data is None:
            return None
        return self.model.fit(self.data, self.y, epochs=epochs, callbacks=all_callbacks, **kwargs)


class Released(NamedTuple):
    """What :func:`release` returns: the released value, the noise drawn for it, and the recorded :class:`Release`."""

    value: object
    noise: object
    record: Release


_DRAWS = {"laplace": laplace, "gaussian": gaussian}  # the record's mechanism -> numpy draw of its noise_scale


def release(ledger: PrivacyLedger, record: Release, *, value=None, rng=None, shape=None,
            details_of=None) -> Released:
    """Calibrate, draw, record: the one call every release goes through, as a tensorflow-privacy
    ``DPQuery`` returns the noised result and its ``DpEvent`` together.

    With ``value`` (the exact statistic), the noise is the record's own calibration: for
    ``record.mechanism`` ``"laplace"`` Lap(b), for ``"gaussian"`` N(0, σ²), with b or σ =
    ``record.noise_scale``, one independent draw from ``rng`` per number of ``value`` (a dict of
    arrays is drawn in its order). The noise added is therefore the noise the ledger states. Without
    ``value``, a release whose noise is drawn where the statistic lives (a Keras layer or the DP-SGD
    train step, a per-feature or a sphere-direction draw) or that adds none is recorded as it is.

    Args:
        ledger: the mechanism's :class:`PrivacyLedger`.
        record: the :class:`Release` (claimed and provable ε, basis, sensitivity, noise scale, event);
            validated by its constructor before anything is drawn.
        value: an array, a dict of arrays, or None.
        rng: the numpy ``Generator`` the noise is drawn from (required with ``value``).
        shape: the noise's shape where one draw is shared by the rows of an array ``value`` (broadcast
            over them, e.g. input perturbation's ``"shared"`` noise); None: ``value``'s shape.
        details_of: ``(noisy, noise) -> dict`` of facts about what was released (its fingerprint),
            added to the record's details before it is recorded.

    Returns:
        :class:`Released` ``(value + noise, noise, the recorded Release)``; the first two are None
        without ``value``.

    Raises:
        ValueError: ``value`` for a record whose mechanism is not drawn here, or without its noise
            scale or ``rng``; a ``shape`` that does not broadcast over ``value``; ``rng``, ``shape`` or
            ``details_of`` without ``value`` (nothing is drawn or recorded).
    """
    if value is None:
        if rng is not None or shape is not None or details_of is not None:
            raise ValueError("value: rng, shape and details_of describe a draw; pass the exact statistic as value=")
        return Released(None, None, ledger.record(record))
    draw = _DRAWS.get(record.mechanism)
    if draw is None or record.noise_scale is None or rng is None:
        raise ValueError(
            f"value: release draws {sorted(_DRAWS)} noise of the record's noise_scale from rng; got "
            f"mechanism={record.mechanism!r}, noise_scale={record.noise_scale!r}, rng={rng!r:.40}; draw other "
            "noise where the statistic lives and record it without value")
    single = not isinstance(value, dict)
    exact = {key: np.asarray(v, dtype=np.float64) for key, v in ({None: value} if single else value).items()}
    if shape is not None and not (single and _broadcasts(shape, exact[None].shape)):
        raise ValueError(f"shape={shape!r}: the noise must broadcast over an array value's shape "
                         f"{exact[None].shape if single else '(a dict value is drawn entry by entry)'}")
    noise = {key: draw(record.noise_scale, v.shape if shape is None else shape, rng)  # in the value's order
             for key, v in exact.items()}
    noisy = {key: v + noise[key] for key, v in exact.items()}
    if single:
        noisy, noise = noisy[None], noise[None]
    if details_of is not None:
        record = dataclasses.replace(record, details={**record.details, **details_of(noisy, noise)})
    return Released(noisy, noise, ledger.record(record))


def _broadcasts(shape, onto) -> bool:
    try:
        return np.broadcast_shapes(tuple(shape), onto) == onto
    except (TypeError, ValueError):
        return False


class Mechanism(abc.ABC):
    """Base of every paper's mechanism (see the module docstring).

    Subclasses set :attr:`paper` and :attr:`kind`, hold ``self.mode`` (one of :attr:`modes`) and
    ``self.ledger`` (a :class:`PrivacyLedger`), and implement :meth:`prepare`.

    A mechanism is its own validated config: the attributes its class names in :attr:`settings` (the
    budget and what the noise was calibrated from) are checked by the constructor and frozen once it
    returns, as the fields of a frozen dataclass; assigning one raises
    ``dataclasses.FrozenInstanceError`` naming the field and the fix (construct a new mechanism).
    """

    paper: ClassVar[str] = ""
    kind: ClassVar[str] = "training"
    modes: ClassVar[tuple[str, ...]] = ("private",)
    mode: str = "private"
    ledger: PrivacyLedger
    # note name -> attribute (dotted) that :meth:`describe` reports: what the mechanism already knows
    described: ClassVar[dict[str, str]] = {}
    # the constructor's settings, read-only once it returns
    settings: ClassVar[tuple[str, ...]] = ("mode",)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None:  # the settings may be assigned while any constructor of the chain runs
            @functools.wraps(init)
            def constructing(self, *args, **kw):
                depth = self.__dict__.get("_constructing", 0)
                object.__setattr__(self, "_constructing", depth + 1)
                try:
                    init(self, *args, **kw)
                finally:
                    object.__setattr__(self, "_constructing", depth)
            cls.__init__ = constructing

    def __setattr__(self, name, value):
        if name in type(self).settings and not self.__dict__.get("_constructing", 0):
            raise dataclasses.FrozenInstanceError(
                f"cannot assign to field {name!r}: {type(self).__name__}'s settings are fixed once it is constructed "
                f"(the noise and the ledger's records are computed from them); construct a new "
                f"{type(self).__name__}(..., {name}=...) instead")
        super().__setattr__(name, value)

    def describe(self) -> dict:
        """Facts about this mechanism's calibration for a report, read after :meth:`prepare`: the
        attributes named in :attr:`described` (noise scale, sensitivity, engine...) and the seconds of
        each stage where the mechanism measures them (a ``seconds`` dict: ``<stage>_seconds``).
        Attributes not yet set (None) are left out."""
        facts = {}
        for key, attribute in self.described.items():
            value = self
            for part in attribute.split("."):
                value = getattr(value, part, None)
            if value is not None:
                facts[key] = value
        facts.update({f"{stage}_seconds": s for stage, s in (getattr(self, "seconds", None) or {}).items()})
        return facts

    def private_model(self, model, **options):
        """``model`` whose ``compile`` / ``fit`` run this mechanism: what :func:`tfdpmech.make_private` returns.

        Training mechanisms that train a model the user gives override this; the others refuse it
        naming their own shape (an estimator's ``fit``, a predictor wrapping a trained model).

        Raises:
            TypeError: this mechanism is not trained through ``make_private``.
        """
        name = type(self).__name__
        if self.kind == "closed_form":
            fix = f"it is an estimator: {name}(...).fit(x, y) releases once and returns the trained Keras model"
        elif self.kind == "query":
            fix = f"it wraps a trained model: {name}(trained_model, ...) answers queries and charges each one"
        else:
            fix = f"it trains the network it builds itself: {name}(...).prepare(x=x, y=y).fit()"
        raise TypeError(f"mechanism: make_private(model, {name}(...)) does not apply to {name}; {fix}")

    @abc.abstractmethod
    def prepare(self, model=None, x=None, y=None, **options) -> PreparedFit:
        """Turn ``model`` and the private ``(x, y)`` into a :class:`PreparedFit`.

        Every argument is checked before any budget is spent; the once-only releases (perturbed
        data, a closed-form head) happen here and are recorded in :attr:`ledger`.
        """


class ClosedFormMechanism(Mechanism):
    """A mechanism whose one release is its trained model: ``fit(x, y)`` solves on the released
    statistics and returns the trained Keras model (also ``self.model``, with ``privacy_ledger``), as a
    scikit-learn estimator's ``fit`` trains it (the functional and output-perturbation heads, built on
    a feature extractor given to the constructor)."""

    kind: ClassVar[str] = "closed_form"

    def prepare(self, model=None, x=None, y=None, **fit_options) -> PreparedFit:
        """``fit(x, y, **fit_options)``, the one release, then the trained Keras model (nothing left to fit).

        Raises:
            ValueError: a ``model`` (the head's model is built from the extractor given to the
                constructor), missing data; and every error of ``fit`` (all before the release).
        """
        if model is not None:
            raise ValueError(f"{type(self).__name__} builds its model on the feature extractor given to its "
                             "constructor; call prepare(x=..., y=...) without a model")
        if x is None:
            raise ValueError(f"{type(self).__name__}.prepare needs the private records: prepare(x=..., y=...)")
        self.fit(x, y, **fit_options)
        return PreparedFit(self.model)

    def _trained_model(self):
        """What ``fit`` returns: the trained Keras model with ``privacy_ledger``, as ``make_private``'s model."""
        self.model.privacy_ledger = self.ledger
        return self.model


def refuse_model(mechanism: Mechanism, model) -> None:
    """For mechanisms that build their own network (the authors' code paths): no ``model``."""
    if model is not None:
        raise ValueError(f"model: {type(mechanism).__name__} trains the network it builds itself; call "
                         "prepare(x=..., y=...) without a model")


def check_proven_mode(cls, mode, reference_class, modes=("private",)) -> str:
    """``mode`` of a class whose paper's reference mode (the authors' code path) is a class of its own,
    ``reference_class``: ``mode="reference"`` is refused with the class to construct instead."""
    if mode == "reference":
        raise ValueError(f"mode='reference': {cls.__name__} has no reference mode; the authors' code path is its own "
                         f"class, {reference_class.__name__}: construct tfdpmech.{reference_class.__name__}(...) instead")
    return check_choice(mode, "mode", modes)
