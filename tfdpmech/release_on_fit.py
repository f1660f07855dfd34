"""A Keras model whose first ``fit(x, y)`` makes a mechanism's once-only release, then trains on it.

What :func:`tfdpmech.make_private` gives for a mechanism that perturbs the data (or the loss) once and
then trains on the released values (AdLM, ILM, AFRRS, input perturbation), or releases as it trains
(pCDBN's layer-wise training, one epoch): ``compile`` keeps the
optimizer and metrics; the first ``fit(x, y)`` calls the mechanism's
:meth:`~tfdpmech.contract.Mechanism.prepare` (every check, then the release, recorded in the
mechanism's ledger) and trains on the released data; a later ``fit()`` without data trains further on
the same release (post-processing: no new budget).
"""

from __future__ import annotations

import contextlib
import inspect

from .contract import FIT_ARGUMENTS_FIXED_BY_THE_RELEASE

__all__ = ["release_on_fit"]

_SET_BY_KERAS = ("model", "x", "y", "optimizer", "metrics", "verbose")


def release_on_fit(model, mechanism, options: dict, *, epochs: int | None = None, epochs_fix: str | None = None):
    """``model`` with ``compile`` / ``fit`` that run ``mechanism`` (see the module docstring).

    Args:
        model: the Keras model the mechanism trains (its ``prepare`` checks the layers it needs).
        mechanism: a training :class:`~tfdpmech.contract.Mechanism` whose ``prepare(model, x, y,
            **options)`` makes the release and returns the :class:`~tfdpmech.contract.PreparedFit`;
            ``compile``'s ``optimizer`` and ``metrics`` are passed on where ``prepare`` takes them
            (AdLM's), and refused where the mechanism fixes them (input perturbation's plain SGD).
        options: further keywords of ``prepare`` (e.g. AdLM's ``relevance_model``).
        epochs: the number of epochs the mechanism's budget covers (input perturbation's T), or None
            when training on the release may run any number.
        epochs_fix: what to do instead of passing other epochs (default: construct the mechanism for them).

    Returns:
        ``model`` itself, with ``model.privacy_ledger`` (the mechanism's ledger).

    Raises:
        TypeError: an option ``prepare`` does not take (naming the ones it does).
    """
    name = type(mechanism).__name__
    takes = [key for key, p in inspect.signature(mechanism.prepare).parameters.items()
             if p.kind is inspect.Parameter.KEYWORD_ONLY]
    accepted = [key for key in takes if key not in _SET_BY_KERAS]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise TypeError(f"make_private(model, {name}(...), ...) got the unknown option(s) {unknown}; it takes "
                        f"{accepted}")
    state = {"compiled": None, "run": None}
    budget_epochs = epochs

    def compile(optimizer=None, loss=None, metrics=None, **kwargs):
        if kwargs:
            raise TypeError(f"a private model's compile takes optimizer and metrics; got {sorted(kwargs)}")
        if loss is not None:
            raise ValueError(f"loss={loss!r}: {name} trains with its own loss; compile without loss")
        given = {key: value for key, value in (("optimizer", optimizer), ("metrics", metrics)) if value is not None}
        fixed = sorted(set(given) - set(takes))
        if fixed:
            raise ValueError(f"{fixed}: {name} sets its own {' and '.join(fixed)}; compile without "
                             f"{'them' if len(fixed) > 1 else 'it'}")
        state["compiled"] = given  # what is not given: the mechanism's own default (prepare's)

    def fit(x=None, y=None, epochs=None, callbacks=None, **kwargs):
        if state["compiled"] is None:
            raise RuntimeError("compile the private model before fit (model.compile(...))")
        # refused before the first fit makes the release: what the accounting fixes
        fixed = sorted(set(kwargs) & set(FIT_ARGUMENTS_FIXED_BY_THE_RELEASE))
        if fixed:
            raise TypeError(f"{fixed} do not apply to a private model: {name} fixes the records and batches each "
                            "step sees (its accounting assumes them); pass x and y only")
        if budget_epochs is not None and epochs is not None and epochs != budget_epochs:
            raise ValueError(f"epochs={epochs!r}: {name}'s budget was computed for epochs={budget_epochs}; pass "
                             f"{budget_epochs} or leave epochs out"
                             f"{'; ' + epochs_fix if epochs_fix else f', or construct it for {epochs} epochs'}")
        with _keras_methods(model):
            if state["run"] is None:
                if x is None or y is None:
                    raise ValueError(f"x, y: the first fit takes the private records, fit(x, y); {name} releases "
                                     "from them once")
                quiet = {"verbose": 0} if "verbose" in takes else {}  # the budget callback's own logging
                released = len(mechanism.ledger)
                try:
                    state["run"] = mechanism.prepare(model, x, y, **state["compiled"], **options, **quiet)
                    return state["run"].fit(epochs, tuple(callbacks or ()), **kwargs)
                except Exception:
                    if len(mechanism.ledger) == released:  # refused before anything was released: fit may be retried
                        state["run"] = None
                    raise
            elif x is not None or y is not None:
                raise ValueError(
                    f"x, y: {name} released once, from the records of the first fit; call model.fit(epochs=...) "
                    "without data to train further on that release (no new budget), or make_private with a new "
                    "mechanism (a new budget) for other records"
                )
            return state["run"].fit(epochs, tuple(callbacks or ()), **kwargs)

    model.compile = compile
    model.fit = fit
    model.privacy_ledger = mechanism.ledger
    return model


@contextlib.contextmanager
def _keras_methods(model):
    """The model's own Keras ``compile`` / ``fit`` while ``prepare`` compiles and the prepared run fits."""
    patched = {key: model.__dict__.pop(key) for key in ("compile", "fit") if key in model.__dict__}
    try:
        yield
    finally:
        model.__dict__.update(patched)
