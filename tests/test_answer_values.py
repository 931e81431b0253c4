"""Answers compared as values: "64", "64.0" and "6.4e1" are one answer under the number
format, "64.00001" is another (exact rational comparison); option letters whatever their
case and brackets; short text after SQuAD normalisation. Given answers (``credo score``)
are put in the form credo's own extractors give, so the indicator kernel, the modal
answer and every method compare values, not spellings."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credo.cli import main
from credo.kernels.indicator import indicator_gram
from credo.methods.scoring import central_sample
from credo.tasks.answers import (
    answer_rule,
    canonical_answer,
    extract_answer,
    normalise_number,
    numbers_equal,
)
from credo.tasks.base import AnswerFormat

NUMBER = AnswerFormat.NUMBER


def _decimal(m: int, k: int, zeros: int = 0) -> str:
    """m / 10^k written as a plain decimal, with ``zeros`` trailing zeros."""
    sign, digits = ("-" if m < 0 else ""), str(abs(m)).rjust(k + 1, "0")
    whole, frac = (digits[:-k], digits[-k:]) if k else (digits, "")
    frac += "0" * zeros
    return f"{sign}{whole}.{frac}" if frac else f"{sign}{whole}"


def _scientific(m: int, k: int, upper: bool) -> str:
    """m / 10^k in scientific notation: d.ddd e±x."""
    sign, digits = ("-" if m < 0 else ""), str(abs(m))
    exponent = len(digits) - 1 - k
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}{'E' if upper else 'e'}{exponent:+d}"


terminating = st.tuples(st.integers(-10**9, 10**9), st.integers(0, 8))


@given(terminating, st.integers(0, 3), st.booleans(), st.integers(1, 7))
def test_every_spelling_of_a_decimal_is_one_answer(mk, zeros, upper, t):
    m, k = mk
    value = Fraction(m, 10**k)
    spellings = [_decimal(m, k), _decimal(m, k, zeros), _decimal(m, k, 1),
                 f"{value.numerator * t}/{value.denominator * t}"]
    if m:
        spellings.append(_scientific(m, k, upper))
    got = {canonical_answer(s, NUMBER) for s in spellings}
    assert got == {normalise_number(_decimal(m, k))}
    assert Fraction(got.pop().replace(",", "")) == value  # the canonical form is exact


@given(st.fractions(), st.fractions())
def test_two_numbers_are_one_answer_exactly_when_their_values_are_equal(x, y):
    a = canonical_answer(f"{x.numerator}/{x.denominator}", NUMBER)
    b = canonical_answer(f"{y.numerator}/{y.denominator}", NUMBER)
    assert (a == b) == (x == y)
    assert Fraction(a) == x  # "1/3" is 1/3, not 0.3333333333333333


def test_the_issue_s_numbers():
    same = ["64", "64.0", "6.4e1", 64, 64.0, "128/2", "$64", " 6.40E+01 "]
    assert {canonical_answer(v, NUMBER) for v in same} == {"64"}
    assert canonical_answer("64.00001", NUMBER) == "64.00001"
    assert canonical_answer("1/3", NUMBER) != canonical_answer("0.3333333333333333", NUMBER)
    assert extract_answer("So the answer is 6.4e1.", NUMBER).value == "64"
    assert canonical_answer("The answer is 64.0 apples.", NUMBER) == "64"  # a whole reply
    assert canonical_answer("sixty-four", NUMBER) is None  # not a number: unparsed
    assert numbers_equal("6.4e1", "64")


@given(st.sampled_from("ABCD"), st.sampled_from(
    ["{}", "{l}", "({})", "({l})", "{}.", "[{}]", "**{}**", " {} ", "{})", "The answer is {}"]))
def test_an_option_letter_is_one_answer_whatever_its_case_and_brackets(letter, pattern):
    spelt = pattern.format(letter, l=letter.lower())
    assert canonical_answer(spelt, AnswerFormat.CHOICE, 4) == letter


@given(st.sampled_from(["the Eiffel Tower", "Eiffel tower!", "  THE eiffel, tower. ",
                        "an Eiffel Tower"]))
def test_short_text_is_one_answer_after_normalisation(spelt):
    assert canonical_answer(spelt, AnswerFormat.SHORT_TEXT) == "eiffel tower"


def test_the_kernel_and_the_modal_answer_read_values():
    answers = [canonical_answer(v, NUMBER) for v in ("65", "64", "6.4e1", "65.0", "64.00")]
    gram = indicator_gram(answers, answers)
    assert gram[1, 2] == gram[1, 4] == gram[0, 3] == 1.0 and gram[0, 1] == 0.0
    assert answers[central_sample(answers, indicator_gram)] == "64"  # 3 votes to 2


def test_credo_score_compares_given_numbers_by_value_and_says_so(tmp_path):
    rows = [{"item": "q", "set": "original", "answer": a, "correct": c}
            for a, c in (("64", True), ("64.0", True), ("6.4e1", True), ("64.00001", False))]
    rows += [{"item": "r", "set": "original", "answer": a, "correct": False}
             for a in ("12", "13", "1.2e1", "14")]
    path = tmp_path / "g.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "o"
    assert main(["score", str(path), "--format", "number", "--methods", "self_consistency",
                 "--bootstrap", "0", "--out", str(out), "--quiet"]) == 0
    scores = {r["id"]: r for r in map(json.loads, (out / "scores.jsonl").open())}
    # three of four samples agree: 3·2 ordered pairs of 4·3
    assert scores["q"]["scores"]["self_consistency"] == 0.5
    assert scores["q"]["original_answers"] == ["64", "64", "64", "64.00001"]
    assert scores["q"]["answer"] == "64" and scores["r"]["answer"] == "12"
    assert scores["r"]["scores"]["self_consistency"] == pytest.approx(2 / 12)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["correctness"].endswith(f"answers compared as {answer_rule(NUMBER)}")
    assert "exact value" in (out / "report.md").read_text()
