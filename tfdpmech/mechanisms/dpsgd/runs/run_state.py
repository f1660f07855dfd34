"""A Poisson DP-SGD run that travels with its model: ``model.save``, ``keras.models.load_model``, checkpoints.

The carrier is the model's optimizer, the one object Keras saves with its configuration *and* its
step count (``iterations``, the global step that keys the run's Poisson batches and noise). When
:func:`tfdpmech.make_private` compiles a model, its optimizer's class becomes the registered
tfdpmech subclass of the same Keras optimizer (``keras.optimizers.Adam`` → :class:`PrivateAdam`, same
variables, same update), which

* writes the run into the optimizer's config (``get_config()["tfdpmech_run"]``): the run's settings
  (n, q, σ, C, δ, epochs, accountant, the step at which it started), the steps it has taken and the
  whole privacy ledger. ``model.save`` and ``keras.callbacks.ModelCheckpoint`` therefore save the
  run with the model; ``keras.models.load_model`` rebuilds the optimizer with it (the classes are
  module attributes, so Keras finds them without ``custom_objects``). The sampling and noise keys are
  secret and are **not** saved: a resumed run draws its remaining steps from the seed given to
  :func:`tfdpmech.resume` (the same stream as the first part when it is the same seed) or from OS
  entropy (fresh independent Poisson draws: the same guarantee). A BandMF run (``bands > 1``) also keeps its noise
  buffer (the b − 1 past noise vectors) and a fingerprint of its sampling key as variables of the optimizer
  (:mod:`..noise.correlated_noise`, created by :meth:`_DPOptimizer.build`, so a loaded optimizer has the same
  variables and Keras loads them): **a checkpoint saved mid-run is then as secret as the seed**. The run's last
  planned step zeroes both; such a run resumes only with the seed it started with.
* refuses to apply gradients outside the DP train step (:func:`dp_step`): a loaded model's own
  ``fit`` (Keras's train step) would train without privacy while the saved ledger shows a guarantee,
  so it raises, naming :func:`tfdpmech.resume`. Compiling the model again with another optimizer is
  the user's own choice (the run's state goes with the optimizer).

:func:`carried_run` reads the run of a model's optimizer (live or loaded); a new DP-SGD run on that
model composes with it (:meth:`~tfdpmech.mechanisms.dpsgd.runs.base.DPSGDRun._record_release`), so no path
under-reports ε.
"""

from __future__ import annotations

import contextlib
import json
import threading

import keras

from ....accounting.ledger import PrivacyLedger
from ....accounting.ledger_file import _canonical
from ..noise.correlated_noise import make_noise_buffers

__all__ = ["DP_OPTIMIZERS", "dp_optimizer_class", "bind_run", "carried_run", "dp_step", "inner_optimizer",
           "RUN_STATE_FORMAT", "adopt_carried_releases", "saved_run"]

RUN_STATE_FORMAT = 1
_ACTIVE = threading.local()


def saved_run(dp) -> dict | None:
    """The JSON-compatible state of a compiled Poisson run ``dp``, as its optimizer saves it (None before its
    release: a model compiled by make_private and not yet fitted has spent nothing)."""
    if dp.release is None:
        return None
    given = "expected_batch_size" if dp.given_expected_batch_size else "sampling_probability"
    return {
        "format": RUN_STATE_FORMAT,
        "run": {
            "epsilon": dp.epsilon, "delta": dp.delta, "n": dp.n, given: getattr(dp, given), "epochs": dp.epochs,
            "noise_multiplier": dp.noise_multiplier, "l2_norm_clip": dp.l2_norm_clip, "accountant": dp.accountant,
            "path": dp.requested_path, "physical_batch_size": dp.physical_batch_size, "steps": dp.steps,
            "first_step": dp.first_step, "one_hot_labels": dp._one_hot_labels, "sparse_labels": dp._sparse_labels,
            "augmentation_multiplicity": dp.augmentation_multiplicity,
            "records_per_user": None if dp.users is None else dp.users.k,
            **({"bands": dp.bands} if dp.bands > 1 else {}),  # BandMF (its noise buffer: the optimizer's variables)
        },
        "ledger": dp.ledger.to_dict(),
        "release_index": [i for i, r in enumerate(dp.ledger.releases) if r is dp.release][0],
        "steps_taken": dp.steps_taken(),
    }


@contextlib.contextmanager
def dp_step():
    """The DP train step applies its noisy gradients inside this context (checked when the step is traced)."""
    depth = getattr(_ACTIVE, "depth", 0)
    _ACTIVE.depth = depth + 1
    try:
        yield
    finally:
        _ACTIVE.depth = depth


def _in_dp_step() -> bool:
    return getattr(_ACTIVE, "depth", 0) > 0


def _refusal(optimizer) -> RuntimeError:
    state = optimizer.tfdpmech_run_state() or {}
    run = state.get("run", {})
    taken, planned = state.get("steps_taken"), run.get("steps")
    where = f" ({taken} of its {planned} steps taken)" if taken is not None and planned is not None else ""
    return RuntimeError(
        f"this model's optimizer belongs to a Poisson DP-SGD run{where}: training it with Keras's own train step would "
        "train without privacy while its ledger shows a guarantee. Continue the run with model = "
        "tfdpmech.resume(model) then model.fit(x, y); or start a new run that composes with it, "
        "tfdpmech.make_private(model, tfdpmech.DPSGD(...)); or compile the model with an optimizer of your own to "
        "train it without DP-SGD"
    )


class _DPOptimizer:
    """Mixed into a Keras optimizer class: carries a DP-SGD run and applies gradients only in its DP step."""

    def __init__(self, *args, tfdpmech_run=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._tfdpmech_live = None
        self._tfdpmech_saved = None if tfdpmech_run is None else json.dumps(tfdpmech_run)  # a string: not tracked

    def tfdpmech_run_state(self) -> dict | None:
        """The run this optimizer carries, as the JSON-compatible dict :meth:`get_config` saves (None: none)."""
        live = getattr(self, "_tfdpmech_live", None)
        if live is not None:
            return live.run_state()
        saved = getattr(self, "_tfdpmech_saved", None)
        return None if saved is None else json.loads(saved)

    def tfdpmech_bands(self) -> int:
        """The bands of the run this optimizer carries (1: DP-SGD, no noise buffer)."""
        live = getattr(self, "_tfdpmech_live", None)
        if live is not None:
            return int(getattr(live, "bands", 1))
        state = self.tfdpmech_run_state() or {}
        return int(state.get("run", {}).get("bands", 1))

    def build(self, variables):
        """Keras's build, then BandMF's noise buffer (:mod:`..noise.correlated_noise`) for a run with bands > 1:
        a loaded model's optimizer has the same variables as the saved one, so Keras loads the buffer too."""
        super().build(variables)
        bands = self.tfdpmech_bands()
        if bands > 1:
            make_noise_buffers(self, variables, bands)

    def get_config(self):
        config = super().get_config()
        config["tfdpmech_run"] = self.tfdpmech_run_state()
        return config

    def finalize_variable_values(self, var_list):
        """Keras writes the weight average into the model when ``fit`` ends; a fit that leaves steps of the run for
        a later one keeps the raw weights (the average stays in the optimizer), so the next fit continues the same
        run as one fit would have. The average replaces the weights once the run's last step is taken."""
        live = getattr(self, "_tfdpmech_live", None)
        if live is not None and live.steps is not None and live.steps_taken() < live._planned_steps():
            return
        super().finalize_variable_values(var_list)

    def apply(self, *args, **kwargs):  # Keras 3: apply_gradients and LossScaleOptimizer come through here
        if not _in_dp_step():
            raise _refusal(self)
        return super().apply(*args, **kwargs)

    def apply_gradients(self, *args, **kwargs):  # Keras 2.15 (and the entry point on Keras 3)
        if not _in_dp_step():
            raise _refusal(self)
        return super().apply_gradients(*args, **kwargs)


def _optimizer_classes() -> dict:
    """Every concrete Keras optimizer class of ``keras.optimizers`` (not the base, not the loss-scale wrapper)."""
    found = {}
    for name in dir(keras.optimizers):
        cls = getattr(keras.optimizers, name)
        if (isinstance(cls, type) and issubclass(cls, keras.optimizers.Optimizer) and cls is not keras.optimizers.Optimizer
                and "LossScale" not in name and not name.startswith("_")):
            found[name] = cls
    return found


def _make_class(base: type) -> type:
    name = f"Private{base.__name__}"
    cls = type(name, (_DPOptimizer, base), {
        "__module__": __name__,
        "__doc__": (f"``keras.optimizers.{base.__name__}`` carrying a Poisson DP-SGD run (see "
                    f":mod:`{__name__}`): the same update, applied only by the run's DP train step."),
    })
    return keras.saving.register_keras_serializable(package="tfdpmech")(cls)


DP_OPTIMIZERS = {base: _make_class(base) for base in _optimizer_classes().values()}
globals().update({cls.__name__: cls for cls in DP_OPTIMIZERS.values()})  # Keras finds them by module and name


def dp_optimizer_class(base: type) -> type:
    """The tfdpmech subclass of the Keras optimizer class ``base`` (made on demand for a user's own class;
    such a model loads only where that class is registered again)."""
    if issubclass(base, _DPOptimizer):
        return base
    if base not in DP_OPTIMIZERS:
        DP_OPTIMIZERS[base] = _make_class(base)
    return DP_OPTIMIZERS[base]


def inner_optimizer(optimizer):
    """The optimizer a ``LossScaleOptimizer`` (mixed_float16) wraps, else ``optimizer`` itself."""
    inner = getattr(optimizer, "inner_optimizer", None)
    return inner if inner is not None and "LossScale" in type(optimizer).__name__ else optimizer


def bind_run(optimizer, run) -> None:
    """Make ``optimizer`` (or the one a loss-scale wrapper holds) carry the live ``run`` (in place: its
    variables and step count are kept)."""
    target = inner_optimizer(optimizer)
    if not isinstance(target, _DPOptimizer):
        target.__class__ = dp_optimizer_class(type(target))
        target._tfdpmech_saved = None
    target._tfdpmech_live = run


def carried_run(model) -> dict | None:
    """The DP-SGD run ``model``'s optimizer carries (a dict, see :meth:`DPSGD.run_state`), or None."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        return None
    target = inner_optimizer(optimizer)
    if not isinstance(target, _DPOptimizer):
        return None
    state = target.tfdpmech_run_state()
    if state is not None:
        state["steps_taken"] = max(0, int(target.iterations.numpy()) - int(state["run"]["first_step"]))
    return state


def adopt_carried_releases(ledger, state: dict):
    """Record in ``ledger`` every release of a carried run's ledger that it does not hold yet (compared by
    their full record: each DP-SGD release names its run), with the steps each was followed by.

    Returns:
        the carried run's own release, as held by ``ledger``.
    """
    carried = PrivacyLedger.from_dict(state["ledger"])
    held = {_canonical(r): r for r in ledger.releases}
    own = None
    for index, release in enumerate(carried.releases):
        key = _canonical(release)
        if key not in held:
            held[key] = ledger.record(release)
        steps = state["steps_taken"] if index == state["release_index"] else carried.steps_taken(release)
        if steps is not None:
            ledger.record_progress(held[key], int(steps))
        if index == state["release_index"]:
            own = held[key]
    return own
