"""One chunked DP-SGD step in a fresh process (run by test_mixed_precision_and_chunks.py).

Usage: python _chunk_memory_worker.py ROWS
Clips a batch of ROWS records 256 at a time (physical_batch_size) through a convolution with 200 KB of
activations per record, and prints the peak growth of the process RSS over the step in bytes
(:class:`~tfdpmech.experiments.measuring.PeakMemory`, sampled every 2 ms).
"""

import sys

import keras
import numpy as np
import tensorflow as tf

from tfdpmech.experiments.measuring import PeakMemory
from tfdpmech.mechanisms.dpsgd.clipping.chunked_clipping import chunked_clipped_gradient_sum
from tfdpmech.mechanisms.dpsgd.clipping import per_example_loss

CHUNK = 256


def main(rows: int) -> None:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(64, 3, padding="same", activation="tanh"),
                              keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)])
    loss = per_example_loss(keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    signature = [tf.TensorSpec((None, 28, 28, 1), tf.float32), tf.TensorSpec((None,), tf.int64),
                 tf.TensorSpec((None,), tf.float32)]
    step = tf.function(lambda x, y, w: chunked_clipped_gradient_sum(model, loss, x, y, w, 1.0, "fast_clipping",
                                                                    CHUNK)[0], input_signature=signature)
    rng = np.random.default_rng(0)
    x, y = rng.random((rows, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, rows)
    step(x[:2 * CHUNK], y[:2 * CHUNK], np.ones(2 * CHUNK, np.float32))  # traced once, for any number of rows
    with PeakMemory(interval=0.002) as memory:  # the growth of the process RSS over the step
        step(x, y, np.ones(rows, np.float32))
    print(memory.peak_bytes)


if __name__ == "__main__":
    main(int(sys.argv[1]))
