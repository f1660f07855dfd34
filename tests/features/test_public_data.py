"""Public data sources: a disjoint part of a training split, and scikit-learn's digits framed like MNIST."""

from __future__ import annotations

import numpy as np
import pytest

from tfdpmech.features import check_disjoint, load_digits_public, public_split, split_public


def test_split_public_is_disjoint(mnist_sample):
    sp = split_public(mnist_sample, 1000)
    assert len(sp.x_public) == 1000 and len(sp.x_private) == len(mnist_sample.x_train) - 1000
    assert "first 1000" in sp.source
    check_disjoint(sp.x_public, sp.x_private)
    assert public_split("300", mnist_sample).x_public.shape[0] == 300


def test_overlap_detected():
    x = np.random.default_rng(0).uniform(0, 1, (10, 2, 2, 1)).astype(np.float32)
    with pytest.raises(ValueError, match="shares 3 record"):
        check_disjoint(x[:5], np.concatenate([x[:3], x[6:]]))
    check_disjoint(x[:5], x[5:])


def test_digits_public_source(mnist_sample):
    x, y = load_digits_public()
    assert x.shape == (1797, 28, 28, 1) and x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1
    assert np.all(x[:, :4] == 0) and np.all(x[:, 24:] == 0)  # a 20×20 box centred like MNIST's digits
    assert y.shape == (1797, 10) and np.all(y.sum(1) == 1)
    full, _ = load_digits_public(box=None)
    assert full[:, :4].max() > 0
    sp = public_split("digits", mnist_sample)
    assert len(sp.x_private) == len(mnist_sample.x_train) and "digits" in sp.source


@pytest.mark.parametrize("spec, error, match", [
    (0, ValueError, "n_public"),
    (8000, ValueError, "n_public"),
    ("cifar", ValueError, "record count N"),
    (2.5, ValueError, "record count N"),
])
def test_bad_specs(mnist_sample, spec, error, match):
    with pytest.raises(error, match=match):
        public_split(spec, mnist_sample)


def test_bad_box():
    with pytest.raises(ValueError, match="box"):
        load_digits_public(box=40)
