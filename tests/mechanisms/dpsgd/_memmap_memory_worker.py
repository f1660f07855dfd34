"""One DP-SGD epoch over a NumPy memmap in a fresh process (run by test_record_sources.py).

Usage: python _memmap_memory_worker.py PATH
Prints the growth of the process's anonymous resident memory (RssAnon: the memmap's file pages are not
in it) over the fit, in bytes, sampled every 2 ms.
"""

import sys
import threading
import time

import keras
import numpy as np

import tfdpmech


def _anonymous_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


def main(path: str) -> None:
    x = np.load(path, mmap_mode="r")
    y = np.arange(len(x)) % 3
    keras.utils.set_random_seed(0)
    model = tfdpmech.make_private(keras.Sequential([keras.Input(x.shape[1:]), keras.layers.Dense(3)]),
                                  tfdpmech.DPSGD(epsilon=1.0, delta=1e-6, n=len(x), expected_batch_size=64, epochs=1,
                                                 seed=0))
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    start = peak = _anonymous_bytes()
    done = threading.Event()

    def watch():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _anonymous_bytes())
            time.sleep(0.002)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    model.fit(x, y, verbose=0)
    done.set()
    watcher.join()
    print(peak - start)


if __name__ == "__main__":
    main(sys.argv[1])
