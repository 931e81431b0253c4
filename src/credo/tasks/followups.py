"""Prompts and reply parsers of Müller et al.'s baselines: follow-ups about a generated answer,
APriCoT option verdicts, label-only answers and the NLI step of CCP.

The prompts of Müller et al.'s repository are not in our copy of the paper; these are written from
the descriptions in Müller et al., §3.4–3.6 and App. A.11.3 and from the original papers (Tian et
al. 2023 for verbalized confidence, Kadavath et al. 2022 for P(True), Moore et al. for
APriCoT, Fadeeva et al. 2024 for CCP). Every parser returns None for a reply it cannot
read, so an unparsable reply is recorded as such and never becomes a 0.
"""

from __future__ import annotations

import re

from credo.tasks.base import Item
from credo.tasks.prompts import LETTERS, question_text
from credo.types import Message

VERBALIZED_PROMPT = (
    "Provide the probability that your answer above is correct (0.0 to 1.0). "
    "Give ONLY the probability, no other words or explanation, in the form "
    '"Probability: <number between 0.0 and 1.0>".'
)

P_TRUE_SYSTEM = "You check whether proposed answers to questions are true."

P_TRUE_TEMPLATE = (
    "Question: {question}\n\nProposed Answer: {answer}\n\n"
    "Is the proposed answer:\n (A) True\n (B) False\n"
    "Reply with the letter only."
)

LABEL_SYSTEM = (
    "Answer the multiple-choice question with the letter of the correct option only. "
    "Reply with a single letter."
)

APRICOT_SYSTEM = (
    "You are given a multiple-choice question and one of its options. Decide whether this "
    "option is a correct answer to the question. Think step by step in at most three short "
    'sentences, then end with "Verdict: correct" or "Verdict: incorrect".'
)

NLI_SYSTEM = (
    "You compare two statements that differ in one word. Decide whether statement B "
    "follows from statement A (entail), contradicts it (contradict), or neither (neutral). "
    "Reply with one word: entail, contradict or neutral."
)


def verbalized_messages(original: tuple[Message, ...], sample_text: str) -> tuple[Message, ...]:
    """The original conversation, the sampled answer, then the request for a probability
    that the answer is correct (Tian et al. 2023; Müller et al., §3.5 "post-generation")."""
    return (
        *original,
        Message(role="assistant", content=sample_text.strip() or "(no answer)"),
        Message(role="user", content=VERBALIZED_PROMPT),
    )


def p_true_messages(item: Item, sample_text: str) -> tuple[Message, ...]:
    """Kadavath et al. (2022)'s P(True) prompt on one proposed answer (Müller et al., §3.5)."""
    return (
        Message(role="system", content=P_TRUE_SYSTEM),
        Message(
            role="user",
            content=P_TRUE_TEMPLATE.format(
                question=question_text(item), answer=sample_text.strip() or "(no answer)"
            ),
        ),
    )


def label_messages(item: Item) -> tuple[Message, ...]:
    """The label-only prompt of Müller et al., §3.4: the reply's first token is an option letter."""
    return (
        Message(role="system", content=LABEL_SYSTEM),
        Message(role="user", content=question_text(item)),
    )


def apricot_messages(item: Item, option: int) -> tuple[Message, ...]:
    """APriCoT (Müller et al., §3.6): one chain-of-thought prompt per option, asking whether that
    option alone is correct."""
    letter = LETTERS[option]
    return (
        Message(role="system", content=APRICOT_SYSTEM),
        Message(
            role="user",
            content=f"{question_text(item)}\n\nOption to judge: {letter}. {item.choices[option]}",
        ),
    )


def nli_messages(statement_a: str, statement_b: str) -> tuple[Message, ...]:
    """The NLI step of CCP (Fadeeva et al. 2024) asked of an LLM judge."""
    return (
        Message(role="system", content=NLI_SYSTEM),
        Message(role="user", content=f"A: {statement_a}\nB: {statement_b}"),
    )


_PROB = re.compile(r"(?<![\w.])(\d{1,3}(?:\.\d+)?\s*%|1(?:\.0+)?|0?\.\d+|0)(?![\w.])")


def parse_confidence(text: str) -> float | None:
    """A probability in [0, 1] from a verbalized reply; None when there is none.

    Reads the first number after the last "probability" / "confidence" marker when there
    is one ("The probability that it is correct is 0.8"), else the only number of the
    reply. Percentages are divided by 100. A number outside [0, 1], or several numbers
    without a marker, is unparsable.
    """
    t = text.strip()
    markers = list(re.finditer(r"probability|confidence", t, flags=re.IGNORECASE))
    if markers:
        rest = t[markers[-1].end() :]
        m = _PROB.search(rest)
        return _to_probability(m.group(1)) if m else None
    cand = [g.group(1) for g in _PROB.finditer(t)]
    if len(cand) != 1:
        return None
    return _to_probability(cand[0])


def _to_probability(token: str) -> float | None:
    tok = token.strip().rstrip(".,;")
    pct = tok.endswith("%")
    try:
        value = float(tok.rstrip("%").strip())
    except ValueError:
        return None
    if pct:
        value /= 100.0
    if not 0.0 <= value <= 1.0:
        return None
    return value


_VERDICT = re.compile(r"verdict\s*[:\-]?\s*\**\s*(correct|incorrect|true|false)", re.IGNORECASE)


def parse_verdict(text: str) -> bool | None:
    """APriCoT verdict: True for "Verdict: correct", False for "incorrect", else None.

    The last "Verdict:" wins (a model may restate its reasoning). Without the marker,
    a reply whose last line is exactly "correct" or "incorrect" is read too.
    """
    found = _VERDICT.findall(text)
    if found:
        return found[-1].lower() in ("correct", "true")
    lines = [ln.strip(" .*").lower() for ln in text.strip().splitlines() if ln.strip()]
    if lines and lines[-1] in ("correct", "incorrect"):
        return lines[-1] == "correct"
    return None


def parse_nli(text: str) -> str | None:
    """``"entail"``, ``"contradict"`` or ``"neutral"`` from a judge reply; None otherwise."""
    words = re.findall(r"[a-z]+", text.lower())
    if not words:
        return None
    w = words[0]
    if w.startswith("entail"):
        return "entail"
    if w.startswith("contradict"):
        return "contradict"
    if w.startswith("neutral") or w == "neither":
        return "neutral"
    return None


def normalise_label_token(token: str) -> str:
    """A token stripped of whitespace, brackets, punctuation and markdown, upper-cased."""
    return token.strip().strip("()[]{}.:*\"' ").upper()
