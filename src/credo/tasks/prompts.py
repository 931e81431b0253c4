"""Prompt templates: item (+ optional context prefix) -> chat messages.

The paper's benchmark prompts (Wu et al., App. D.4) are missing from our copy; these are
written from its description. What every sample of a task shares (the instruction) goes
first, in the system message, so backends reuse its prompt evaluation; the perturbation
is prefixed to the question separated by a single space (Wu et al., §5: "The noise was
prefixed to each prompt, separated by a single space").
"""

from __future__ import annotations

from credo.errors import UserError
from credo.tasks.base import AnswerFormat, Item
from credo.types import Message

INSTRUCTIONS: dict[tuple[AnswerFormat, str], str] = {
    (AnswerFormat.NUMBER, "direct"): (
        "Solve the math word problem. Reply with the final answer only, as a single number "
        "in the form \"Answer: <number>\". Do not explain."
    ),
    (AnswerFormat.NUMBER, "cot"): (
        "Solve the math word problem step by step, briefly. End with the final answer as a "
        "single number in the form \"Answer: <number>\"."
    ),
    (AnswerFormat.NUMBER, "brief"): (
        "Solve the math word problem. Show only the key calculations as short equations on "
        "one line, no words, then give the final answer as a single number in the form "
        "\"Answer: <number>\"."
    ),
    (AnswerFormat.NUMBER, "expression"): (
        "Translate the math word problem into one Python arithmetic expression that computes "
        "the final answer (numbers and + - * / ( ) only). Reply with the expression only, in "
        "the form \"Answer: <expression>\"."
    ),
    (AnswerFormat.CHOICE, "direct"): (
        "Answer the multiple-choice question. Reply with the letter of the correct option "
        "only, in the form \"Answer: <letter>\". Do not explain."
    ),
    (AnswerFormat.CHOICE, "cot"): (
        "Answer the multiple-choice question. Think step by step, briefly, then end with the "
        "letter of the correct option in the form \"Answer: <letter>\"."
    ),
    (AnswerFormat.SHORT_TEXT, "direct"): (
        "Answer the question with a short answer (a few words) in the form "
        "\"Answer: <answer>\". Do not explain."
    ),
    (AnswerFormat.SHORT_TEXT, "cot"): (
        "Answer the question. Think briefly, then end with a short answer in the form "
        "\"Answer: <answer>\"."
    ),
    (AnswerFormat.CODE, "direct"): (
        "Complete the Python function below. Reply with the complete function, signature "
        "included, in a single ```python code block. No explanation, no tests."
    ),
    (AnswerFormat.LONG_FORM, "direct"): (
        "Answer the request in one paragraph of a few sentences. State facts only."
    ),
}

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def question_text(item: Item, prefix: str | None = None) -> str:
    """The question as shown to the model: ``[prefix; question]`` plus lettered options."""
    text = item.question if not prefix else f"{prefix.strip()} {item.question}"
    if item.choices:
        options = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(item.choices))
        text = f"{text}\n\n{options}"
    return text


RENDERED = "rendered"
"""``item.meta["prompt"]``: the item's question is already rendered by its benchmark's
own template (lm-eval's ``doc_to_text``), sent as is after ``meta["context"]`` (its
description and few-shot examples) and before ``meta["suffix"]``, with no instruction."""


def render_messages(
    item: Item, fmt: AnswerFormat, style: str = "direct", prefix: str | None = None
) -> tuple[Message, ...]:
    """System instruction for (format, style), then the (optionally perturbed) question;
    a :data:`RENDERED` item is its own prompt (the prefix goes right before its
    question)."""
    if item.meta.get("prompt") == RENDERED:
        question = item.question if not prefix else f"{prefix.strip()} {item.question}"
        text = f"{item.meta.get('context', '')}{question}{item.meta.get('suffix', '')}"
        return (Message(role="user", content=text),)
    try:
        instruction = INSTRUCTIONS[(fmt, style)]
    except KeyError:
        known = sorted({f"{f.value}/{s}" for f, s in INSTRUCTIONS})
        raise UserError(
            f"no prompt for format {fmt.value!r} style {style!r}; known: {known}"
        ) from None
    return (
        Message(role="system", content=instruction),
        Message(role="user", content=question_text(item, prefix)),
    )

