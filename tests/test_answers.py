"""Answer extraction, normalisation and correctness (credo.tasks.answers)."""

from __future__ import annotations

import time

import pytest

from credo.tasks.answers import (
    Answer,
    extract_answer,
    extractor,
    normalise_gold,
    normalise_number,
    normalise_text,
    numbers_equal,
    parse_number,
)
from credo.tasks.base import AnswerFormat, Item
from credo.tasks.grading import is_correct

QWEN_COT = (
    "Janet's ducks lay 16 eggs per day. She eats 3 and bakes with 4, so she has\n"
    "16 - 3 - 4 = 9 eggs left.\n"
    "She sells each for $2, so she makes 9 × 2 = 18 dollars.\n\n"
    "Therefore, the answer is $\\boxed{18}$."
)
QWEN_COT_LATEX = (
    "To find the total, we first compute the cost per item:\n"
    "\\[ \\frac{24}{4} = 6 \\]\n"
    "Then multiply by 3:\n"
    "\\[ 6 \\times 3 = 18 \\]\n"
    "**Final Answer**\n"
    "\\[\n\\boxed{18}\n\\]"
)

# (model output, expected normalised number or None)
NUMBER_CASES: list[tuple[str, str | None]] = [
    # \boxed{} first, whatever follows it
    (QWEN_COT, "18"),
    (QWEN_COT_LATEX, "18"),
    ("\\boxed{18}", "18"),
    ("The answer is \\boxed{18}. Check: 3 * 6 = 18, and 20 - 2 = 18; we had 5 left.", "18"),
    ("First guess \\boxed{12}. Re-checking... the correct total is \\boxed{14}.", "14"),
    ("\\boxed{\\$1,234}", "1234"),
    ("\\boxed{12 \\text{ apples}}", "12"),
    ("\\boxed{\\text{12 apples}}", "12"),
    ("\\boxed{\\frac{3}{4}}", "0.75"),
    ("\\boxed{\\dfrac{1}{4}}", "0.25"),
    ("\\boxed{\\frac12}", "0.5"),
    ("\\boxed{-\\frac{1}{2}}", "-0.5"),
    ("\\boxed{3\\frac{1}{2}}", "3.5"),
    ("\\boxed{\\dfrac{1}{3}}", "1/3"),  # exact: 1/3 is not 0.3333333333333333
    ("\\boxed{x = 18}", "18"),
    ("\\boxed{1{,}234}", "1234"),
    ("\\(\\boxed{45^\\circ}\\)", "45"),
    ("\\boxed{25\\%}", "25"),
    ("\\boxed{C}\nSo she has 7 left.", "7"),  # no number in the box: fall through
    # explicit markers (last one)
    ("The answer is: $18.00", "18"),
    ("Answer: 42", "42"),
    ("She pays 10 + 5 = 15.\n#### 15", "15"),
    ("#### 1,234", "1234"),
    ("The answer is 18 apples, not 20.", "18"),
    ("**Answer:** 1,000", "1000"),
    ("**Final Answer**\n\n42", "42"),
    ("Final answer: The total cost is $1,234.56.", "1234.56"),
    ("Answer: 3/4", "0.75"),
    ("Answer = 7 hours", "7"),
    ("answer is \u22127", "-7"),  # unicode minus
    ("Answer: 12\nWait, the answer is 14 because I forgot two.\nStep 3 used 5 items.", "14"),
    ("Before the final answer, check 5 + 3 = 8. So 9.", "9"),  # "final answer" needs ":"
    ("<think>Maybe 12? No, 13.</think>\nAnswer: 14", "14"),
    # last number in the text
    ("-5", "-5"),
    ("x = -5", "-5"),
    ("First 10 - 5 = 5, then 5 - 8", "8"),  # "- 8" with a space is subtraction
    ("The range is 3-5", "5"),
    ("The total is 1,234,567 dollars.", "1234567"),
    ("3/4", "0.75"),
    ("So she makes 18 dollars.", "18"),
    ("It costs $5.50.", "5.5"),
    ("The growth was 25%.", "25"),
    ("The answer comes to 12.50 dollars", "12.5"),
    ("The numbers are 1, 2", "2"),  # "1, 2" is two numbers, not 12
    ("1\\,234", "1234"),
    ("It is .5 of the cake", "0.5"),
    ("Step 1: 3 × 4 = 12\nStep 2: 12 + 6 = 18\nSo 18.", "18"),
    ("H2O has 3 atoms", "3"),  # digits glued to a word are not numbers
    ("The answer is 6.4e1.", "64"),  # scientific notation, by value
    ("Light travels 3E+8 m/s", "300000000"),
    ("Answer: 2e", "2"),  # no exponent digits: no exponent
    # nothing to read
    ("I have no idea.", None),
    ("", None),
    ("\\boxed{}", None),
]


@pytest.mark.parametrize(("text", "expected"), NUMBER_CASES)
def test_extract_number(text: str, expected: str | None) -> None:
    answer = extract_answer(text, AnswerFormat.NUMBER)
    assert answer.value == expected
    assert answer.raw == text
    assert answer.parsed is (expected is not None)


# (model output, n_choices, expected letter or None)
CHOICE_CASES: list[tuple[str, int, str | None]] = [
    ("Answer: C", 4, "C"),
    ("(C)", 4, "C"),
    ("C)", 4, "C"),
    ("The answer is C.", 4, "C"),
    ("\\boxed{C}", 4, "C"),
    ("\\boxed{\\text{C}}", 4, "C"),
    ("**C**", 4, "C"),
    ("B", 4, "B"),
    ("A", 4, "A"),
    ("A good estimate is (B)", 4, "B"),
    ("A good estimate is 0.5", 4, None),  # the article is not an answer
    ("A. Paris", 4, "A"),
    ("I think the answer is (D) because the sample is small.", 4, "D"),
    ("Let's look: (A) is wrong, (B) is wrong. The answer is C", 4, "C"),
    ("Answer: A\nOn reflection, the answer is B.", 4, "B"),  # last marker wins
    ("The correct option is B.", 4, "B"),
    ("Option D is correct.", 4, "D"),
    ("The answer is $\\boxed{B}$", 4, "B"),
    ("**Answer: B**", 4, "B"),
    ("**Answer:** (D) 0.25", 4, "D"),
    ("Answer:\n\nD", 4, "D"),
    ("B\n\nExplanation: A is wrong because the variance is unknown.", 4, "B"),
    ("The best answer is C.\n", 4, "C"),
    ("answer: b", 4, "B"),  # lowercase only where it cannot be a word
    ("The answer is (c) because", 4, "C"),
    ("The answer is a bit unclear; I would pick (B)", 4, "B"),
    ("<think>A or B? Probably A.</think>\nC", 4, "C"),
    (
        "Step 1: A p-value is the probability of data this extreme.\n"
        "Step 2: A larger sample reduces the standard error.\n"
        "Therefore the answer is D.",
        4,
        "D",
    ),
    ("The answer is E", 4, None),  # outside the first n_choices
    ("The answer is E", 5, "E"),
    ("The answer is G.", 10, "G"),
    ("I'm not sure.", 4, None),
    ("I'm not sure.", 10, None),  # the pronoun "I" (letter 9) is not an answer
    ("It is common in the U.S.", 4, None),
    ("", 4, None),
]


@pytest.mark.parametrize(("text", "n", "expected"), CHOICE_CASES)
def test_extract_choice(text: str, n: int, expected: str | None) -> None:
    assert extract_answer(text, AnswerFormat.CHOICE, n).value == expected


def test_choice_article_a_inside_sentence_is_not_an_answer() -> None:
    text = "A good estimate is about half of the population, so a survey is needed."
    assert not extract_answer(text, AnswerFormat.CHOICE, 4).parsed
    assert extract_answer("A good estimate is (B)", AnswerFormat.CHOICE, 4).value == "B"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Answer: The Eiffel Tower.", "eiffel tower"),
        ("Paris\nBecause it is the capital.", "paris"),
        ("I think about it.\nFinal answer: An apple!", "apple"),
        ("  \n  The  Beatles ", "beatles"),
        ("Answer: ...", None),
        ("", None),
    ],
)
def test_extract_short_text(text: str, expected: str | None) -> None:
    assert extract_answer(text, AnswerFormat.SHORT_TEXT).value == expected


def test_extract_code() -> None:
    text = "Here:\n```\nnot python\n```\n```python\ndef f(x):\n    return x + 1\n```\nDone."
    assert extract_answer(text, AnswerFormat.CODE).value == "def f(x):\n    return x + 1"
    assert extract_answer("```\nprint(1)\n```", AnswerFormat.CODE).value == "print(1)"
    assert extract_answer("print(2)\n", AnswerFormat.CODE).value == "print(2)"
    assert not extract_answer("  \n", AnswerFormat.CODE).parsed


def test_extract_long_form() -> None:
    assert extract_answer("  Ada Lovelace was ...\n", AnswerFormat.LONG_FORM).value == (
        "Ada Lovelace was ..."
    )
    assert not extract_answer(" ", AnswerFormat.LONG_FORM).parsed


def test_every_format_has_an_extractor_and_registration_is_unique() -> None:
    for fmt in AnswerFormat:
        assert isinstance(extract_answer("x", fmt), Answer)
    with pytest.raises(ValueError, match="already registered"):
        extractor(AnswerFormat.NUMBER)(lambda text, n: None)


def test_extract_accepts_format_value_string() -> None:
    assert extract_answer("Answer: 5", "number").value == "5"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12.50", "12.5"),
        ("1,000", "1000"),
        ("-3.0", "-3"),
        ("3/4", "0.75"),
        ("1/3", "1/3"),
        ("2/6", "1/3"),
        ("6.4e1", "64"),
        ("1E-3", "0.001"),
        ("$1,234.00", "1234"),
        ("50%", "50"),
        ("+7", "7"),
        ("0.10", "0.1"),
        ("-0", "0"),
        ("18.", "18"),
        ("\\frac{3}{4}", "0.75"),
        ("123456789012345678901234567890", "123456789012345678901234567890"),
        (51.0, "51"),
        (7, "7"),
    ],
)
def test_normalise_number(text: str | float, expected: str) -> None:
    assert normalise_number(text) == expected


@pytest.mark.parametrize("bad", ["", "abc", "1, 2", "12 apples", "1/0", "1.2.3", "--3"])
def test_normalise_number_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="not a number"):
        normalise_number(bad)
    assert parse_number(bad) is None


def test_numbers_equal() -> None:
    assert numbers_equal("18", "18.00")
    assert numbers_equal("0.75", "3/4")
    assert numbers_equal("0.3333333", "1/3", rel_tol=1e-6)
    assert not numbers_equal("0.33", "1/3")
    assert numbers_equal("1,234", 1234)
    assert numbers_equal(0.1 + 0.2, "0.3")
    assert not numbers_equal("17", "18")
    # integers compare exactly, however large (a relative tolerance would call these equal)
    assert not numbers_equal("1000000", "1000001")
    assert not numbers_equal("abc", "abc")
    assert numbers_equal("0", "-0.0")


def _item(gold: str, choices: tuple[str, ...] = ()) -> Item:
    return Item(id="i", question="q", gold=gold, choices=choices)


def test_is_correct_number() -> None:
    item = _item("18")
    assert is_correct(extract_answer(QWEN_COT, AnswerFormat.NUMBER), item, AnswerFormat.NUMBER)
    assert is_correct(Answer("18.0", "18.0"), item, AnswerFormat.NUMBER)
    assert not is_correct(Answer("17", "17"), item, AnswerFormat.NUMBER)
    assert not is_correct(Answer(None, "no idea"), item, AnswerFormat.NUMBER)


def test_is_correct_choice() -> None:
    item = _item("B", ("x", "y", "z", "w"))
    assert is_correct(extract_answer("Answer: B", AnswerFormat.CHOICE, 4), item, "choice")  # type: ignore[arg-type]
    assert not is_correct(Answer("C", "C"), item, AnswerFormat.CHOICE)
    assert not is_correct(Answer(None, "?"), item, AnswerFormat.CHOICE)


def test_is_correct_short_text() -> None:
    item = _item("The Eiffel Tower")
    answer = extract_answer("Answer: eiffel tower.", AnswerFormat.SHORT_TEXT)
    assert is_correct(answer, item, AnswerFormat.SHORT_TEXT)
    assert not is_correct(Answer("louvre", "louvre"), item, AnswerFormat.SHORT_TEXT)


def test_is_correct_long_form_needs_the_grading_stage() -> None:
    with pytest.raises(NotImplementedError, match="judge"):
        is_correct(Answer("x", "x"), _item("x"), AnswerFormat.LONG_FORM)


def test_is_correct_code_needs_tests_in_meta() -> None:
    with pytest.raises(ValueError, match="entry_point"):
        is_correct(Answer("x", "x"), _item("x"), AnswerFormat.CODE)


def test_normalise_gold() -> None:
    assert normalise_gold("1,000", AnswerFormat.NUMBER) == "1000"
    assert normalise_gold(" c ", AnswerFormat.CHOICE) == "C"
    assert normalise_gold("(B)", AnswerFormat.CHOICE) == "B"
    assert normalise_gold("The Beatles!", AnswerFormat.SHORT_TEXT) == "beatles"
    assert normalise_gold("  code  ", AnswerFormat.CODE) == "code"
    with pytest.raises(ValueError):
        normalise_gold("AB", AnswerFormat.CHOICE)
    with pytest.raises(ValueError):
        normalise_gold("twelve", AnswerFormat.NUMBER)


def test_normalise_text_squad() -> None:
    assert normalise_text("The  Cat, a Dog & AN owl.") == "cat dog owl"
    assert normalise_text("...") == ""


def test_answer_is_frozen_record() -> None:
    a = Answer("5", "Answer: 5")
    assert a.parsed
    with pytest.raises(AttributeError):
        a.value = "6"  # type: ignore[misc]


@pytest.mark.parametrize(
    "text",
    [
        "*" * 50_000,
        "A" + " " * 50_000 + "x",
        "B" + "\n" * 50_000 + "x",
        "answer is " * 10_000,
        "answer: " + "*_ " * 20_000,
        "\\boxed{1" * 20_000,
        "\\boxed{" + "{" * 20_000,
    ],
    ids=["stars", "spaces", "newlines", "markers", "marker-stars", "open-boxes", "open-braces"],
)
def test_degenerate_generations_are_fast(text: str) -> None:
    """Repetitive garbage (a model stuck in a loop) must not make extraction quadratic.

    Quadratic work on 50k characters is ~10^9 steps (minutes); linear work is milliseconds.
    CPU time of this process, not wall time, so other jobs on the machine do not count.
    """
    start = time.process_time()
    for fmt in AnswerFormat:
        extract_answer(text, fmt, 4)
    assert time.process_time() - start < 2.0
