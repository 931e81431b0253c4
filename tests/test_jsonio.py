"""Files credo writes are strict JSON: NaN and infinities are written as null."""

import json
import math

import numpy as np
import pytest

from credo import jsonio


def test_json_safe_replaces_non_finite_floats_at_any_depth():
    data = {"ece": math.nan, "rows": [1.5, math.inf, {"p": -math.inf, "s": "NaN"}], "t": (2, 3)}
    assert jsonio.json_safe(data) == {"ece": None, "rows": [1.5, None, {"p": None, "s": "NaN"}],
                                      "t": [2, 3]}
    assert data["ece"] != data["ece"]  # the caller's object is not changed


def test_dumps_is_strict_json():
    text = jsonio.dumps({"auroc": float("nan"), "n": 3, "x": np.float64(0.25)})
    strict = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert strict == {"auroc": None, "n": 3, "x": 0.25}
