"""The report writer keeps what a diverged run produced instead of failing on it."""

import json
import math

import numpy as np

from tfdpmech.report.writer import json_safe


def test_non_finite_values_are_kept_as_text_and_the_rest_untouched():
    raw = {"loss": [1.5, float("nan"), np.float32("inf")], "delta": -math.inf, "n": 3, "ok": True,
           "nested": ({"a": np.float64(0.25)},), "name": "pcdbn"}
    safe = json_safe(raw)
    text = json.dumps(safe, allow_nan=False)  # strict JSON: would raise on a NaN left behind
    assert json.loads(text) == {"loss": [1.5, "NaN", "Infinity"], "delta": "-Infinity", "n": 3, "ok": True,
                                "nested": [{"a": 0.25}], "name": "pcdbn"}
