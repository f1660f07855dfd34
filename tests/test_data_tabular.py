"""The tabular datasets of the DP-ERM preset: offline, rows in the unit ball, the leak warned."""

import numpy as np
import pytest

from tfdpmech.data_tabular import TabularConfig, load_tabular
from tfdpmech.validation import PrivacyLeakWarning


@pytest.mark.parametrize("name, classes", [("breast_cancer", 2), ("iris", 3)])
def test_real_sets_are_in_the_unit_ball_and_warn_about_standardisation(name, classes):
    with pytest.warns(PrivacyLeakWarning, match="standardised with statistics of the private training set"):
        data = load_tabular(name)
    assert np.linalg.norm(data["x_train"], axis=1).max() <= 1.0 + 1e-12 and data["num_classes"] == classes
    assert len(data["x_train"]) + len(data["x_test"]) == {"breast_cancer": 569, "iris": 150}[name]


def test_synthetic_set_and_unknown_name():
    data = load_tabular("synthetic", TabularConfig(synthetic_n=500, synthetic_test=100))
    assert data["x_train"].shape == (500, 10) and set(np.unique(data["y_train"])) == {0, 1}
    with pytest.raises(ValueError, match="unknown dataset 'adult'"):
        load_tabular("adult")
