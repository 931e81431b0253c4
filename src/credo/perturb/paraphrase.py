"""Meaning-preserving paraphrases of a question (Portillo Wightman et al. 2023; Wu et al., App. J).

An LLM rephrases the question stem (options of a multiple-choice item are kept as they
are); candidates are drawn at T = 1 as consecutive samples of one cached request and
kept in sample order when they are usable: not empty, not the question itself, not a
duplicate, and carrying exactly the numbers of the question (a paraphrase that changes
a number changes the problem; Wu et al., §2 warns that LLM paraphrases drift in meaning).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from credo.generation.executor import Executor, PlannedRequest
from credo.generation.pool import PARAPHRASER
from credo.generation.stage import Generated, Stage, StagePlan, StageRunner
from credo.perturb.context import KeptTexts
from credo.tasks.base import Item
from credo.types import GenerationRequest, Message, SamplingParams

PARAPHRASE_SYSTEM_PROMPT = (
    "Rewrite the question in different words without changing its meaning. Keep every "
    "number, name and fact exactly; do not answer it and do not add information. Reply "
    "with the rewritten question only."
)

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


@dataclass(frozen=True)
class ParaphraseSet(KeptTexts):
    """The kept paraphrases of one item and how many candidates were rejected."""

    rejected: int


def paraphrase_messages(item: Item) -> tuple[Message, ...]:
    """The paraphrasing request for one item's question stem."""
    return (
        Message(role="system", content=PARAPHRASE_SYSTEM_PROMPT),
        Message(role="user", content=item.question),
    )


def clean_paraphrase(text: str, question: str) -> str | None:
    """The usable paraphrase in ``text``, or None.

    Strips a leading label ("Paraphrase:", "Rewritten question:") and surrounding quotes,
    keeps the first paragraph, and rejects it when empty, equal to the question, or when
    its numbers differ from the question's (as multisets).
    """
    t = text.strip()
    t = re.sub(
        r"^(?:\*\*)?(?:paraphrase[sd]?|rewritten question|rewrite)\s*:?\s*(?:\*\*)?\s*",
        "",
        t,
        flags=re.IGNORECASE,
    )
    t = t.split("\n\n")[0].strip().strip('"“”').strip()
    if not t or _squash(t) == _squash(question):
        return None
    if Counter(_NUMBER.findall(t)) != Counter(_NUMBER.findall(question)):
        return None
    return t


PARAPHRASE_STAGE = "paraphrase writing"
"""The ledger stage of the paraphraser's requests."""


def plan_paraphrases(
    items: Sequence[Item], count: int, sampling: SamplingParams, candidates: int | None = None
) -> list[PlannedRequest]:
    """The paraphraser's requests (the run's and the dry run's): per item, ``candidates``
    (default 2 x ``count``) samples of its paraphrasing request, under ledger stage
    :data:`PARAPHRASE_STAGE`."""
    k = candidates or 2 * count
    return [
        PlannedRequest(
            GenerationRequest(messages=paraphrase_messages(it), params=sampling),
            k,
            label=f"{it.id}/paraphrase",
            stage=PARAPHRASE_STAGE,
        )
        for it in items
    ]


class ParaphraseStage(Stage):
    """The paraphrase baseline's writer as a planned stage: per item,
    ``candidates`` (default 2 x ``count``) samples of its paraphrasing request
    (:func:`plan_paraphrases`), asked of the paraphraser role; ``read`` keeps up to
    ``count`` distinct usable paraphrases per complete item (:func:`clean_paraphrase`)."""

    name = PARAPHRASE_STAGE
    role = PARAPHRASER
    description = "writing paraphrases"
    missing = "paraphrased prompts missing"

    def __init__(self, count: int, sampling: SamplingParams, candidates: int | None = None
                 ) -> None:
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        self.count, self.sampling, self.candidates = count, sampling, candidates
        self._items: dict[str, Item] = {}

    def plan(self, items: Sequence[Item], context: object = None) -> StagePlan:
        self._items = {it.id: it for it in items}
        planned = plan_paraphrases(items, self.count, self.sampling, self.candidates)
        return {it.id: [r] for it, r in zip(items, planned, strict=True)}

    def read(self, generations: Generated) -> dict[str, ParaphraseSet]:
        out: dict[str, ParaphraseSet] = {}
        for unit, (g,) in generations.items():
            it = self._items[unit]
            kept: list[str] = []
            examined = 0
            for gen in g:
                if len(kept) == self.count:
                    break
                examined += 1
                p = clean_paraphrase(gen.text, it.question)
                if p is not None and p not in kept:
                    kept.append(p)
            out[unit] = ParaphraseSet(unit, tuple(kept), examined, examined - len(kept))
        return out


def generate_paraphrases(
    items: tuple[Item, ...] | list[Item],
    count: int,
    executor: Executor,
    sampling: SamplingParams,
    candidates: int | None = None,
) -> dict[str, ParaphraseSet]:
    """Up to ``count`` paraphrases per item from ``candidates`` (default 2 * count)
    samples: :class:`ParaphraseStage` run on ``executor`` (a run runs it through its
    stage driver). An item whose paraphrases could not be generated (the backend's
    retries ran out) has no entry: the run marks it incomplete."""
    stage = ParaphraseStage(count, sampling, candidates)
    (sets,) = StageRunner.on(executor).run([stage], list(items))
    return sets


def _squash(s: str) -> str:
    return re.sub(r"\W+", " ", s).strip().lower()
