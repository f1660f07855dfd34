"""Fixtures shared across the test suite."""

from __future__ import annotations

import pytest

from tfdpmech import data


@pytest.fixture(scope="session")
def mnist_sample():
    """The embedded MNIST sample (8,000 train / 2,000 test, [0, 1] images, one-hot labels), loaded once.

    Its arrays are read-only, so tests that slice it cannot change it for the others.
    """
    return data.load("mnist_sample")
