"""Logical batches larger than memory: one Poisson batch clipped in chunks of ``physical_batch_size`` records.

DP-SGD's update at step t is ``(Σ_{i∈B_t} clip_C(∇θ ℓ_i) + N(0, σ²C²I)) / L`` (Abadi et al. 2016,
Algorithm 1). The sum over ``B_t`` splits into sums over chunks of the batch: each chunk's clipped sum
is computed on its own (:func:`~.clipped_sums.clipped_gradient_sum`), the sums are added, and the train step
then adds the noise **once** and divides by L, as for an unchunked batch. The accounting does not
change (one Poisson-sampled Gaussian step per logical batch); peak memory is that of one chunk. This is
Opacus's ``BatchMemoryManager`` and jax-privacy's ``gradient_accumulation_steps`` inside one train step,
so Keras sees one batch, one optimizer step, one ticket check.
"""

from __future__ import annotations

import tensorflow as tf

from ....validation import check_positive_int
from .clipped_sums import clipped_gradient_sum

__all__ = ["check_physical_batch_size", "chunked_clipped_gradient_sum"]


def check_physical_batch_size(value) -> int | None:
    """``value`` as the most records one chunk holds (None: no chunking).

    Raises:
        TypeError / ValueError: not None or a positive int (the message names ``physical_batch_size``).
    """
    return None if value is None else check_positive_int(value, "physical_batch_size")


def _rows_array(t) -> tf.TensorArray:
    """A growing array of chunks like ``t`` (any number of rows each), concatenated along the rows."""
    shape = tf.TensorShape([None]).concatenate(t.shape[1:])
    return tf.TensorArray(t.dtype, size=0, dynamic_size=True, infer_shape=False, element_shape=shape)


def chunked_clipped_gradient_sum(model, loss_fn, x, y, weights, l2_norm_clip: float, method: str,
                                 physical_batch_size: int | None, *, training=True, group_size: int = 1):
    """:func:`~.clipped_sums.clipped_gradient_sum` of one batch, computed ``physical_batch_size`` rows at a time.

    Returns the same ``(clipped sum, y_pred, norms)`` as the unchunked call (equal up to the order of the
    float additions). The first chunk runs outside the loop (it fixes the structure of ``y_pred``); the
    rest in a ``tf.while_loop``, so only one chunk's activations are alive at once. Both call one ``tf.function``
    of the chunk's index, so the clipped step is traced once.
    """
    if physical_batch_size is None:
        return clipped_gradient_sum(model, loss_fn, x, y, weights, l2_norm_clip, method, training=training,
                                    group_size=group_size)
    chunk = (int(physical_batch_size) // group_size) * group_size  # whole groups of rows only
    rows = tf.shape(weights)[0]

    def part(i):
        start = i * chunk
        end = tf.minimum(start + chunk, rows)
        return tf.nest.map_structure(lambda t: t[start:end], (x, y, weights))

    # one trace for every chunk: the first chunk and the loop's body call the same function (inline, a deep
    # network's clipped step, its forward and backward passes and every layer's norm, would be traced for each)
    @tf.function(autograph=False)
    def clipped(i):
        xs, ys, ws = part(i)
        return clipped_gradient_sum(model, loss_fn, xs, ys, ws, l2_norm_clip, method, training=training,
                                    group_size=group_size)

    sums, y_pred, norms = clipped(tf.constant(0))
    preds = tf.nest.flatten(y_pred)
    arrays = [_rows_array(p).write(0, p) for p in preds]
    norm_array = _rows_array(norms).write(0, norms)
    chunks = (rows + chunk - 1) // chunk

    def body(i, sums, norm_array, arrays):
        more, more_pred, more_norms = clipped(i)
        sums = [a + b for a, b in zip(sums, more)]
        arrays = [ta.write(i, p) for ta, p in zip(arrays, tf.nest.flatten(more_pred))]
        return i + 1, sums, norm_array.write(i, more_norms), arrays

    # parallel_iterations=1: the chunks do not depend on each other, so TensorFlow would run up to 10 at once
    # (its default), holding 10 chunks' activations: the memory bound is one chunk
    _, sums, norm_array, arrays = tf.while_loop(lambda i, *_: i < chunks, body,
                                                (tf.constant(1), list(sums), norm_array, arrays),
                                                parallel_iterations=1)
    y_pred = tf.nest.pack_sequence_as(y_pred, [ta.concat() for ta in arrays])
    return sums, y_pred, norm_array.concat()
