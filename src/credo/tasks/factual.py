"""Short factual QA graded SimpleQA-style: correct / incorrect / not attempted (Wu et al.,
§4, App. I).

Tasks (answer format SHORT_TEXT; every item carries ``meta["grader"] = "simpleqa"`` and
its acceptable answers as a JSON list in ``meta["gold_answers"]``):

* ``freshqa``: FreshQA (Vu et al. 2023) as shipped by ``inspect-evals==0.28.0``
  (``inspect_evals/abstention_bench/data/freshqa/FreshQA_v12182024.csv``: two banner
  lines, then a header; 600 rows; gold answers in ``answer_0`` .. ``answer_9``). Only the
  *never-changing* and *slow-changing* facts are kept (the fast-changing ones have gone
  stale since the snapshot), and, by default, only questions with a valid premise
  (299 items): a false-premise question ("the first animal to land on the moon") asks
  for a rebuttal, not a short answer. ``freshqa:all`` keeps the false-premise ones (445).
* ``simpleqa:<path>``: SimpleQA's ``simple_qa_test_set.csv`` (``metadata, problem,
  answer``) and ``simpleqa_verified:<path>``: SimpleQA Verified's CSV (``original_index,
  problem, answer, topic, answer_type, ...``; Wu et al.'s benchmark), for users who have them.
  Re-exports with ``question`` and ``true_answer`` columns are read too.

Grading asks a model: :func:`grading_messages` writes the grader's prompt,
:func:`parse_grade` reads its reply strictly, and the ``simpleqa`` grader
(:func:`grade_simpleqa`) plans the calls through the grading context's cached executor.
Before any call, an answer whose normalised text equals a normalised gold answer is
CORRECT, an unparsed answer NOT_ATTEMPTED, and a bare number is graded against numeric
gold answers by value (:func:`pregrade`).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from credo.generation.executor import PlannedRequest
from credo.generation.pool import GRADER
from credo.generation.stage import Generated, Stage, StagePlan
from credo.tasks.answers import normalise_text
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.grading import GRADING_STAGE, Graded, GradeMap, GradingContext, grader
from credo.tasks.loaders import DatasetError, read_csv
from credo.tasks.registry import (
    check_argument,
    package_data,
    required_argument,
    task_loader,
)
from credo.types import GenerationRequest, Message, SamplingParams

log = logging.getLogger(__name__)

__all__ = [
    "GRADER_SYSTEM_PROMPT",
    "Grade",
    "SimpleQAStage",
    "gold_answers",
    "grade_simpleqa",
    "grading_messages",
    "load_freshqa",
    "load_simpleqa",
    "parse_grade",
    "pregrade",
]

FRESHQA_FACT_TYPES = ("never-changing", "slow-changing")
SIMPLEQA = "simpleqa"


class Grade(StrEnum):
    """SimpleQA's three grades, plus the record of a grader reply that could not be read."""

    CORRECT = "correct"
    INCORRECT = "incorrect"
    NOT_ATTEMPTED = "not_attempted"
    UNPARSABLE = "unparsable"


# --------------------------------------------------------------------------- loaders


@task_loader("freshqa", variants=lambda: ["freshqa:all"])
def _freshqa(arg: str | None) -> Task:
    """FreshQA never- and slow-changing facts from the ``inspect-evals`` package."""
    check_argument("freshqa", arg, ("all",))
    path = package_data(
        "inspect_evals", "abstention_bench", "data", "freshqa", "FreshQA_v12182024.csv"
    )
    return load_freshqa(path, false_premise=arg == "all")


def load_freshqa(path: str | Path, *, false_premise: bool = False) -> Task:
    """FreshQA's CSV (two banner lines, then a header): never/slow-changing facts.

    ``false_premise`` keeps the questions with a false premise too. Ids are
    ``freshqa-<id>``; ``meta`` keeps the split, fact type and number of hops.
    """
    p = Path(path)
    items = []
    for line_no, row in _csv_rows(p, skip_lines=2):
        for col in ("id", "question", "fact_type", "false_premise", "answer_0"):
            if col not in row:
                raise DatasetError(f"{p}:{line_no}: no column {col!r} (is this FreshQA's CSV?)")
        if row["fact_type"].strip() not in FRESHQA_FACT_TYPES:
            continue
        premise_false = row["false_premise"].strip().upper() == "TRUE"
        if premise_false and not false_premise:
            continue
        golds = [row.get(f"answer_{i}", "").strip() for i in range(10)]
        golds = [g for g in golds if g]
        if not golds:
            raise DatasetError(f"{p}:{line_no}: no gold answer in answer_0..answer_9")
        items.append(
            _graded_item(
                f"freshqa-{row['id'].strip()}",
                row["question"].strip(),
                golds,
                f"{p}:{line_no}",
                split=row.get("split", "").strip(),
                fact_type=row["fact_type"].strip(),
                num_hops=row.get("num_hops", "").strip(),
                false_premise=str(premise_false).lower(),
            )
        )
    name = "freshqa:all" if false_premise else "freshqa"
    return Task(name, tuple(items), AnswerFormat.SHORT_TEXT, "short-form factual recall")


@task_loader("simpleqa", fmt=AnswerFormat.SHORT_TEXT, grader="simpleqa", source="your file",
             usage="simpleqa:<path>")
def _simpleqa(arg: str | None) -> Task:
    """SimpleQA from the user's ``simple_qa_test_set.csv``: ``simpleqa:<path>``."""
    arg = required_argument(arg, "task 'simpleqa' needs the CSV's path: simpleqa:<path>")
    return load_simpleqa(arg, name="simpleqa")


@task_loader("simpleqa_verified", fmt=AnswerFormat.SHORT_TEXT, grader="simpleqa",
             source="your file", usage="simpleqa_verified:<path>")
def _simpleqa_verified(arg: str | None) -> Task:
    """SimpleQA Verified from the user's CSV: ``simpleqa_verified:<path>``."""
    arg = required_argument(arg, "task 'simpleqa_verified' needs the CSV's path: "
                            "simpleqa_verified:<path>")
    return load_simpleqa(arg, name="simpleqa_verified")


def load_simpleqa(path: str | Path, name: str = "simpleqa") -> Task:
    """A SimpleQA or SimpleQA Verified CSV: columns ``problem`` and ``answer`` (or
    ``question`` and ``true_answer``, :data:`SIMPLEQA_COLUMNS`).

    Ids come from ``original_index`` (Verified) or the row number (``<name>-<row>``,
    0-based as in the file). ``metadata`` (SimpleQA: a Python-literal dict with topic
    and answer type) and Verified's ``topic``/``answer_type`` go to ``meta``.
    """
    p = Path(path)
    items = []
    for k, (line_no, row) in enumerate(_csv_rows(p, skip_lines=0)):
        q_col, a_col = _simpleqa_columns(row, f"{p}:{line_no}")
        question, answer = row[q_col].strip(), row[a_col].strip()
        if not question or not answer:
            raise DatasetError(f"{p}:{line_no}: empty {q_col} or {a_col}")
        index = row.get("original_index", "").strip() or str(k)
        extra = {c: row[c].strip() for c in ("topic", "answer_type", "metadata") if row.get(c)}
        items.append(_graded_item(f"{name}-{index}", question, [answer], f"{p}:{line_no}", **extra))
    return Task(name, tuple(items), AnswerFormat.SHORT_TEXT, "short-form factual recall")


SIMPLEQA_COLUMNS = (("problem", "answer"), ("question", "true_answer"))
"""The (question, answer) column pairs of SimpleQA CSVs: OpenAI's and Verified's
``problem``/``answer``; re-exports with ``question``/``true_answer``."""


def _simpleqa_columns(row: Mapping[str, str], where: str) -> tuple[str, str]:
    for pair in SIMPLEQA_COLUMNS:
        if all(c in row for c in pair):
            return pair
    known = " or ".join(f"{q!r} and {a!r}" for q, a in SIMPLEQA_COLUMNS)
    raise DatasetError(f"{where}: no question and answer columns; SimpleQA CSVs have {known}")


def _graded_item(
    item_id: str, question: str, golds: list[str], source: str, **meta: str
) -> Item:
    return Item(
        id=item_id,
        question=question,
        gold=golds[0],
        meta={"grader": SIMPLEQA, "gold_answers": json.dumps(golds, ensure_ascii=False), **meta},
        source=source,
    )


def _csv_rows(path: Path, skip_lines: int):
    """:func:`~credo.tasks.loaders.read_csv` with empty cells (missing columns) as ""."""
    for line_no, row in read_csv(path, skip_lines):
        yield line_no, {k: (v or "") for k, v in row.items()}


# --------------------------------------------------------------------------- grading


def gold_answers(item: Item) -> list[str]:
    """The acceptable answers of a graded item (``meta["gold_answers"]``, else ``gold``)."""
    raw = item.meta.get("gold_answers")
    if not raw:
        return [item.gold]
    try:
        golds = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"item {item.id!r}: meta['gold_answers'] is not a JSON list: {e}") from e
    if not isinstance(golds, list) or not all(isinstance(g, str) for g in golds):
        raise ValueError(f"item {item.id!r}: meta['gold_answers'] must be a list of strings")
    return golds


_PLAIN_NUMBER_RE = re.compile(r"^\s*[$€£]?\s*([-+]?\d[\d,]*(?:\.\d+)?)\s*%?\s*$")


def _plain_number(text: str) -> tuple[float, int] | None:
    """``(value, decimals)`` when ``text`` is only a number ("22", "1,000", "$10", "3.5%")."""
    m = _PLAIN_NUMBER_RE.match(text)
    if m is None:
        return None
    digits = m.group(1).replace(",", "")
    return float(digits), len(digits.partition(".")[2])


def pregrade(item: Item, value: str | None) -> Grade | None:
    """The grade decided without a model, else None (a judge is needed).

    NOT_ATTEMPTED for an unparsed answer; CORRECT for one equal to a gold answer after
    SQuAD normalisation. When the answer is only a number and some gold answers are only
    numbers, the numbers decide: CORRECT if it equals one of them to that gold's precision
    (SimpleQA's rule), else INCORRECT. Small judges grade "2" correct for a gold "22".
    """
    if value is None:
        return Grade.NOT_ATTEMPTED
    golds = gold_answers(item)
    if normalise_text(value) in {normalise_text(g) for g in golds}:
        return Grade.CORRECT
    predicted = _plain_number(value)
    numbers = [n for n in map(_plain_number, golds) if n is not None]
    if predicted is not None and numbers:
        hit = any(round(predicted[0], d) == v for v, d in numbers)
        return Grade.CORRECT if hit else Grade.INCORRECT
    return None


GRADER_SYSTEM_PROMPT = (
    "You grade a predicted answer to a factual question against the gold target answer(s). "
    "A: CORRECT if the prediction gives the gold target (any listed form) without contradicting "
    "it; differences in wording, spelling, capitalisation and extra details that do not "
    "contradict it are fine, and a number only needs to match to the precision of the gold. "
    "B: INCORRECT if it gives a different answer, contradicts the gold target, or hedges "
    "between several candidates. C: NOT_ATTEMPTED if it gives no answer (for example 'I don't "
    "know') and does not contradict the gold target. Reply with one letter: A, B or C."
)
"""Written from SimpleQA's grader (Wei et al. 2024), shortened for small local models."""


def grading_messages(item: Item, prediction: str) -> tuple[Message, ...]:
    """The grader's prompt for ``prediction`` (the model's reply) to ``item``."""
    golds = gold_answers(item)
    target = golds[0] + (f" (also accepted: {'; '.join(golds[1:])})" if len(golds) > 1 else "")
    user = (
        f"Question: {item.question}\nGold target: {target}\n"
        f"Predicted answer: {prediction.strip()[:1000]}\n\nGrade (A, B or C):"
    )
    return (
        Message(role="system", content=GRADER_SYSTEM_PROMPT),
        Message(role="user", content=user),
    )


_GRADE_RE = re.compile(
    r"(?:(?:grade|answer)\s*[:=\-]?\s*)?[\s*_\"'`(\[]*"
    r"(?:(?P<letter>[ABC])(?![\w/])|(?P<word>not[_ ]attempted|incorrect|correct)\b)",
    re.IGNORECASE,
)


def parse_grade(text: str) -> Grade:
    """Read the grader's reply: "A"/"CORRECT", "B"/"INCORRECT", "C"/"NOT_ATTEMPTED".

    Only the start of the reply counts (after a closed ``<think>`` block, emphasis,
    quotes or a ``Grade:`` label); a lowercase "a" is read as the article, not a grade.
    Anything else is :attr:`Grade.UNPARSABLE`.
    """
    s = re.sub(r"^\s*<think>.*?</think>", "", text, count=1, flags=re.DOTALL | re.IGNORECASE)
    m = _GRADE_RE.match(s.strip())
    if m is None:
        return Grade.UNPARSABLE
    if m.group("letter"):
        letter = m.group("letter")
        if letter.islower():
            return Grade.UNPARSABLE
        return {"A": Grade.CORRECT, "B": Grade.INCORRECT, "C": Grade.NOT_ATTEMPTED}[letter]
    word = m.group("word").lower().replace(" ", "_")
    return {
        "correct": Grade.CORRECT,
        "incorrect": Grade.INCORRECT,
        "not_attempted": Grade.NOT_ATTEMPTED,
    }[word]


@dataclass
class SimpleQAPlan:
    """The SimpleQA grading stage before its judge is asked: the grades decided without
    a model by (item id, answer text), the (item id, answer text) pairs the judge must
    grade, and one request per pair (in the same order)."""

    grades: dict[tuple[str, str], Grade]
    todo: list[tuple[str, str]]
    requests: list[PlannedRequest]


def plan_simpleqa(
    items: Mapping[str, Item], originals: Mapping[str, Sequence[Graded]], params: SamplingParams
) -> SimpleQAPlan:
    """The grader's requests for ``originals`` (the run sends them; the dry run counts
    them on placeholder answers): each distinct answer text of an item once, except
    those :func:`pregrade` decides; T = 0 at ``params``, under ledger stage
    :data:`~credo.tasks.grading.GRADING_STAGE`."""
    grades: dict[tuple[str, str], Grade] = {}
    todo: list[tuple[str, str]] = []
    for i, orig in originals.items():
        for s in orig:
            key = (i, s.text.strip())
            if key in grades or key in todo:
                continue
            decided = pregrade(items[i], s.answer.value)
            if decided is None:
                todo.append(key)
            else:
                grades[key] = decided
    requests = [
        PlannedRequest(
            GenerationRequest(messages=grading_messages(items[i], text), params=params),
            1,
            label=f"{i}/grade",
            stage=GRADING_STAGE,
        )
        for i, text in todo
    ]
    return SimpleQAPlan(grades, todo, requests)


class SimpleQAStage(Stage):
    """SimpleQA's grading as a planned stage: ``plan(originals, items)`` is
    :func:`plan_simpleqa` per item (each distinct answer text once, the ones
    :func:`pregrade` decides asking nothing), asked of the grader role; ``read`` gives
    the grade of every (item id, answer text) of the complete items."""

    name = GRADING_STAGE
    role = GRADER
    description = "grading answers"
    missing = "grades missing"

    def __init__(self, params: SamplingParams) -> None:
        self.params = params
        self._plan = SimpleQAPlan({}, [], [])
        self.decided = 0

    def plan(self, items: Mapping[str, Sequence[Graded]], context: Mapping[str, Item]
             ) -> StagePlan:
        self._plan = plan_simpleqa(context, items, self.params)
        self.decided = len(self._plan.grades)
        out: StagePlan = {i: [] for i in items}
        for (i, _), r in zip(self._plan.todo, self._plan.requests, strict=True):
            out[i].append(r)
        return out

    def read(self, generations: Generated) -> dict[tuple[str, str], Grade]:
        grades = {k: g for k, g in self._plan.grades.items() if k[0] in generations}
        asked: dict[str, list[tuple[str, str]]] = {}
        for key in self._plan.todo:
            asked.setdefault(key[0], []).append(key)
        for i, gens in generations.items():
            for key, g in zip(asked.get(i, []), gens, strict=True):
                grades[key] = parse_grade(g[0].text)
        return grades

    def placeholder(self, request: GenerationRequest) -> str:
        return "A"


@grader(SIMPLEQA, "an LLM judge (grader.model) gives SimpleQA's grade; only CORRECT counts",
        judge=True)
def grade_simpleqa(ctx: GradingContext, originals: Mapping[str, Sequence[Graded]]) -> GradeMap:
    """SimpleQA grades (correct / incorrect / not attempted); only CORRECT counts as
    correct. Each distinct answer text of an item is graded once; exact matches, unparsed
    answers and numbers against numeric gold answers need no call (:func:`pregrade`)."""
    stage = SimpleQAStage(ctx.params)
    grades = ctx.run_stage(stage, originals, ctx.items)
    decided_free = stage.decided
    last = ctx.executed.get(GRADING_STAGE)
    generated = last.generated_samples if last else 0
    cached = last.cached_samples if last else 0
    complete = {i: orig for i, orig in originals.items() if i not in ctx.incomplete}
    out: GradeMap = {
        i: tuple(grades[(i, s.text.strip())] is Grade.CORRECT for s in orig)
        for i, orig in complete.items()
    }
    out.update({i: tuple(math.nan for _ in o) for i, o in originals.items() if i not in complete})
    counts = Counter(grades[(i, s.text.strip())] for i, orig in complete.items() for s in orig)
    ctx.stats.update(
        {f"graded_{g.value}": counts.get(g, 0) for g in Grade},
        grading_unique_answers=len(grades),
        grading_decided_without_judge=decided_free,
        grading_calls_generated=generated,
        grading_calls_cached=cached,
    )
    if counts.get(Grade.UNPARSABLE):
        log.warning(
            "%d grader replies were unparsable (counted as not correct)", counts[Grade.UNPARSABLE]
        )
    return out
