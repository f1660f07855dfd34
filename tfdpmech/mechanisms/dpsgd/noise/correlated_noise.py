"""BandMF's correlated noise, stream-wise: ``w = C⁻¹ z`` one step at a time, with b − 1 past noise vectors.

The noisy gradient sum of step t is ``x_t + w_t`` with ``C w = z`` (Choquette-Choo et al. 2023, "Amplified banded
matrix factorization", arXiv:2306.08153: the mechanism releases ``A (x + C⁻¹ z)``; ``C`` the b-banded Toeplitz strategy of
:mod:`.banded_strategy`, ``c_0 = 1``). Row t of ``C w = z`` is ``Σ_{j<b} c_j w_{t−j} = z_t``, so (back-substitution)::

    w_t = z_t − Σ_{j=1}^{b−1} c_j w_{t−j}          (w_{t−j} = 0 before the run's first step)

``z_t`` is the step's standard draw (:func:`~tfdpmech.mechanisms.dpsgd.runs.train_step.step_noise` of the secret key
and the global step), with standard deviation ``σ · C_clip · sens(C)``, ``sens(C)`` the strategy's largest column
norm: the noise ``z`` of the "``C x + z``" view of the mechanism is then σ times the sensitivity of ``C x`` under
b-min-separated participation (:mod:`.banded_strategy`), what the amplified accounting assumes.

State: per trainable variable, one non-trainable variable of shape ``(b − 1, *shape)`` holding ``w_{t−1} … w_{t−b+1}``
(never a steps × steps matrix). They are variables of the model's optimizer (:mod:`..runs.run_state`), so
``model.save`` and checkpoints keep them and :func:`tfdpmech.resume` continues the stream exactly. **They are as
secret as the seed**: with them, an iterate and the next one give away a step's clipped gradient sum. The buffer is
set to zero by the run's last planned step, so a model saved after a completed run holds none of it; a checkpoint
saved mid-run must be kept secret like the seed. Under ``tf.distribute`` every replica computes the same ``w_t``
(the same key, step and buffer; the variables aggregate ``ONLY_FIRST_REPLICA``) and only replica 0 adds it.
"""

from __future__ import annotations

import hashlib

import keras
import numpy as np
import tensorflow as tf

__all__ = ["BandedNoise", "BUFFER_NAME", "noise_buffers", "make_noise_buffers", "reset_noise_buffers",
           "buffer_bands", "key_check", "stored_key_check"]

BUFFER_NAME = "bandmf_noise_buffer"
CHECK_NAME = "bandmf_key_check"
_ATTRIBUTE = "_tfdpmech_noise_buffers"
# Keras 3's optimizer variables take a replica aggregation (the buffers are written by every replica, the first's
# value kept); Keras 2.15's add_variable has none (BandMF then trains without a tf.distribute strategy: banded_run.py)
_AGGREGATION = {"aggregation": "only_first_replica"} if int(keras.__version__.split(".")[0]) >= 3 else {}


def key_check(key) -> int:
    """A 62-bit fingerprint (never 0) of the run's secret sampling key: the buffer belongs to the stream of that key
    (the cyclic partitions and the noise), and a resumed run must draw from the same one. Kept beside the buffer and
    zeroed with it at the run's end, as secret as the buffer."""
    digest = hashlib.sha256(b"tfdpmech-bandmf|" + ",".join(str(int(w)) for w in key).encode()).digest()
    return (int.from_bytes(digest[:8], "big") & ((1 << 62) - 1)) | 1


def stored_key_check(optimizer) -> int | None:
    """The key fingerprint the optimizer's buffer was written under (0: a stream not started or ended), or None."""
    held = getattr(optimizer, _ATTRIBUTE, None)
    return None if not held else int(held[-1].numpy())


def noise_buffers(optimizer):
    """The BandMF noise buffers ``optimizer`` holds (one per trainable variable), or None."""
    held = getattr(optimizer, _ATTRIBUTE, None)
    return None if not held else held[:-1]


def buffer_bands(optimizer) -> int | None:
    """The bands b of the buffers ``optimizer`` holds (their first dimension + 1), or None without buffers."""
    buffers = noise_buffers(optimizer)
    return None if not buffers else int(buffers[0].shape[0]) + 1


def make_noise_buffers(optimizer, variables, bands: int) -> list:
    """Create (once) the zeroed buffers of ``bands − 1`` past noise vectors for each of ``variables``, and the key
    fingerprint (:func:`key_check`), as variables of ``optimizer`` (tracked after its own: saved and loaded with it).

    Raises:
        ValueError: ``optimizer`` already holds buffers for another number of bands.
    """
    held = buffer_bands(optimizer)
    if held is not None:
        if held != bands:
            raise ValueError(f"this optimizer holds the BandMF noise buffer of a run with bands={held}, not {bands}; "
                             "compile the model with a new optimizer for this run")
        return noise_buffers(optimizer)
    buffers = [optimizer.add_variable(shape=(bands - 1, *tuple(v.shape)), initializer="zeros",
                                      dtype=_float_dtype(v.dtype), name=BUFFER_NAME, **_AGGREGATION)
               for v in variables]
    check = optimizer.add_variable(shape=(), initializer="zeros", dtype="int64", name=CHECK_NAME, **_AGGREGATION)
    # past Keras's attribute tracking: add_variable has tracked each one, once
    object.__setattr__(optimizer, _ATTRIBUTE, (*buffers, check))
    return noise_buffers(optimizer)


def reset_noise_buffers(optimizer) -> None:
    """Zero the buffers ``optimizer`` holds and their key fingerprint (a new run starts with no past noise)."""
    for buffer in getattr(optimizer, _ATTRIBUTE, None) or ():
        buffer.assign(tf.zeros(buffer.shape, buffer.dtype))


def _float_dtype(dtype) -> str:
    name = getattr(dtype, "name", str(dtype))
    return name if name in ("float32", "float64") else "float32"


class BandedNoise:
    """The noise of a BandMF run's steps (see the module docstring).

    Args:
        coefficients: ``c_0 = 1, c_1 … c_{b−1}`` of the strategy.
        sensitivity: ``sens(C)``, the factor of the standard draws' deviation.
        end_step: a callable giving the global step after the run's last planned step (read when the train step is
            traced): the step that reaches it leaves the buffer zeroed.
        key: the run's secret sampling key: a step refuses a buffer written under another key (:func:`key_check`).
    """

    def __init__(self, coefficients, sensitivity: float, end_step, key):
        self.coefficients = np.asarray(coefficients, dtype=np.float64)
        self.bands = len(self.coefficients)
        self.sensitivity = float(sensitivity)
        self.end_step = end_step
        self.check = key_check(key)

    def __call__(self, optimizer, variables, standard, step):
        """``(w_t for every variable, the buffer updates)`` from the step's draws ``standard`` (``z_t``) at ``step``.

        The updates are ``(buffer, new value)`` pairs: the train step assigns them with the optimizer's update only
        (:meth:`assign`).
        """
        buffers = make_noise_buffers(optimizer, variables, self.bands)
        check = getattr(optimizer, _ATTRIBUTE)[-1]
        stored, expected = tf.convert_to_tensor(check), tf.constant(self.check, tf.int64)
        same_stream = tf.debugging.Assert(
            tf.logical_or(tf.equal(stored, 0), tf.equal(stored, expected)),
            ["BandMF: the optimizer's noise buffer was written under another sampling key; resume the run with the "
             "seed it started with (nothing of this step was applied)"])
        keep = tf.cast(tf.cast(step, tf.int64) + 1 < tf.cast(self.end_step(), tf.int64), tf.float32)
        noise, updates = [], [(check, expected * tf.cast(keep, tf.int64))]
        for z, buffer in zip(standard, buffers):
            with tf.control_dependencies([same_stream]):
                past = tf.identity(tf.convert_to_tensor(buffer))
            weights = tf.reshape(tf.constant(self.coefficients[1:], past.dtype),
                                 [self.bands - 1] + [1] * (past.shape.rank - 1))
            w = tf.cast(z, past.dtype) - tf.reduce_sum(weights * past, axis=0)
            noise.append(tf.cast(w, z.dtype))
            shifted = tf.concat([w[tf.newaxis], past[:-1]], axis=0) * tf.cast(keep, past.dtype)
            updates.append((buffer, shifted))
        return noise, updates

    @staticmethod
    def assign(updates) -> None:
        """Write the buffer updates of :meth:`__call__` (inside the train step's update)."""
        for buffer, value in updates:
            buffer.assign(value)
