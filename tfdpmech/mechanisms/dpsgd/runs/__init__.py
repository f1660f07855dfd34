"""The run around a DP-SGD step: the Poisson and shuffled runs, their calibration, engines and train step, the guards
on the compiled model, the optimizer, several workers, saving and resuming a run, and the stated recipe."""
