"""Tests for tfdpmech.validation: every check's happy path and its errors.

Each error must name the argument (we pass unusual names such as ``my_eps`` so a generic message
cannot match by accident) and nothing may be repaired silently (no clipping, no rescaling).
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest

from tfdpmech import validation as V
from tfdpmech.validation import PrivacyLeakWarning


# ------------------------------------------------------------------------------------------------
# check_array
# ------------------------------------------------------------------------------------------------


def test_check_array_happy_path_returns_values_unchanged():
    x = [[0.0, 1.5], [2.0, -3.0]]
    out = V.check_array(x, "feat")
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, np.array(x))
    # booleans are numeric enough (one-hot masks)
    assert V.check_array(np.array([True, False]), "mask").dtype == bool


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_check_array_rejects_nan_and_inf_and_names_argument(bad):
    x = np.zeros((3, 2))
    x[1, 1] = bad
    with pytest.raises(ValueError, match=r"my_feats contains 1 NaN or infinite"):
        V.check_array(x, "my_feats")


def test_check_array_counts_every_non_finite_value():
    x = np.array([np.nan, 1.0, np.inf, np.nan])
    with pytest.raises(ValueError, match=r"arr contains 3 NaN"):
        V.check_array(x, "arr")


def test_check_array_rejects_non_numeric_with_type_error():
    with pytest.raises(TypeError, match=r"my_x must be a numeric array.*<U"):
        V.check_array(np.array(["a", "b"]), "my_x")
    with pytest.raises(TypeError, match=r"my_x must be a numeric array.*object"):
        V.check_array(np.array([1.0, None], dtype=object), "my_x")


def test_check_array_rejects_empty_and_too_few_dimensions():
    with pytest.raises(ValueError, match=r"my_x is empty"):
        V.check_array(np.zeros((0, 3)), "my_x")
    with pytest.raises(ValueError, match=r"my_x must have at least 2 dimension"):
        V.check_array(np.zeros(3), "my_x", ndim_min=2)
    with pytest.raises(ValueError, match=r"my_x must have at least 1 dimension"):
        V.check_array(1.0, "my_x")
    # ndim_min=0 accepts scalars (noise scales)
    assert V.check_array(2.5, "scale", ndim_min=0).shape == ()


# ------------------------------------------------------------------------------------------------
# check_unit_interval
# ------------------------------------------------------------------------------------------------


def test_unit_interval_accepts_bounds_and_tolerance_without_clipping():
    x = np.array([[0.0, 0.5, 1.0], [1.0 + 5e-7, -5e-7, 0.25]])
    out = V.check_unit_interval(x, "pixels")
    # nothing is repaired: the values inside the tolerance come back exactly as given
    np.testing.assert_array_equal(out, x)
    assert out.max() > 1.0 and out.min() < 0.0


@pytest.mark.parametrize(
    "value, shown",
    [(1.5, r"\[0, 1.5\]"), (-0.25, r"\[-0.25, 1\]"), (255.0, r"\[0, 255\]"), (1.0 + 1e-4, r"\[0, 1.0001\]")],
)
def test_unit_interval_rejects_values_outside_0_1(value, shown):
    x = np.array([[0.0, 1.0], [0.5, value]])
    with pytest.raises(ValueError, match=r"my_pixels must lie in \[0, 1\]") as info:
        V.check_unit_interval(x, "my_pixels")
    msg = str(info.value)
    assert re.search(shown, msg), msg
    assert "scale_to_unit" in msg  # says how to fix it


def test_unit_interval_custom_tolerance():
    x = np.array([1.05])
    with pytest.raises(ValueError):
        V.check_unit_interval(x, "x")
    np.testing.assert_array_equal(V.check_unit_interval(x, "x", tol=0.1), x)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_unit_interval_rejects_nan_inf_naming_argument(bad):
    with pytest.raises(ValueError, match=r"x_train contains 1 NaN or infinite"):
        V.check_unit_interval(np.array([0.2, bad, 0.3]), "x_train")


# ------------------------------------------------------------------------------------------------
# check_one_hot / check_labels
# ------------------------------------------------------------------------------------------------


def test_one_hot_happy_path_returns_float32():
    y = np.array([[0, 1, 0], [1, 0, 0]], dtype=np.int64)
    out = V.check_one_hot(y, "labels", num_classes=3)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, y.astype(np.float32))
    # bool one-hot is accepted too
    np.testing.assert_array_equal(V.check_one_hot(y.astype(bool), "labels"), out)


@pytest.mark.parametrize(
    "y",
    [
        [[0, 1, 1], [1, 0, 0]],  # two ones in a row
        [[0, 0, 0], [1, 0, 0]],  # no one
        [[0, 0.5, 0.5], [1, 0, 0]],  # soft labels
        [[0, 2, -1], [1, 0, 0]],  # sums to one but not 0/1
    ],
)
def test_one_hot_rejects_rows_that_are_not_one_hot(y):
    with pytest.raises(ValueError, match=r"my_y must be one-hot .*to_categorical"):
        V.check_one_hot(np.array(y, dtype=float), "my_y")


def test_one_hot_rejects_wrong_rank_and_wrong_class_count():
    with pytest.raises(ValueError, match=r"my_y must have at least 2 dimension"):
        V.check_one_hot(np.array([0, 1, 2]), "my_y")
    with pytest.raises(ValueError, match=r"my_y must be one-hot of shape \(n, num_classes\), got shape \(2, 2, 1\)"):
        V.check_one_hot(np.ones((2, 2, 1)), "my_y")
    with pytest.raises(ValueError, match=r"my_y has 3 classes, expected num_classes=4"):
        V.check_one_hot(np.eye(3), "my_y", num_classes=4)


def test_one_hot_rejects_nan():
    y = np.eye(3)
    y[0, 0] = np.nan
    with pytest.raises(ValueError, match=r"my_y contains 1 NaN"):
        V.check_one_hot(y, "my_y")


def test_labels_from_integers():
    out = V.check_labels(np.array([2, 0, 1, 2]), "y", num_classes=3)
    expected = np.array([[0, 0, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, expected)
    # integral floats are integers too
    np.testing.assert_array_equal(V.check_labels([2.0, 0.0, 1.0, 2.0], "y", num_classes=3), expected)


def test_labels_accept_one_hot_unchanged():
    y = np.eye(4)[[3, 1]]
    np.testing.assert_array_equal(V.check_labels(y, "y", num_classes=4), y)
    with pytest.raises(ValueError, match=r"y has 4 classes, expected num_classes=5"):
        V.check_labels(y, "y", num_classes=5)


@pytest.mark.parametrize("labels, shown", [([0, 1, 3], r"\[0, 3\]"), ([-1, 0, 1], r"\[-1, 1\]"), ([10], r"\[10, 10\]")])
def test_labels_out_of_range(labels, shown):
    with pytest.raises(ValueError, match=r"my_labels has labels in " + shown + r", outside \[0, 2\]"):
        V.check_labels(np.array(labels), "my_labels", num_classes=3)


def test_labels_not_integer():
    with pytest.raises(ValueError, match=r"my_labels must be integer class ids"):
        V.check_labels(np.array([0.0, 1.5]), "my_labels", num_classes=3)


def test_labels_nan_and_non_one_hot_matrix():
    with pytest.raises(ValueError, match=r"my_labels contains 1 NaN"):
        V.check_labels(np.array([0.0, np.nan]), "my_labels", num_classes=3)
    with pytest.raises(ValueError, match=r"my_labels must be one-hot"):
        V.check_labels(np.array([[0.2, 0.8, 0.0]]), "my_labels", num_classes=3)


# ------------------------------------------------------------------------------------------------
# check_epsilon / check_delta
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps, expected", [(0.5, 0.5), (1, 1.0), (np.float32(0.25), 0.25), (np.float64(3.0), 3.0), (1e-9, 1e-9)])
def test_epsilon_happy_path_returns_float(eps, expected):
    out = V.check_epsilon(eps, "eps1")
    assert type(out) is float
    assert out == expected


@pytest.mark.parametrize("eps", [0, 0.0, -0.1, -np.inf, np.inf, np.nan, float("nan")])
def test_epsilon_value_errors_name_argument(eps):
    with pytest.raises(ValueError, match=r"my_eps must be finite and > 0"):
        V.check_epsilon(eps, "my_eps")


@pytest.mark.parametrize("eps", [True, False, np.bool_(True), "0.5", None, [0.5], 1 + 0j])
def test_epsilon_type_errors_name_argument(eps):
    with pytest.raises(TypeError, match=r"my_eps must be a positive real number"):
        V.check_epsilon(eps, "my_eps")


def test_epsilon_default_name():
    with pytest.raises(ValueError, match=r"^epsilon must be"):
        V.check_epsilon(-1)


@pytest.mark.parametrize("delta", [1e-5, 0.5, 0.999999, np.float64(1e-10)])
def test_delta_happy_path(delta):
    assert V.check_delta(delta, "my_delta") == float(delta)


@pytest.mark.parametrize("delta", [0, 0.0, 1, 1.0, -1e-5, 1.5, np.nan, np.inf, -np.inf])
def test_delta_outside_open_unit_interval(delta):
    with pytest.raises(ValueError, match=r"my_delta must lie in \(0, 1\)"):
        V.check_delta(delta, "my_delta")


@pytest.mark.parametrize("delta", [True, "1e-5", None])
def test_delta_type_errors(delta):
    with pytest.raises(TypeError, match=r"my_delta must be a real number in \(0, 1\)"):
        V.check_delta(delta, "my_delta")


# ------------------------------------------------------------------------------------------------
# check_positive_int / check_batch_size / check_choice
# ------------------------------------------------------------------------------------------------


def test_positive_int():
    assert V.check_positive_int(3, "units") == 3
    assert type(V.check_positive_int(np.int64(3), "units")) is int
    assert V.check_positive_int(0, "units", minimum=0) == 0
    with pytest.raises(ValueError, match=r"my_units must be >= 1, got 0"):
        V.check_positive_int(0, "my_units")
    with pytest.raises(ValueError, match=r"my_units must be >= 2, got 1"):
        V.check_positive_int(1, "my_units", minimum=2)
    for bad in (2.0, True, "3", None):
        with pytest.raises(TypeError, match=r"my_units must be an integer"):
            V.check_positive_int(bad, "my_units")


def test_batch_size_happy_path():
    assert V.check_batch_size(32) == 32
    assert V.check_batch_size(100, n=100) == 100  # a batch may be the whole data set
    assert V.check_batch_size(7, n=None) == 7


def test_batch_larger_than_n():
    with pytest.raises(ValueError, match=r"my_batch=101 exceeds the number of training records n=100"):
        V.check_batch_size(101, "my_batch", n=100)


def test_batch_size_not_positive_or_not_int():
    with pytest.raises(ValueError, match=r"my_batch must be >= 1, got 0"):
        V.check_batch_size(0, "my_batch", n=10)
    with pytest.raises(ValueError, match=r"my_batch must be >= 1, got -4"):
        V.check_batch_size(-4, "my_batch")
    with pytest.raises(TypeError, match=r"my_batch must be an integer, got 2.5"):
        V.check_batch_size(2.5, "my_batch")


def test_choice():
    assert V.check_choice("abs", "mode", ("floor", "abs")) == "abs"
    with pytest.raises(ValueError, match=r"my_mode must be one of \['floor', 'abs'\], got 'Abs'"):
        V.check_choice("Abs", "my_mode", ("floor", "abs"))
    with pytest.raises(ValueError, match=r"my_mode must be one of"):
        V.check_choice(None, "my_mode", ["floor"])


def test_long_values_are_shortened_in_messages():
    with pytest.raises(ValueError) as info:
        V.check_choice("x" * 500, "my_mode", ("a",))
    assert len(str(info.value)) < 200
    assert "..." in str(info.value)


# ------------------------------------------------------------------------------------------------
# check_budget_split
# ------------------------------------------------------------------------------------------------


def test_budget_split_that_adds_up():
    # 0.1 + 0.2 != 0.3 in binary floating point: the check must be tolerant
    out = V.check_budget_split(0.3, {"eps1": 0.1, "eps2": 0.2})
    assert out == {"eps1": 0.1, "eps2": 0.2}
    assert all(type(v) is float for v in out.values())
    out = V.check_budget_split(0.3, {"eps1": 0.075, "eps2": 0.075, "eps3": 0.15})
    assert math.isclose(sum(out.values()), 0.3)


def test_budget_split_without_total_skips_the_sum():
    assert V.check_budget_split(None, {"eps2": 1, "eps3": 2}) == {"eps2": 1.0, "eps3": 2.0}


def test_budget_split_that_does_not_add_up():
    with pytest.raises(ValueError) as info:
        V.check_budget_split(0.5, {"eps1": 0.1, "eps2": 0.2, "eps3": 0.15})
    msg = str(info.value)
    assert "does not add up" in msg
    assert "eps1=0.1" in msg and "eps2=0.2" in msg and "eps3=0.15" in msg
    assert "= 0.45" in msg and "epsilon=0.5" in msg
    # a split that is only slightly off is still refused (no silent rescaling)
    with pytest.raises(ValueError, match="does not add up"):
        V.check_budget_split(0.3, {"eps1": 0.1, "eps2": 0.2000001})


def test_budget_split_bad_parts_and_total_name_the_argument():
    with pytest.raises(ValueError, match=r"eps2 must be finite and > 0, got 0.0"):
        V.check_budget_split(0.3, {"eps1": 0.3, "eps2": 0.0})
    with pytest.raises(ValueError, match=r"eps3 must be finite and > 0, got -0.1"):
        V.check_budget_split(None, {"eps2": 0.4, "eps3": -0.1})
    with pytest.raises(TypeError, match=r"eps1 must be a positive real number, got None"):
        V.check_budget_split(0.3, {"eps1": None, "eps2": 0.3})
    with pytest.raises(ValueError, match=r"epsilon must be finite and > 0, got nan"):
        V.check_budget_split(float("nan"), {"eps1": 0.1})
    with pytest.raises(ValueError, match=r"epsilon must be finite and > 0, got inf"):
        V.check_budget_split(float("inf"), {"eps1": 0.1})


# ------------------------------------------------------------------------------------------------
# PrivacyLeakWarning
# ------------------------------------------------------------------------------------------------


def test_privacy_leak_warning_is_shown():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("bounds from data", PrivacyLeakWarning)
    assert caught and caught[0].category is PrivacyLeakWarning


@pytest.mark.parametrize("silenced", [UserWarning, RuntimeWarning])
def test_privacy_leak_warning_is_not_hidden_by_user_or_runtime_warning_filters(silenced):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=silenced)
        warnings.warn("a user warning", silenced)
        warnings.warn("bounds from data", PrivacyLeakWarning)
    assert [w.category for w in caught] == [PrivacyLeakWarning]  # the other one was filtered, the leak was not

