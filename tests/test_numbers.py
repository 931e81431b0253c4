"""No ``-0.000``: every number credo prints goes through one rule (credo.numbers), which
prints a value that rounds to zero as zero, and otherwise what Python's fixed-point
format prints."""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_EVEN, Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credo.numbers import fmt_number


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6),
       st.integers(0, 6), st.booleans())
def test_a_number_is_its_exact_rounding_and_never_minus_zero(x, digits, sign):
    text = fmt_number(x, digits, sign=sign)
    assert not re.fullmatch(r"-0\.?0*", text)
    exact = Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_EVEN)
    assert Decimal(text) == exact  # the value, independently rounded
    assert (text[0] in "+-") == (sign or exact < 0)
    if exact == 0:
        assert text.lstrip("+") == f"{0:.{digits}f}"


@pytest.mark.parametrize("x", [None, math.nan])
def test_missing_values_print_as_missing(x):
    assert fmt_number(x) == "n/a" and fmt_number(x, 2, "–", sign=True) == "–"


def test_the_tables_and_reports_print_no_minus_zero():
    from credo.report.adaptive import _f
    from credo.report.html import _environment
    from credo.report.markdown import _with_ci, neutrality_line

    assert _f(-0.0) == "+0.000" and _f(-1e-9) == "+0.000" and _f(-0.0006) == "-0.001"
    assert _with_ci({"ece": -1e-12, "ece_low": -0.001, "ece_high": 0.2}, "ece") == (
        "0.000 [0.00, 0.20]")
    line = neutrality_line({"mean_delta": -0.001, "samples_per_set": 8, "confidence": 0.95,
                            "low": -0.004, "high": 0.3, "items": 12, "neutral": True})
    assert "-0.00" not in line and "mean Δ = +0.00" in line
    env = _environment()
    assert env.from_string("{{ x|num }} {{ x|signed(2) }}").render(x=-0.0) == "0.000 +0.00"
