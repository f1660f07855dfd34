"""The method contract: registration, mode words, the Prepared record."""

import numpy as np
import pytest

from tfdpmech.experiments import METHODS, Prepared, register_method
from tfdpmech.experiments.registry import method


def test_every_method_uses_a_mode_word():
    assert METHODS
    for m in METHODS.values():
        assert m.mode in ("reference", "private", "none"), m.name
        assert m.takes_epsilon == (m.mode != "none") or m.name.startswith("public")


def test_register_rejects_unknown_mode_and_duplicate_name():
    with pytest.raises(ValueError, match="mode='paper'"):
        register_method("x_bad_mode", lambda ctx, e, s: None, "d", mode="paper")
    with pytest.raises(ValueError, match="already registered"):
        register_method("nonprivate", lambda ctx, e, s: None, "d", mode="none")
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        method("nope")


def test_single_logit_is_read_as_binary_probabilities():
    def model(x, training=False):
        return np.array([[0.0], [100.0]], np.float32)

    p = Prepared(model).probabilities(np.zeros((2, 3)))
    np.testing.assert_allclose(p, [[0.5, 0.5], [0.0, 1.0]], atol=1e-6)
