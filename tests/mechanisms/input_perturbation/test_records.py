"""Per-record steps of input perturbation: label checks and k-ary randomized response."""

import math

import numpy as np
import pytest

from tfdpmech.mechanisms.input_perturbation import check_labels_in_classes, randomized_response


def test_labels_mapping():
    assert check_labels_in_classes(np.array([-1, 1, 1]), 2).tolist() == [0, 1, 1]
    assert check_labels_in_classes(np.array([0, 1, 0]), 2).tolist() == [0, 1, 0]
    assert check_labels_in_classes(np.eye(3)[[2, 0, 1]], 3).tolist() == [2, 0, 1]
    with pytest.raises(ValueError, match="declared"):
        check_labels_in_classes(np.array([-1, 0, 1]), 2)
    with pytest.raises(ValueError):
        check_labels_in_classes(np.array([0.5, 1.0]), 3)


def test_randomized_response_rates():
    rng = np.random.default_rng(0)
    labels = np.zeros(40_000, dtype=int)
    out = randomized_response(labels, math.log(3.0), 2, rng)  # keep with probability 3/4
    assert abs((out == 0).mean() - 0.75) < 0.01
    out = randomized_response(labels, 1.0, 4, rng)
    keep = math.e / (math.e + 3)
    assert abs((out == 0).mean() - keep) < 0.01 and set(np.unique(out)) == {0, 1, 2, 3}
