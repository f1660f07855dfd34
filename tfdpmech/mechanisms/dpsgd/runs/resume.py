"""Save, load and continue a Poisson DP-SGD run: :func:`resume` and the run's saved state.

A model that :func:`tfdpmech.make_private` compiled carries its run in its optimizer
(:mod:`.run_state`: :func:`~.run_state.saved_run` is what is saved); :func:`resume` continues it after
``keras.models.load_model`` (or a restart from a ``ModelCheckpoint``):

    >>> model = keras.models.load_model("run.keras")   # fit would refuse: the run is not resumed yet
    >>> model = tfdpmech.resume(model)                  # the same run: its ledger, its remaining steps
    >>> model.fit(x_private, y_private)                 # the remaining epochs; no new charge

The resumed run is the same release (nothing is recorded again): the same n, q, σ, C, δ and step
budget, its ledger as saved, the optimizer's step count as saved. Its batches and noise are drawn from
``seed`` (the first part's seed gives the first part's stream, continued at the saved step) or from OS
entropy: either way each remaining step is an independent Poisson draw, which is what the recorded ε
assumes. A BandMF run (``DPSGD(..., bands=b)``) resumes only with the seed it started with: its cyclic partitions
and its saved noise buffer belong to that key (another seed is refused before any step; see
:mod:`.banded_run`). What the proof protects is unchanged: add-or-remove-one-record neighbours over the n records (one
user, all of their records, for a user-level run). A run with augmentation multiplicity or at user level is
given its augmentation or its user ids again (``resume(model, augmentation=fn)``, ``resume(model,
user_ids=ids)``): code and data are not saved with a model; the multiplicity and k are, and must not change.
"""

from __future__ import annotations

import numbers

import keras

from ....accounting.ledger import PrivacyLedger
from ..sampling.user_sampling import check_users
from .poisson import DPSGD
from .private_model import private_dpsgd_model
from .run_state import RUN_STATE_FORMAT, carried_run

__all__ = ["run_from_state", "resume"]

_GIVEN = ("expected_batch_size", "sampling_probability")


def _bad_state(why: str) -> ValueError:
    return ValueError(f"the model's optimizer carries a DP-SGD run that cannot be read ({why}); it was not written by "
                      "this version of tfdpmech or was altered. Start a new run, tfdpmech.make_private(model, "
                      "tfdpmech.DPSGD(...)), with a ledger holding the first run's releases")


def _units_again(run: dict, augmentation, user_ids) -> dict:
    """The DPSGD arguments of a saved run's clipping units: its augmentation or user ids, given again (code and
    data are not saved with a model), with the multiplicity and k it saved.

    Raises:
        ValueError: a grouped run without them, or a run given units it did not have.
    """
    k, views = run.get("records_per_user") or 0, run.get("augmentation_multiplicity", 1)
    if k > 0 and user_ids is None:
        raise ValueError("the model's run is user-level; its user ids are data, which the saved model does not hold: "
                         "pass the same ids again, tfdpmech.resume(model, user_ids=ids)")
    if k == 0 and user_ids is not None:
        raise ValueError("the model's run is at record level (one unit per record); resume does not change the unit "
                         "of privacy: drop user_ids, or start a new user-level run")
    if views > 1 and augmentation is None:
        raise ValueError(f"the model's run averaged {views} augmented views per record; its augmentation is code, "
                         "which the saved model does not hold: pass the same one again, "
                         "tfdpmech.resume(model, augmentation=fn)")
    if views == 1 and augmentation is not None:
        raise ValueError("the model's run took one view per record; resume does not add views: drop augmentation, or "
                         "start a new run with augmentation_multiplicity")
    if k > 0:  # the ids' own errors, not "cannot be read": checked against the saved n before the run is rebuilt
        check_users(user_ids, k, run.get("n"))
    units = {"user_ids": user_ids, "records_per_user": k} if k > 0 else {}
    return units | ({"augmentation": augmentation, "augmentation_multiplicity": views} if views > 1 else {})


def run_from_state(state: dict, *, seed=None, augmentation=None, user_ids=None):
    """The :class:`~tfdpmech.mechanisms.dpsgd.DPSGD` run ``state`` describes, its release already in its ledger
    (``augmentation`` / ``user_ids``: a grouped run's, given again).

    Raises:
        ValueError: a state this version does not read, or whose release disagrees with its settings; a grouped
            run without its augmentation or ids, or a run given units it did not have.
    """
    if not isinstance(state, dict) or state.get("format") != RUN_STATE_FORMAT:
        raise _bad_state(f"format {state.get('format') if isinstance(state, dict) else state!r}")
    units = _units_again(state["run"] if isinstance(state.get("run"), dict) else {}, augmentation, user_ids)
    try:
        run, ledger = state["run"], PrivacyLedger.from_dict(state["ledger"])
        release = ledger.releases[state["release_index"]]
        given = next(k for k in _GIVEN if k in run)
        dp = DPSGD(None, run["delta"], epochs=run["epochs"], n=run["n"], noise_multiplier=run["noise_multiplier"],
                   l2_norm_clip=run["l2_norm_clip"], accountant=run["accountant"], path=run["path"],
                   physical_batch_size=run["physical_batch_size"], seed=seed, ledger=ledger, **{given: run[given]},
                   bands=run.get("bands", 1), **units)
        first_step = run["first_step"]
    except (KeyError, IndexError, TypeError, StopIteration) as exc:
        raise _bad_state(f"{type(exc).__name__}: {exc}") from exc
    details = release.details
    if (release.mechanism != ("dpsgd" if dp.bands == 1 else "dpsgd_bandmf") or details.get("bands", 1) != dp.bands
            or details.get("steps") != dp.steps or release.noise_scale != dp.noise_multiplier
            or details.get("sampling_probability") != dp.sampling_probability
            or not isinstance(first_step, numbers.Integral) or first_step < 0):
        raise _bad_state("its release does not match its settings")
    dp.release, dp.first_step = release, int(first_step)
    dp._one_hot_labels, dp._sparse_labels, dp._loss_known = run["one_hot_labels"], run["sparse_labels"], True
    return dp


def _compile_arguments(model) -> dict:
    """The loss, metrics and loss weights ``model`` was compiled with (restored by ``load_model``)."""
    config = getattr(getattr(model, "_compile_config", None), "config", None) or {}
    return {k: config.get(k) for k in ("loss", "metrics", "loss_weights")}


def resume(model, *, seed=None, augmentation=None, user_ids=None):
    """Continue the Poisson DP-SGD run ``model`` carries (a model saved after :func:`tfdpmech.make_private`,
    loaded with ``keras.models.load_model``).

    Args:
        model: the loaded (compiled) model; its optimizer holds the run and its step count.
        seed: the sampling and noise seed of the remaining steps (None: OS entropy). The first part's seed
            continues its stream exactly; keep it secret outside experiments.
        augmentation: a run with augmentation multiplicity: its augmentation again (the saved model holds its K,
            not its code).
        user_ids: a user-level run: its user ids again, one per record (the saved model holds n and k; each
            user's place in the cycle over its records is recomputed from the sampling key).

    Returns:
        ``model``, private again: ``model.fit(x, y)`` trains the remaining epochs (the data must be the same
        n records), ``model.dp_sgd`` is the run and ``model.privacy_ledger`` its ledger, with no new release.

    Raises:
        ValueError: the model carries no run, the run has taken all its steps or stopped inside an epoch, its
            state does not read, or a grouped run lacks its augmentation or ids (before anything is trained or
            recorded).
    """
    if not isinstance(model, keras.Model):
        raise TypeError(f"model must be a keras.Model (e.g. keras.models.load_model(path)), got {type(model).__name__}")
    state = carried_run(model)
    if state is None:
        raise ValueError(
            f"model {getattr(model, 'name', model)!r} carries no DP-SGD run (its optimizer is "
            f"{type(getattr(model, 'optimizer', None)).__name__}); resume continues a model saved after "
            "tfdpmech.make_private(model, tfdpmech.DPSGD(...)). To train it privately, make it private again")
    dp = run_from_state(state, seed=seed, augmentation=augmentation, user_ids=user_ids)
    taken = state["steps_taken"]
    if taken >= dp.steps:
        raise ValueError(
            f"the model's DP-SGD run has taken all its {dp.steps} steps; to train further, start a new run that "
            "composes with it: tfdpmech.make_private(model, tfdpmech.DPSGD(...)) (its ledger then holds both)")
    if taken % dp.steps_per_epoch:
        raise ValueError(
            f"the model was saved after {taken} steps, inside an epoch of {dp.steps_per_epoch} steps; resume a "
            "checkpoint saved at an epoch's end (ModelCheckpoint saves there by default), or "
            "start a new run that composes with this one: tfdpmech.make_private(model, tfdpmech.DPSGD(...))")
    arguments = _compile_arguments(model)
    private = private_dpsgd_model(model, dp)
    dp.resume_compiled(private, **arguments)
    return private
