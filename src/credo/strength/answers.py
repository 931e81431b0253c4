"""The model's answers before and after a perturbation (Le et al., App. H, Fig. 18, Fig. 23).

Direct answer: the prompt ``Question: ... Choices: ...`` with the assistant turn started
as "The single, most likely answer is (" (Tutek et al. 2025); the answer is the option
letter with the highest probability at the first generated token (summing a letter's
variants, "B" and " B", by :func:`credo.methods.label_prob.letter_distribution`, the
reading Müller et al.'s label probability uses too). After a chain of thought the assistant turn
is the CoT followed by the same prefix. Where a backend reports no log-probabilities the
first generated letter is read instead (``source="text"``); no letter gives ``None``
(unparsable).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from credo.generation.executor import PlannedRequest
from credo.methods.label_prob import letter_distribution
from credo.pipeline.stages import Generated, Stage, StagePlan, placeholder_text
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
    (:func:`~credo.methods.label_prob.letter_distribution`, shared with Müller et al.'s label
    probability); the answer is the most probable letter (the first in letter order on a
    tie), ``None`` when no letter is among the alternatives. Two differences from Müller et al.'s
    :func:`~credo.methods.label_prob.label_probabilities`, both Le et al.'s: the first token
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


COT_STAGE = "chains of thought"
"""The ledger stage of the original chains of thought."""
LETTER_STAGE = "answer letters"
"""The ledger stage of the answers before and after a perturbation (App. H)."""


@dataclass(frozen=True)
class LetterAsk:
    """One letter answer to read: the item, its (edited) question or None, the CoT
    before the answer prefix or None."""

    item: Item
    question: str | None = None
    cot: str | None = None


def letter_request(ask: LetterAsk) -> PlannedRequest:
    """The one-token request of a letter answer (cached, greedy, top-20 logprobs)."""
    return PlannedRequest(
        GenerationRequest(messages=answer_messages(ask.item, ask.question, ask.cot),
                          params=LETTER_PARAMS),
        1,
        "letter",
    )


def cot_request(item: Item) -> PlannedRequest:
    """The request of an item's original chain of thought (greedy)."""
    return PlannedRequest(GenerationRequest(messages=cot_messages(item), params=COT_PARAMS), 1,
                          "cot")


class CotStage(Stage):
    """Stage 1 of a strength run: one greedy chain of thought per item (the "original
    CoT"); reads ``{item id: CoT text}``."""

    name = COT_STAGE
    description = "writing chains of thought"

    def __init__(self, role: str) -> None:
        self.role = role

    def plan(self, items: Sequence[Item], context: object = None) -> StagePlan:
        return {it.id: [cot_request(it)] for it in items}

    def read(self, generations: Generated) -> dict[str, str]:
        return {unit: gens[0][0].text.strip() for unit, gens in generations.items()}

    def placeholder(self, request: GenerationRequest) -> str:
        """A CoT of ``max_tokens`` tokens in four steps (the writers plan per step)."""
        step = placeholder_text(request.params.max_tokens // 4 - 1)
        return "\n".join(f"Step {k}: {step}." for k in range(4))


class LetterStage(Stage):
    """The answers before and after each perturbation (App. H): per unit, the letter of
    each :class:`LetterAsk` in order; reads ``{unit: [LetterAnswer, ...]}``."""

    name = LETTER_STAGE
    description = "reading answers"

    def __init__(self, role: str) -> None:
        self.role = role
        self._asks: dict[str, Sequence[LetterAsk]] = {}

    def plan(self, items: Mapping[str, Sequence[LetterAsk]], context: object = None) -> StagePlan:
        self._asks = dict(items)
        return {unit: [letter_request(a) for a in asks] for unit, asks in items.items()}

    def read(self, generations: Generated) -> dict[str, list[LetterAnswer]]:
        return {
            unit: [letter_answer(g[0], len(a.item.choices))
                   for a, g in zip(self._asks[unit], gens, strict=True)]
            for unit, gens in generations.items()
        }

    def placeholder(self, request: GenerationRequest) -> str:
        return "A"


__all__ = [
    "ANSWER_PREFIX",
    "COT_PARAMS",
    "COT_STAGE",
    "LETTER_PARAMS",
    "LETTER_STAGE",
    "CotStage",
    "LetterAnswer",
    "LetterAsk",
    "LetterStage",
    "answer_messages",
    "cot_messages",
    "cot_request",
    "letter_answer",
    "letter_request",
    "question_prompt",
]
