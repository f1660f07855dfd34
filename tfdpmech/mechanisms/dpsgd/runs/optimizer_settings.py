"""The optimiser of a DP-SGD run in one frozen object: :class:`OptimizerSettings`.

``DPSGD(..., optimizer="adam")`` and ``ShuffledDPSGD(..., optimizer="sgd")`` name a Keras optimizer
with its default step size; ``optimizer=OptimizerSettings("sgd", learning_rate=0.5, momentum=0.9)``
sets the rest. The step size lives with the optimizer, as in Keras (``keras.optimizers.Adam(1e-3)``):
its default depends on the optimizer (:data:`DEFAULT_LEARNING_RATES`), and the momentum, the schedule
and the weight average are the optimizer's too. Everything here reads only the step count and the
released noisy gradients: post-processing, no privacy cost.
"""

from __future__ import annotations

import dataclasses
import numbers

from ....validation import _describe, check_choice, check_positive_real

__all__ = ["OPTIMIZERS", "DEFAULT_LEARNING_RATES", "LR_SCHEDULES", "OptimizerSettings", "resolve_optimizer",
           "check_keras_optimizer_options"]

OPTIMIZERS = ("adam", "sgd")
DEFAULT_LEARNING_RATES = {"adam": 1e-3, "sgd": 0.1}
LR_SCHEDULES = ("constant", "cosine")

_OWNER = "OptimizerSettings"


@dataclasses.dataclass(frozen=True)
class OptimizerSettings:
    """The Keras optimizer a DP-SGD run steps with, its step size, momentum, schedule and weight average.

    Attributes:
        name: ``"adam"`` or ``"sgd"``.
        learning_rate: the step size; None means the optimizer's default (:attr:`step_size`:
            1e-3 for Adam, 0.1 for SGD).
        momentum: momentum of ``"sgd"`` in [0, 1) (0 = plain SGD); Adam takes none.
        lr_schedule: ``"constant"`` or ``"cosine"`` (cosine decay to 0 over the run's steps).
        ema_momentum: None, or the momentum in (0, 1) of an exponential moving average of the
            weights that replaces them when ``fit`` ends (Keras ``use_ema``); validation during
            ``fit`` scores the average (:mod:`.weight_average`).
        ema_warmup: False for Keras's average (the weights copied at the first step, then the fixed
            decay), True for De et al.'s (2022) warm-up, decay ``min(ema_momentum, (1 + t) / (10 + t))``
            at step t (Keras 3).

    ``DPSGD`` takes every field; ``ShuffledDPSGD`` takes ``name`` and ``learning_rate`` only.

    Raises:
        ValueError: an unknown name or schedule, a learning rate that is not finite and > 0, a
            momentum outside [0, 1) or given with Adam, an ``ema_momentum`` outside (0, 1), an
            ``ema_warmup`` without ``ema_momentum``.
        TypeError: a number given as a string or bool.

    Example:
        >>> DPSGD(1.0, 1e-5, expected_batch_size=256, epochs=10, n=60_000,    # doctest: +SKIP
        ...              optimizer=OptimizerSettings("sgd", learning_rate=0.5, momentum=0.9))
    """

    name: str = "adam"
    learning_rate: float | None = None
    momentum: float = 0.0
    lr_schedule: str = "constant"
    ema_momentum: float | None = None
    ema_warmup: bool = False

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "name", check_choice(self.name, _name("name"), OPTIMIZERS))
        if self.learning_rate is not None:
            set_(self, "learning_rate", check_positive_real(
                self.learning_rate, _name("learning_rate"),
                hint=f"pass the step size, or None for the optimizer's default {DEFAULT_LEARNING_RATES}"))
        set_(self, "momentum", _fraction(self.momentum, "momentum", "[0, 1)", lambda m: 0 <= m < 1,
                                         "0 is plain SGD, 0.9 a usual momentum"))
        if self.momentum and self.name != "sgd":
            raise ValueError(f"{_name('momentum')}={self.momentum!r} applies to name='sgd' only, got "
                             f"name={self.name!r}; drop momentum, or pass name='sgd'")
        set_(self, "lr_schedule", check_choice(self.lr_schedule, _name("lr_schedule"), LR_SCHEDULES))
        if self.ema_momentum is not None:
            set_(self, "ema_momentum", _fraction(self.ema_momentum, "ema_momentum", "(0, 1) or be None",
                                                 lambda m: 0 < m < 1, "e.g. 0.999, or None for no weight average"))
        if not isinstance(self.ema_warmup, bool):
            raise TypeError(f"{_name('ema_warmup')} must be True or False, got {_describe(self.ema_warmup)}")
        if self.ema_warmup and self.ema_momentum is None:
            raise ValueError(f"{_name('ema_warmup')}=True warms up a weight average, but ema_momentum is None; pass "
                             "ema_momentum=0.999 (the decay the warm-up rises to) or ema_warmup=False")

    @property
    def step_size(self) -> float:
        """The learning rate the optimizer is built with: ``learning_rate``, or the optimizer's default."""
        return DEFAULT_LEARNING_RATES[self.name] if self.learning_rate is None else self.learning_rate

    @property
    def plain(self) -> bool:
        """No momentum, a constant step size and no weight average (all a ``ShuffledDPSGD`` run supports)."""
        return not self.extras()

    def extras(self) -> dict:
        """The fields beyond name and learning rate that differ from their defaults (``{}`` when :attr:`plain`)."""
        default = OptimizerSettings(self.name)
        return {k: getattr(self, k) for k in ("momentum", "lr_schedule", "ema_momentum", "ema_warmup")
                if getattr(self, k) != getattr(default, k)}


def _name(field: str) -> str:
    return f"{_OWNER}.{field}"


def _fraction(value, field: str, interval: str, inside, hint: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{_name(field)} must be a real number in {interval}, got {_describe(value)}; {hint}")
    if not inside(value):
        raise ValueError(f"{_name(field)} must lie in {interval}, got {value!r}; {hint}")
    return float(value)


def resolve_optimizer(optimizer) -> OptimizerSettings:
    """``optimizer`` (a name or :class:`OptimizerSettings`) checked, as :class:`OptimizerSettings`.

    Args:
        optimizer: ``"adam"``, ``"sgd"`` (with its default step size) or an :class:`OptimizerSettings`.

    Raises:
        TypeError: an ``optimizer`` that is neither a name nor an :class:`OptimizerSettings`.
        ValueError: an unknown optimizer name.
    """
    if isinstance(optimizer, OptimizerSettings):
        return optimizer
    if not isinstance(optimizer, str):
        raise TypeError(f"optimizer must be a name {list(OPTIMIZERS)} or an OptimizerSettings, got "
                        f"{_describe(optimizer)}; pass optimizer='adam' or optimizer=OptimizerSettings(...)")
    return OptimizerSettings(check_choice(optimizer, "optimizer", OPTIMIZERS))


def check_keras_optimizer_options(optimizer) -> None:
    """Refuse the Keras optimizer options that would change what a DP step applies (before any release).

    ``gradient_accumulation_steps`` applies the noisy gradient of one Poisson batch only every k-th train
    step and ``loss_scale_factor`` divides it by a factor the DP step never multiplied in: both train
    something other than the accounted run. ``physical_batch_size`` is the DP way to split a large batch.
    """
    if optimizer is None:
        return
    steps = getattr(optimizer, "gradient_accumulation_steps", None)
    if steps not in (None, 1):
        raise ValueError(
            f"optimizer gradient_accumulation_steps={steps}: each DP-SGD step is one Poisson batch with its own noise; "
            "accumulating Keras steps would apply one batch's noisy gradient per k steps while each step is charged. "
            "Pass DPSGD(..., physical_batch_size=...) instead (the batch is clipped in chunks, one noisy step), and "
            "an optimizer without gradient_accumulation_steps")
    factor = getattr(optimizer, "loss_scale_factor", None)
    if factor not in (None, 1, 1.0):
        raise ValueError(
            f"optimizer loss_scale_factor={factor}: the DP step scales its own backward pass (see mixed precision in "
            "docs/mechanisms/dpsgd.md), so the optimizer would divide the noisy gradient by a factor nothing "
            "multiplied in; pass an optimizer without loss_scale_factor")
