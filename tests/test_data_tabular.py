"""The tabular datasets of the DP-ERM preset: offline, rows in the unit ball, standardised with public statistics."""

import warnings

import numpy as np
import pytest

from tfdpmech.data_tabular import TabularConfig, load_tabular, public_standardiser
from tfdpmech.validation import PrivacyLeakWarning


@pytest.mark.parametrize("name, classes", [("breast_cancer", 2), ("iris", 3)])
def test_real_sets_are_in_the_unit_ball_and_standardised_with_held_out_public_records(name, classes):
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)  # no statistic of the private set is used any more
        data = load_tabular(name)
    assert np.linalg.norm(data["x_train"], axis=1).max() <= 1.0 + 1e-12 and data["num_classes"] == classes
    public = data["public_for_statistics"]
    assert public == {"breast_cancer": 46, "iris": 12}[name]  # 10 % of the training split, stratified
    assert len(data["x_train"]) + public + len(data["x_test"]) == {"breast_cancer": 569, "iris": 150}[name]
    assert f"statistics of {public} public records" in data["note"]


def test_the_standardiser_depends_on_the_public_records_only():
    rng = np.random.default_rng(0)
    public, private = rng.normal(3.0, 2.0, size=(40, 4)), rng.normal(size=(10, 4))
    prep = public_standardiser(public, 1.0)
    changed = private.copy()
    changed[0] = [50.0, -50.0, 7.0, 0.0]  # replacing one private record changes no other record's features
    np.testing.assert_array_equal(prep(private)[1:], prep(changed)[1:])
    expected = (private - public.mean(0)) / (public.std(0) + 1e-12) / 2.0
    norms = np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(prep(private), expected / np.maximum(norms, 1.0))
    with pytest.raises(ValueError, match="x_public has 1 records.*public_fraction"):
        public_standardiser(public[:1], 1.0)
    with pytest.raises(ValueError, match=r"public_fraction must lie in \[0, 0.5\], got 0.9"):
        load_tabular("iris", TabularConfig(public_fraction=0.9))


def test_synthetic_set_and_unknown_name():
    data = load_tabular("synthetic", TabularConfig(synthetic_n=500, synthetic_test=100))
    assert data["x_train"].shape == (500, 10) and set(np.unique(data["y_train"])) == {0, 1}
    with pytest.raises(ValueError, match="unknown dataset 'adult'"):
        load_tabular("adult")
