"""Answer extraction from model generations, normalisation and correctness.

Every :class:`~credo.tasks.base.AnswerFormat` has one extractor, registered with
:func:`extractor` and called through :func:`extract_answer`. An extractor never raises on
model output: what it cannot read becomes ``Answer(None, raw)`` (an *unparsed* answer),
which :func:`credo.tasks.grading.is_correct` scores as wrong.

Numbers are compared exactly when both sides are integers and with a relative tolerance
otherwise (:func:`numbers_equal`); their canonical string form is :func:`normalise_number`.

Answers are one answer when their normalised values are equal (what the indicator kernel,
self-consistency's vote and the answer credo gives compare): under the number format the
exact rational value ("64", "64.0", "6.4e1" and "128/2" are one answer, "64.00001" is
another), option letters whatever their case and brackets, short text after SQuAD
normalisation. :func:`canonical_answer` puts an answer given in a file (``credo score``)
in that form; :func:`answer_rule` names the rule in a few words.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from credo.errors import UserError
from credo.registry import Registry
from credo.tasks.arithmetic import evaluate_arithmetic
from credo.tasks.base import AnswerFormat, Item

__all__ = [
    "Answer",
    "answer_for",
    "answer_rule",
    "canonical_answer",
    "extract_answer",
    "extractor",
    "item_extractor",
    "normalise_gold",
    "normalise_number",
    "normalise_text",
    "numbers_equal",
    "parse_number",
]


@dataclass(frozen=True)
class Answer:
    """What was read from one generation: ``value`` (normalised) or None, and the raw text.

    ``value`` is a normalised answer string for task answers; follow-up sample sets read
    other kinds from their replies: a probability (verbalized confidence), a bool
    (an APriCoT verdict), an NLI label.
    """

    value: str | float | bool | None
    raw: str

    @property
    def parsed(self) -> bool:
        """Whether an answer could be read from the generation."""
        return self.value is not None


Extractor = Callable[[str, int], str | None]
"""``(text, n_choices) -> normalised value or None``."""

_EXTRACTORS: Registry[Extractor] = Registry("answer extractor")
"""The extractor of each answer format, by the format's value."""


def extractor(fmt: AnswerFormat) -> Callable[[Extractor], Extractor]:
    """Register the decorated function as the extractor for ``fmt``."""
    return _EXTRACTORS.register(AnswerFormat(fmt).value)


ItemExtractor = Callable[[str, Item], str | None]
"""``(text, item) -> answer or None``: an item's own way of reading its answers."""

_ITEM_EXTRACTORS: Registry[ItemExtractor] = Registry("item extractor")


def item_extractor(name: str) -> Callable[[ItemExtractor], ItemExtractor]:
    """Register the decorated function as extractor ``name``, which items naming it in
    ``meta["extractor"]`` are read with instead of their format's (an lm-eval task's
    answers are what its own filter keeps)."""
    return _ITEM_EXTRACTORS.register(name)


def answer_for(text: str, item: Item, fmt: AnswerFormat) -> Answer:
    """The answer of ``item`` in a generation: by the extractor its ``meta["extractor"]``
    names, else by ``fmt``'s (:func:`extract_answer`)."""
    name = item.meta.get("extractor")
    if name:
        if name not in _ITEM_EXTRACTORS:
            raise UserError(f"item {item.id!r}: {_ITEM_EXTRACTORS.unknown(name)}")
        return Answer(_ITEM_EXTRACTORS[name](text, item), text)
    return extract_answer(text, fmt, n_choices=len(item.choices))


_THINK_RE = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)


def _strip_thinking(text: str) -> str:
    """Drop a leading, closed ``<think>...</think>`` block when an answer follows it."""
    rest = _THINK_RE.sub("", text, count=1)
    return rest if rest.strip() else text


def extract_answer(text: str, fmt: AnswerFormat, n_choices: int = 0) -> Answer:
    """Read the answer of format ``fmt`` from a generation.

    ``n_choices`` limits choice letters to the first ``n_choices`` letters (A, B, ...);
    0 allows A-Z. A leading ``<think>...</think>`` block is ignored when text follows it.
    """
    fn = _EXTRACTORS[AnswerFormat(fmt).value]
    return Answer(fn(_strip_thinking(text), n_choices), text)


# --------------------------------------------------------------------------- numbers

# An unsigned number: 1,234,567 (comma groups of exactly three), 12, 12.5, .5; with an
# exponent of at most three digits (6.4e1, 1E-3), not glued to a following word or decimal
_UNSIGNED = (r"(?:(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+)"
             r"(?:[eE][+-]?\d{1,3}(?!\w|\.\d))?")
# A number in running text. It must not be glued to a preceding word or number
# ("x2", "3-5" gives 5, "1.2.3" gives nothing); a minus sign must touch the digits
# ("10 - 5" gives 5, "x = -5" gives -5); "3/4" is a fraction.
_NUMBER_RE = re.compile(
    rf"(?<![\w.])(?P<neg>-)?(?P<num>{_UNSIGNED})(?:/(?P<den>\d+)(?!\d|\.\d|/))?"
)
_FULL_NUMBER_RE = re.compile(rf"(?P<neg>-)?(?P<num>{_UNSIGNED})(?:/(?P<den>\d+))?")

_FRAC_RE = re.compile(
    r"(?:(?P<whole>\d+)\s*)?\\[dt]?frac\s*(?:\{\s*(?P<a>[-\d.,]+)\s*\}|(?P<a1>\d))"
    r"\s*(?:\{\s*(?P<b>[-\d.,]+)\s*\}|(?P<b1>\d))"
)
_TEXT_CMD_RE = re.compile(
    r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}"
)


def _frac_sub(m: re.Match[str]) -> str:
    """``\\frac{a}{b}`` (``\\dfrac``, ``\\tfrac``, ``\\frac12``, ``3\\frac{1}{2}``) -> ``a/b``."""
    a = parse_number(m.group("a") or m.group("a1"))
    b = parse_number(m.group("b") or m.group("b1"))
    if a is None or b is None or b == 0:
        return m.group(0)
    value = a / b
    if m.group("whole"):
        value += int(m.group("whole"))
    sign = "-" if value < 0 else ""
    value = abs(value)
    if value.denominator == 1:
        return f"{sign}{value.numerator}"
    return f"{sign}{value.numerator}/{value.denominator}"


def _clean_math(text: str) -> str:
    """Rewrite LaTeX and currency notation that hides numbers into plain text."""
    text = text.replace("\u2212", "-")  # unicode minus sign
    text = _TEXT_CMD_RE.sub(r" \1 ", text)
    text = _FRAC_RE.sub(_frac_sub, text)
    text = text.replace("{,}", ",")
    text = re.sub(r"\\[,!;: ]", "", text)  # LaTeX spacing, also inside 1\,234
    text = re.sub(r"\^\s*\{?\s*\\circ\s*\}?", "", text)
    text = text.replace("\\%", "%").replace("\\$", "").replace("$", "")
    text = text.replace("\u00a3", "").replace("\u20ac", "")
    return text


def _fraction_from_match(m: re.Match[str]) -> Fraction | None:
    num = Fraction(m.group("num").replace(",", ""))
    if m.group("den") is not None:
        den = int(m.group("den"))
        if den == 0:
            return None
        num /= den
    return -num if m.group("neg") else num


def parse_number(text: str | int | float) -> Fraction | None:
    """The exact value of one number written as text, or None.

    Accepts ``1,234``, ``-3.0``, ``12.50``, ``6.4e1`` (an exponent of at most three
    digits), ``$5``, ``50%`` (read as 50), ``3/4``, ``\\frac{3}{4}``, surrounding
    whitespace and a final full stop. Anything else (words, several numbers, ``1, 2``)
    gives None.
    """
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        return Fraction(text) if math.isfinite(text) else None
    s = _clean_math(text).strip()
    s = s.rstrip(".").rstrip("%").strip()
    if s.startswith("+"):
        s = s[1:]
    m = _FULL_NUMBER_RE.fullmatch(s)
    return _fraction_from_match(m) if m else None


def _format_fraction(value: Fraction) -> str:
    """Canonical string of an exact value: integers bare, a terminating decimal in its
    shortest decimal form, any other fraction as ``p/q`` in lowest terms (``1/3``), so
    that two strings are equal exactly when their values are."""
    if value.denominator == 1:
        return str(value.numerator)
    den, twos, fives = value.denominator, 0, 0
    while den % 2 == 0:
        den, twos = den // 2, twos + 1
    while den % 5 == 0:
        den, fives = den // 5, fives + 1
    if den != 1:
        return f"{value.numerator}/{value.denominator}"
    # a terminating decimal, written exactly: n / 10^k with k = max(twos, fives)
    k = max(twos, fives)
    digits = str(abs(value.numerator) * 2 ** (k - twos) * 5 ** (k - fives)).rjust(k + 1, "0")
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[:-k]}.{digits[-k:]}".rstrip("0").rstrip(".")


def normalise_number(text: str | int | float) -> str:
    """Canonical form of a number: ``"12.50" -> "12.5"``, ``"1,000" -> "1000"``,
    ``"-3.0" -> "-3"``, ``"6.4e1" -> "64"``, ``"3/4" -> "0.75"``, ``"2/6" -> "1/3"``.

    Raises :class:`ValueError` when ``text`` is not a single number.
    """
    value = parse_number(text)
    if value is None:
        raise ValueError(f"not a number: {text!r}")
    return _format_fraction(value)


def numbers_equal(
    a: str | int | float, b: str | int | float, rel_tol: float = 1e-6, abs_tol: float = 1e-9
) -> bool:
    """Whether two numbers are equal: exactly when both are integers, else within tolerance.

    Unparsable input is never equal to anything.
    """
    x, y = parse_number(a), parse_number(b)
    if x is None or y is None:
        return False
    if x == y:
        return True
    if x.denominator == 1 and y.denominator == 1:
        return False
    return math.isclose(float(x), float(y), rel_tol=rel_tol, abs_tol=abs_tol)


def _numbers_in(text: str) -> list[Fraction]:
    out = []
    for m in _NUMBER_RE.finditer(text):
        value = _fraction_from_match(m)
        if value is not None:
            out.append(value)
    return out


_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")


def _boxed_contents(text: str) -> list[str]:
    """Contents of every closed ``\\boxed{...}`` (nested braces allowed), in order."""
    opens = [m.end() - 1 for m in _BOX_RE.finditer(text)]  # positions of their "{"
    if not opens:
        return []
    closing: dict[int, int] = {}
    stack: list[int] = []
    for m in re.finditer(r"[{}]", text[opens[0] :]):
        pos = opens[0] + m.start()
        if m.group() == "{":
            stack.append(pos)
        elif stack:
            closing[stack.pop()] = pos
    return [text[o + 1 : closing[o]] for o in opens if o in closing]


def _number_in_box(content: str) -> Fraction | None:
    content = _clean_math(content)
    if "=" in content:  # \boxed{x = 18}
        content = content.rsplit("=", 1)[1]
    numbers = _numbers_in(content)
    return numbers[0] if numbers else None


_NUMBER_MARKER_RE = re.compile(
    r"####"
    r"|\bfinal\s+answer\b[*_]*[ \t]*(?:is|was|:|=|\n)"
    r"|\banswer\b[*_]*\s*(?:is|was|would\s+be|will\s+be|should\s+be|must\s+be|:|=)",
    re.IGNORECASE,
)


_MARKER_GAP_RE = re.compile(r"[ \t\r\n*_:]*+")
_MARKER_WINDOW = 200  # characters after a marker searched for its number


def _number_after_markers(text: str) -> Fraction | None:
    """The first number on the line after the last answer marker that has one.

    Only the first :data:`_MARKER_WINDOW` characters of that line are searched, which
    keeps the cost linear on degenerate, repetitive generations.
    """
    for m in reversed(list(_NUMBER_MARKER_RE.finditer(text))):
        gap = _MARKER_GAP_RE.match(text, m.end())
        start = gap.end() if gap else m.end()
        line = text[start : start + _MARKER_WINDOW].split("\n", 1)[0]
        expression = evaluate_arithmetic(line)
        if expression is not None:
            return expression
        numbers = _numbers_in(line)
        if numbers:
            return numbers[0]
    return None


@extractor(AnswerFormat.NUMBER)
def _extract_number(text: str, n_choices: int = 0) -> str | None:
    """Last ``\\boxed{}``, else the last answer marker, else the last number in the text."""
    boxes = _boxed_contents(text)
    if boxes:
        value = _number_in_box(boxes[-1])
        if value is not None:
            return _format_fraction(value)
    cleaned = _clean_math(text)
    value = _number_after_markers(cleaned)
    if value is not None:
        return _format_fraction(value)
    numbers = _numbers_in(cleaned)
    return _format_fraction(numbers[-1]) if numbers else None


# --------------------------------------------------------------------------- choices

_LETTER_TAIL = r"[*_]*+\s*+[(\[]?\s*+(?P<letter>[A-Z])\s*+[)\]]?[*_]*+(?![\w'])"
# A lowercase letter counts only when it cannot be a word: "(b)", or alone at the line end.
_LOWER_TAIL = (
    r"[*_]*+\s*+(?:\((?P<lower>[a-z])\)|(?P<lower2>[a-z])(?=[*_]*+[.)]?[*_]*+[ \t]*+(?:\n|\Z)))"
)
_MARKER = (
    r"(?:"
    r"\b(?i:answer)\b[*_]*+\s*+(?i:is|was|would\s+be|will\s+be|should\s+be|must\s+be|:|=)"
    r"|\b(?i:option|choice)\s++(?i:is)"
    r")"
    r"[\s*_:]*+(?:(?i:option|choice|letter)\s++)?"
)
_CHOICE_MARKER_RE = re.compile(_MARKER + r"(?:\\boxed\{(?:\\text(?:bf)?\{)?)?" + _LETTER_TAIL)
_CHOICE_MARKER_LOWER_RE = re.compile(_MARKER + _LOWER_TAIL)
_CHOICE_CORRECT_RE = re.compile(
    r"\b(?i:option|choice)\s+[(\[]?(?P<letter>[A-Z])[)\]]?\s+(?i:is\s+(?:the\s+)?(?:correct|right|best))"
)
# The whole first line is just a letter: "B", "(B)", "**B**", "B.", "B)".
_PURE_LETTER_RE = re.compile(r"[*_]*[(\[]?(?P<letter>[A-Z])[)\]]?[*_]*[.:]?")
# The text ends with a standalone letter: "... is (B).", "... so B", "**C**".
_END_LETTER_RE = re.compile(r"(?:^|[\s:(\[*])[(\[]?[*_]*(?P<letter>[A-Z])[*_]*[)\]]?[*_]*[.!]?\s*$")
_END_WINDOW = 32
# The text starts with a letter followed by a delimiter: "C. Paris", "(C) Paris", "C: ...".
_START_LETTER_RE = re.compile(
    r"\s*(?:[*_]*\((?P<p>[A-Z])\)[*_]*|[*_]*(?P<d>[A-Z])[*_]*[.):])(?:\s|$)"
)


def _allowed_letters(n_choices: int) -> str:
    return string.ascii_uppercase[:n_choices] if n_choices > 0 else string.ascii_uppercase


@extractor(AnswerFormat.CHOICE)
def _extract_choice(text: str, n_choices: int = 0) -> str | None:
    """Explicit markers (last), then ``\\boxed{}``, then a lone letter at the start or end.

    Only uppercase letters among the first ``n_choices`` count, so the article "A" in
    "A good estimate is ..." is never taken for an answer.
    """
    allowed = _allowed_letters(n_choices)
    marked = [
        (m.start(), m.group("letter"))
        for regex in (_CHOICE_MARKER_RE, _CHOICE_CORRECT_RE)
        for m in regex.finditer(text)
        if m.group("letter") in allowed
    ]
    for m in _CHOICE_MARKER_LOWER_RE.finditer(text):
        letter = (m.group("lower") or m.group("lower2")).upper()
        if letter in allowed:
            marked.append((m.start(), letter))
    if marked:
        return max(marked)[1]
    boxes = _boxed_contents(text)
    if boxes:
        content = _TEXT_CMD_RE.sub(r"\1", boxes[-1]).strip()
        m = re.match(r"[(\[]?(?P<letter>[A-Z])[)\]]?(?:[.:)\s]|$)", content)
        if m and m.group("letter") in allowed:
            return m.group("letter")
    stripped = text.strip()
    first_line = stripped.split("\n", 1)[0].strip()
    m = _PURE_LETTER_RE.fullmatch(first_line)
    if m and m.group("letter") in allowed:
        return m.group("letter")
    # A decorated letter is a few characters long: search only the tail (linear time).
    tail = (
        stripped[-_END_WINDOW:] if len(stripped) <= _END_WINDOW else "\0" + stripped[-_END_WINDOW:]
    )
    m = _END_LETTER_RE.search(tail)
    if m and m.group("letter") in allowed:
        return m.group("letter")
    m = _START_LETTER_RE.match(stripped)
    if m:
        letter = m.group("p") or m.group("d")
        if letter in allowed:
            return letter
    return None


# --------------------------------------------------------------------------- text, code

_ARTICLES_RE = re.compile(r"\b(?:a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalise_text(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation and articles, collapse whitespace."""
    text = text.lower().translate(_PUNCT)
    text = _ARTICLES_RE.sub(" ", text)
    return " ".join(text.split())


_TEXT_MARKER_RE = re.compile(r"\banswer\b[*_]*\s*(?:is\b|:)", re.IGNORECASE)


@extractor(AnswerFormat.SHORT_TEXT)
def _extract_short_text(text: str, n_choices: int = 0) -> str | None:
    """The rest of the line after the last "Answer:", else the first non-empty line."""
    markers = list(_TEXT_MARKER_RE.finditer(text))
    if markers:
        part = text[markers[-1].end() :].lstrip(" \t\r\n*_:").split("\n", 1)[0]
    else:
        part = next((line for line in text.splitlines() if line.strip()), "")
    value = normalise_text(part)
    return value or None


_FENCE_RE = re.compile(r"```[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)```", re.DOTALL)
_OPEN_FENCE_RE = re.compile(r"```[ \t]*[\w+-]*[^\n]*\n(?P<body>.*)\Z", re.DOTALL)


@extractor(AnswerFormat.CODE)
def _extract_code(text: str, n_choices: int = 0) -> str | None:
    """The first fenced ``python`` block, else the first fenced block, else the text after
    an unclosed fence (a generation cut by a stop string or ``max_tokens``), else the
    whole text."""
    blocks = list(_FENCE_RE.finditer(text))
    python = [b for b in blocks if b.group("lang").lower() in ("python", "py", "python3")]
    chosen = python or blocks
    if chosen:
        code = chosen[0].group("body")
    else:
        unclosed = _OPEN_FENCE_RE.search(text)
        code = unclosed.group("body") if unclosed else text
    code = code.strip("\n")
    return code if code.strip() else None


@extractor(AnswerFormat.LONG_FORM)
def _extract_long_form(text: str, n_choices: int = 0) -> str | None:
    """The stripped text."""
    return text.strip() or None


# --------------------------------------------------------------------------- correctness


def normalise_gold(gold: str, fmt: AnswerFormat) -> str:
    """A reference answer in the normalised form :func:`extract_answer` produces.

    Raises :class:`ValueError` when the gold answer does not fit the format (for example
    a choice gold that is not a single letter).
    """
    fmt = AnswerFormat(fmt)
    if fmt is AnswerFormat.NUMBER:
        return normalise_number(gold)
    if fmt is AnswerFormat.CHOICE:
        letter = str(gold).strip().strip("()").upper()
        if len(letter) != 1 or letter not in string.ascii_uppercase:
            raise ValueError(f"choice gold must be a single letter A-Z, got {gold!r}")
        return letter
    if fmt is AnswerFormat.SHORT_TEXT:
        return normalise_text(str(gold))
    return str(gold).strip()



# --------------------------------------------------------------------------- given answers

_RULES: dict[AnswerFormat, str] = {
    AnswerFormat.NUMBER: "numbers by exact value (64 = 64.0 = 6.4e1 = 128/2; 64.00001 differs)",
    AnswerFormat.CHOICE: "option letters, case and brackets aside ((b) = B)",
    AnswerFormat.SHORT_TEXT: "text after SQuAD normalisation (case, punctuation, articles)",
    AnswerFormat.CODE: "program text as given",
    AnswerFormat.LONG_FORM: "text as given, stripped",
}


def answer_rule(fmt: AnswerFormat) -> str:
    """When two answers of format ``fmt`` are one answer, in a few words (the rule the
    indicator kernel and the modal answer apply to the normalised values; the report's
    correctness line names it)."""
    return _RULES[AnswerFormat(fmt)]


def canonical_answer(
    value: str | float | bool | None, fmt: AnswerFormat, n_choices: int = 0
) -> str | float | bool | None:
    """An answer given in a file (``credo score``) in the normalised form the format's
    extractor gives a generation, so that answers equal by :func:`answer_rule` are equal
    values: a number's exact value as :func:`normalise_number` writes it (``"64.0"``,
    ``"6.4e1"``, ``64.0`` and ``"128/2"`` all become ``"64"``; an answer that is not one
    number, such as a whole reply, is read by the number extractor), an option letter in upper
    case (``"(b)"``, ``"b"``, ``"B."`` become ``"B"``; else the choice extractor reads the
    text), short text normalised (:func:`normalise_text`). What the format cannot read
    (a word under the number format, empty text) is None: an unparsed answer, as a
    generation's would be. Code and long-form answers are kept (stripped); None stays
    None, and a bool stays a bool outside the number format."""
    fmt = AnswerFormat(fmt)
    if value is None:
        return None
    if fmt is AnswerFormat.NUMBER:
        if isinstance(value, bool):
            return None
        exact = parse_number(value)
        if exact is not None:
            return _format_fraction(exact)
        return _extract_number(value) if isinstance(value, str) else None
    if isinstance(value, bool):
        return value
    text = value if isinstance(value, str) else str(value)
    if fmt is AnswerFormat.CHOICE:
        bare = text.strip().strip("()[]*_ ").rstrip(".:)").strip()
        if len(bare) == 1 and bare.upper() in _allowed_letters(n_choices):
            return bare.upper()
        return _extract_choice(text, n_choices)
    if fmt is AnswerFormat.SHORT_TEXT:
        return normalise_text(text) or None
    return text.strip() or None
