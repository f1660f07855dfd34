"""Averaged weights as the strongest DP-SGD results use them: a warmed-up average, scored through the average.

Keras's ``use_ema=True`` copies the weights at the first step and then decays at a fixed rate ``d``. De et al.
(2022, "Unlocking high-accuracy differentially private image classification through scale", Section 3.1 and
Appendix C) warm the average up instead: at step ``t`` (from 0) the decay is ``min(d, (1 + t) / (10 + t))``,
so the first steps' weights, far from the end of training, weigh little once many steps have passed.
:class:`WarmupEMAAdam` and :class:`WarmupEMASGD` are Keras's Adam and SGD with that decay
(``OptimizerSettings(ema_momentum=d, ema_warmup=True)``).

Validation during ``fit`` reads the average: a private model's ``fit`` adds Keras's ``SwapEMAWeights`` to its
callbacks whenever the optimizer averages (:func:`with_averaged_evaluation`), and Keras writes the average into
the model when the fit that takes the run's last step ends. Between epochs, and between the fits of one run, the
model holds its raw weights and the optimizer the average (``run_state``'s ``finalize_variable_values``), so a
checkpoint or a saved run resumes exactly; a callback that scores the model mid-run does so inside
:func:`scoring_the_average`. The average reads only the released noisy updates: post-processing, never charged;
the ledger is unchanged.
"""

from __future__ import annotations

import contextlib

import keras
import tensorflow as tf

__all__ = ["WarmupEMAAdam", "WarmupEMASGD", "warmup_decay", "averaging_optimizer", "with_averaged_evaluation",
           "scoring_the_average"]


def warmup_decay(step, ema_momentum: float):
    """The average's decay at step ``step`` (0 for the first): ``min(d, (1 + t) / (10 + t))`` (De et al. 2022)."""
    t = tf.cast(step, tf.float32)
    return tf.minimum(tf.constant(ema_momentum, tf.float32), (1.0 + t) / (10.0 + t))


class _WarmupAverage:
    """Keras's moving average of the trainable weights with De et al.'s warm-up of the decay."""

    def _update_model_variables_moving_average(self, trainable_variables):
        if not self.use_ema:
            return
        decay = warmup_decay(self.iterations, self.ema_momentum)  # Keras counts the step after this update
        for var, average in zip(trainable_variables, self._model_variables_moving_average):
            if average is not None:
                d = tf.cast(decay, var.dtype)
                average.assign(d * average + (1.0 - d) * var)


@keras.saving.register_keras_serializable(package="tfdpmech")
class WarmupEMAAdam(_WarmupAverage, keras.optimizers.Adam):
    """``keras.optimizers.Adam`` whose weight average (``use_ema=True``) warms up as De et al. (2022) do."""


@keras.saving.register_keras_serializable(package="tfdpmech")
class WarmupEMASGD(_WarmupAverage, keras.optimizers.SGD):
    """``keras.optimizers.SGD`` whose weight average (``use_ema=True``) warms up as De et al. (2022) do."""


def averaging_optimizer(name: str, learning_rate, *, momentum: float = 0.0, ema_momentum=None,
                        ema_warmup: bool = False):
    """The Keras optimizer of a run: Adam or SGD, with Keras's average, De et al.'s warmed-up one, or none."""
    if ema_warmup and int(keras.__version__.split(".")[0]) < 3:
        raise ValueError(f"ema_warmup=True needs Keras 3 (its optimizers count the step after the average's "
                         f"update); this is Keras {keras.__version__}: pass ema_warmup=False for Keras's own average")
    ema = {} if ema_momentum is None else {"use_ema": True, "ema_momentum": ema_momentum}
    if name == "adam":
        return (WarmupEMAAdam if ema_warmup else keras.optimizers.Adam)(learning_rate=learning_rate, **ema)
    return (WarmupEMASGD if ema_warmup else keras.optimizers.SGD)(learning_rate=learning_rate, momentum=momentum,
                                                                  **ema)


def averages(optimizer) -> bool:
    """Whether ``optimizer`` (or the optimizer it wraps) keeps a weight average."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    return bool(getattr(inner, "use_ema", False))


def with_averaged_evaluation(model, callbacks: list) -> list:
    """``callbacks`` with Keras's ``SwapEMAWeights()`` first when the model's optimizer averages (and none is there
    yet): validation then scores the average, as the model holds it once ``fit`` ends."""
    swap = getattr(keras.callbacks, "SwapEMAWeights", None)
    if swap is None or not averages(getattr(model, "optimizer", None)):
        return callbacks
    if any(isinstance(c, swap) for c in callbacks):
        return callbacks
    return [swap(), *callbacks]


@contextlib.contextmanager
def scoring_the_average(model):
    """Inside, ``model`` holds its optimizer's weight average (when it keeps one); its raw weights come back after."""
    optimizer = getattr(getattr(model, "optimizer", None), "inner_optimizer", getattr(model, "optimizer", None))
    if not averages(optimizer) or not getattr(optimizer, "_model_variables_moving_average", None):
        yield
        return
    pairs = [(v, a) for v, a in zip(model.trainable_variables, optimizer._model_variables_moving_average)
             if a is not None]
    raw = [v.numpy() for v, _ in pairs]
    for var, average in pairs:
        var.assign(average)
    try:
        yield
    finally:
        for (var, _), value in zip(pairs, raw):
            var.assign(value)
