"""One chunked DP-SGD step in a fresh process (run by test_mixed_precision_and_chunks.py).

Usage: python _chunk_memory_worker.py ROWS
Clips a batch of ROWS records 256 at a time (physical_batch_size) through a convolution with 200 KB of
activations per record, and prints the peak growth of the process RSS over the step in bytes
(:func:`tfdpmech.experiments.step_memory.clipped_step_peak_bytes`: PeakMemory, the kernel's high-water mark).
"""

import sys

import keras
import numpy as np

from tfdpmech.experiments.step_memory import clipped_step_peak_bytes

CHUNK = 256


def main(rows: int) -> None:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(64, 3, padding="same", activation="tanh"),
                              keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)])
    rng = np.random.default_rng(0)
    x, y = rng.random((rows, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, rows)
    print(clipped_step_peak_bytes(model, x, y, CHUNK, keras.losses.SparseCategoricalCrossentropy(from_logits=True)))


if __name__ == "__main__":
    main(int(sys.argv[1]))
