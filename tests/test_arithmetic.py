"""Exact, safe evaluation of expression answers ("Answer: (16 - 3 - 4) * 2")."""

from fractions import Fraction

import pytest

from credo.tasks.answers import extract_answer
from credo.tasks.arithmetic import evaluate_arithmetic
from credo.tasks.base import AnswerFormat


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("(16 - 3 - 4) * 2", Fraction(18)),
        ("7 + 3 * 7 + 12", Fraction(40)),
        ("1,234 + 1", Fraction(1235)),
        ("3/4", Fraction(3, 4)),
        ("0.1 + 0.2", Fraction(3, 10)),  # exact, not 0.30000000000000004
        ("5 - 2 = 3", Fraction(3)),
        ("(1 + 2) * 3 = x", Fraction(9)),  # rhs not a number: the lhs
        ("2 ** 3", Fraction(8)),
        ("-5", Fraction(-5)),
        ("18.", Fraction(18)),
        ("12 × 3 ÷ 4", Fraction(9)),
    ],
)
def test_evaluates_arithmetic_exactly(expr, value):
    assert evaluate_arithmetic(expr) == value


@pytest.mark.parametrize(
    "expr",
    ["2 hours", "10 / 0", '__import__("os").system("true")', "9 ** 999", "x + 1", "", "()",
     "1" * 250, "abs(-3)"],
)
def test_refuses_what_is_not_plain_arithmetic(expr):
    assert evaluate_arithmetic(expr) is None


def test_number_extraction_evaluates_expression_answers():
    def f(text):
        return extract_answer(text, AnswerFormat.NUMBER).value

    assert f("Answer: (16 - 3 - 4) * 2") == "18"
    assert f("Answer: 60 / 8") == "7.5"
    assert f("Answer: 2 hours") == "2"
    assert f("Answer: 7 * 3 - 1\nmore text 99") == "20"
