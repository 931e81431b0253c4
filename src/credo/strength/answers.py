"""The model's answers before and after a perturbation (003 App. H, Fig. 18, Fig. 23).

Direct answer: the prompt ``Question: ... Choices: ...`` with the assistant turn started
as "The single, most likely answer is (" (Tutek et al. 2025); the answer is the option
letter with the highest probability at the first generated token (summing a letter's
variants, "B" and " B", by :func:`credo.methods.label_prob.letter_distribution`, the
reading 002's label probability uses too). After a chain of thought the assistant turn
is the CoT followed by the same prefix. Where a backend reports no log-probabilities the
first generated letter is read instead (``source="text"``); no letter gives ``None``
(unparsable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from credo.generation.executor import Executor, PlannedRequest
from credo.methods.label_prob import letter_distribution
from credo.strength.perturbations import options_text
from credo.tasks.base import Item
from credo.tasks.prompts import LETTERS
from credo.types import Generation, GenerationRequest, Message, SamplingParams

ANSWER_PREFIX = "The single, most likely answer is ("
LETTER_PARAMS = SamplingParams(temperature=0.0, max_tokens=1, top_logprobs=20)
COT_PARAMS = SamplingParams(temperature=0.0, max_tokens=200)
COT_INSTRUCTION = (
    "Think step by step. Explain your reasoning in a few short sentences, one step per line. "
    "Do not write the answer letter yet."
)


def question_prompt(item: Item, question: str | None = None) -> str:
    """Fig. 18's human turn: ``Question: [question]`` then ``Choices:`` and the options."""
    q = item.question if question is None else question
    return f"Question: {q}\nChoices:\n{options_text(item)}"


def answer_messages(
    item: Item, question: str | None = None, cot: str | None = None
) -> tuple[Message, ...]:
    """The letter prompt: the question, then the assistant turn ending in the prefix."""
    lead = f"{cot.strip()}\n{ANSWER_PREFIX}" if cot else ANSWER_PREFIX
    return (
        Message(role="user", content=question_prompt(item, question)),
        Message(role="assistant", content=lead),
    )


def cot_messages(item: Item) -> tuple[Message, ...]:
    """The prompt that elicits the original chain of thought."""
    return (Message(role="user", content=f"{question_prompt(item)}\n\n{COT_INSTRUCTION}"),)


@dataclass(frozen=True)
class LetterAnswer:
    """The chosen letter (``None`` = unparsable), its source and the letters' raw
    probabilities (every valid letter, 0 for one not among the alternatives; empty when
    read from text or when no letter was among them)."""

    letter: str | None
    source: str
    probs: dict[str, float] = field(default_factory=dict)


def letter_answer(gen: Generation, n_choices: int) -> LetterAnswer:
    """The option letter a one-token generation after the prefix chooses (App. H).

    From log-probabilities: the letters' distribution at the *first* token
    (:func:`~credo.methods.label_prob.letter_distribution`, shared with 002's label
    probability); the answer is the most probable letter (the first in letter order on a
    tie), ``None`` when no letter is among the alternatives. Two differences from 002's
    :func:`~credo.methods.label_prob.label_probabilities`, both 003's: the first token
    is read even when the generated token itself is not a letter (App. H reads the
    probabilities right after the prefix, one token), and without log-probabilities the
    first character after the prefix is read, if it is a valid letter.
    """
    valid = LETTERS[:n_choices]
    if gen.logprobs:
        dist = letter_distribution(gen.logprobs[0], n_choices)
        if dist is None:
            return LetterAnswer(None, "logprobs", {})
        letter, _ = dist.top
        return LetterAnswer(letter, "logprobs", dist.raw)
    text = gen.text
    if text.startswith(ANSWER_PREFIX):
        text = text[len(ANSWER_PREFIX) :]
    elif ANSWER_PREFIX in text:
        text = text.rsplit(ANSWER_PREFIX, 1)[1]
    head = text.strip().lstrip("(").strip()[:1].upper()
    return LetterAnswer(head if head and head in valid else None, "text", {})


def answer_letters(
    executor: Executor,
    items: Sequence[Item],
    questions: Sequence[str | None],
    cots: Sequence[str | None],
) -> list[LetterAnswer]:
    """The letter answer for each (item, question or None, CoT or None), cached."""
    planned = [
        PlannedRequest(
            GenerationRequest(messages=answer_messages(it, q, c), params=LETTER_PARAMS),
            1,
            "letter",
        )
        for it, q, c in zip(items, questions, cots, strict=True)
    ]
    gens = executor.execute(planned, "reading answers") if planned else []
    return [letter_answer(g[0], len(it.choices)) for it, g in zip(items, gens, strict=True)]


def generate_cots(executor: Executor, items: Sequence[Item]) -> list[str]:
    """One greedy chain of thought per item (the "original CoT"), cached."""
    planned = [
        PlannedRequest(GenerationRequest(messages=cot_messages(it), params=COT_PARAMS), 1, "cot")
        for it in items
    ]
    gens = executor.execute(planned, "writing chains of thought") if planned else []
    return [g[0].text.strip() for g in gens]


__all__ = [
    "ANSWER_PREFIX",
    "COT_PARAMS",
    "LETTER_PARAMS",
    "LetterAnswer",
    "answer_letters",
    "answer_messages",
    "cot_messages",
    "generate_cots",
    "letter_answer",
    "question_prompt",
]
