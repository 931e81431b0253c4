"""Grading: the correctness of every sampled answer, the truth every metric is measured
against (design.md, ``tasks/``; Wu et al., App. E.2's p̄ is the mean over an item's original
samples).

Two registries, both filled by decorator where the rule is defined:

* :func:`correctness` rules per answer format, a pure function of one answer and its
  item: numbers by value, option letters, normalised short text (here), programs by
  their tests in a sandbox (:mod:`credo.tasks.humaneval`). :func:`is_correct` looks the
  format up.
* :func:`grader` functions grade all the original samples of a group of items at once;
  they may ask a judge model (SimpleQA grades in :mod:`credo.tasks.factual`, FActScore
  support in :mod:`credo.tasks.longform`) through the executor the
  :class:`GradingContext` hands them, so their calls are planned, cached and resumable
  like any generation. An item's grader is ``item.meta["grader"]``, else
  :data:`DEFAULT_GRADER` (the format's correctness rule).

Correctness never feeds a score (design.md): the grades are joined with the scores only
by the evaluation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from credo.errors import UserError
from credo.generation.stage import Stage, StageRunner
from credo.registry import Registry
from credo.tasks.answers import (
    Answer,
    normalise_gold,
    normalise_text,
    numbers_equal,
    parse_number,
)
from credo.tasks.base import AnswerFormat, Item, Task
from credo.types import SamplingParams

if TYPE_CHECKING:
    from credo.generation.executor import ExecutionStats, Executor

__all__ = [
    "CLAIMS_STAGE",
    "DEFAULT_GRADER",
    "GRADERS",
    "GRADING_STAGE",
    "Graded",
    "GradingContext",
    "correctness",
    "describe_correctness",
    "get_grader",
    "grade_originals",
    "grader",
    "is_correct",
    "within_rel_tol",
]

GRADING_STAGE = "grading"
"""The ledger stage of the SimpleQA grader's requests."""
CLAIMS_STAGE = "claims checking"
"""The ledger stage of FActScore's claim checks."""

DEFAULT_GRADER = "exact"
"""The grader of items that name none: each answer by its format's correctness rule."""


class Graded(Protocol):
    """What a grader reads of a sample: its text and the answer extracted from it."""

    text: str
    answer: Answer


# --------------------------------------------------------------------------- correctness

Correctness = Callable[[Answer, Item], bool]
_CORRECTNESS: Registry[Correctness] = Registry("correctness rule")
"""The correctness rule of each answer format, by the format's value."""
_SUMMARIES: dict[str, str] = {}  # "exact:<format>" and grader names -> one line


def correctness(fmt: AnswerFormat, summary: str = "") -> Callable[[Correctness], Correctness]:
    """Register the correctness rule of answer format ``fmt``; ``summary`` says in a few
    words how it decides (shown by ``credo tasks``)."""
    value = AnswerFormat(fmt).value

    def register(fn: Correctness) -> Correctness:
        _CORRECTNESS.add(value, fn)
        _SUMMARIES[f"{DEFAULT_GRADER}:{value}"] = summary
        return fn

    return register


def describe_grader(name: str | None, fmt: AnswerFormat | None) -> str:
    """How correctness is decided for items graded by ``name`` (None: the default) in
    answer format ``fmt``, in a few words: the grader's name and its summary, or for
    the default grader the format's rule (``credo tasks``); ``fmt`` None: the
    format is the data's to say (a user's SciQ file: choice or text)."""
    name = name or DEFAULT_GRADER
    if name == DEFAULT_GRADER and fmt is None:
        return f"{name} (the rule of the format the file holds)"
    key = f"{name}:{fmt.value}" if name == DEFAULT_GRADER and fmt is not None else name
    summary = _SUMMARIES.get(key, "")
    return f"{name} ({summary})" if summary else name


def describe_correctness(task: Task, judge_model: str | None = None) -> str:
    """How correctness is decided on ``task``'s items, in one line per grader (metrics.json's
    ``correctness``): an item's own ``meta["correctness"]`` line
    (an lm-eval task's metric and filter), else its grader's summary
    (:func:`describe_grader`), with ``judge_model`` named for a grader that asks one."""
    lines: dict[str, None] = {}
    for it in task.items:
        line = it.meta.get("correctness")
        name = it.meta.get("grader") or DEFAULT_GRADER
        if not line:
            line = describe_grader(name, task.format)
            if name in JUDGED and judge_model:
                line += f"; grader model {judge_model}"
        elif name != DEFAULT_GRADER and not line.startswith(name):
            line = f"{name}: {line}"
        lines[line] = None
    return "; ".join(lines)


def is_correct(answer: Answer, item: Item, fmt: AnswerFormat) -> bool:
    """Whether ``answer`` matches ``item.gold``; an unparsed answer is wrong.

    NUMBER uses :func:`~credo.tasks.answers.numbers_equal` (or, for an item with
    ``meta["rel_tol"]``, :func:`within_rel_tol`), CHOICE letter equality,
    SHORT_TEXT equality after :func:`~credo.tasks.answers.normalise_text`, CODE runs the
    item's tests in a sandbox (:func:`credo.tasks.humaneval.code_is_correct`). LONG_FORM
    answers need a knowledge source and a judge (the ``factscore`` grader) and raise
    :class:`NotImplementedError` here.
    """
    fmt = AnswerFormat(fmt)
    rule = _CORRECTNESS.get(fmt.value)
    if rule is None:
        raise NotImplementedError(
            f"{fmt.value.upper()} answers are graded against a knowledge source by a judge"
            " model; run them through credo.run (the factscore grader)"
        )
    return rule(answer, item)


REL_TOL = "rel_tol"
"""``item.meta[REL_TOL]``: a relative tolerance for a NUMBER item (SciBench: "0.05")."""


@correctness(AnswerFormat.NUMBER, "numeric value; integers exactly, else rel. tol. 1e-6")
def _number_correct(answer: Answer, item: Item) -> bool:
    """Numbers by value (:func:`~credo.tasks.answers.numbers_equal`: integers exactly,
    as GSM8K's rule), or, for an item whose ``meta["rel_tol"]`` is set, within that
    relative error of the gold (:func:`within_rel_tol`; SciBench's rule)."""
    if answer.value is None:
        return False
    tol = item.meta.get(REL_TOL)
    if tol:
        return within_rel_tol(answer.value, item.gold, tol)
    return numbers_equal(answer.value, item.gold)


def within_rel_tol(value: str | float, gold: str | float, rel_tol: str | float) -> bool:
    """Whether ``|value - gold| <= rel_tol * |gold|``, computed exactly on the parsed
    numbers (a gold of 0 needs exactly 0). Unparsable input is never within tolerance;
    a ``rel_tol`` that is not a number in [0, 1) raises :class:`ValueError`."""
    tol = parse_number(rel_tol)
    if tol is None or not 0 <= tol < 1:
        raise ValueError(f"rel_tol must be a number in [0, 1), got {rel_tol!r}")
    x, y = parse_number(value), parse_number(gold)
    if x is None or y is None:
        return False
    return abs(x - y) <= tol * abs(y)


@correctness(AnswerFormat.CHOICE, "option letter equals the gold letter")
def _choice_correct(answer: Answer, item: Item) -> bool:
    return answer.value is not None and (
        answer.value.strip().upper() == normalise_gold(item.gold, AnswerFormat.CHOICE)
    )


@correctness(AnswerFormat.SHORT_TEXT, "text equal after SQuAD normalisation")
def _text_correct(answer: Answer, item: Item) -> bool:
    return answer.value is not None and normalise_text(answer.value) == normalise_text(item.gold)


# --------------------------------------------------------------------------- graders


@dataclass
class GradingContext:
    """What a grader gets besides the samples.

    ``judge`` returns the grader model's cached executor, loaded on first call (a run
    whose answers need no judge loads none); a grader's calls are stages
    (:meth:`run_stage`); ``params`` are its decoding parameters (T =
    0); ``knowledge`` replaces the knowledge source a FActScore item names; graders add
    their counts to ``stats``, and an item they could not grade (judge requests whose
    retries ran out) to ``incomplete`` with the reason, grading it NaN.
    """

    task: Task
    judge: Callable[[], Executor]
    params: SamplingParams = field(
        default_factory=lambda: SamplingParams(temperature=0.0, max_tokens=8)
    )
    knowledge: Any = None
    stats: dict[str, int | float | str] = field(default_factory=dict)
    incomplete: dict[str, str] = field(default_factory=dict)
    #: What runs a grader's stages (the cache, the ledger, failed units into
    #: ``incomplete``): the run's :class:`~credo.pipeline.stages.StageDriver`; None:
    #: a :class:`~credo.generation.stage.StageRunner` on ``judge()``, sharing
    #: ``incomplete``.
    runner: StageRunner | None = None

    #: The counts of the executor call of each stage run (by ledger stage; None: the
    #: stage asked nothing).
    executed: dict[str, ExecutionStats | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.runner is None:
            self.runner = StageRunner(lambda _role: self.judge(), self.incomplete)

    def run_stage(self, stage: Stage, items: Any, context: Any = None) -> Any:
        """What ``stage`` reads of its requests' generations, run by :attr:`runner`; the
        call's counts go into :attr:`executed`."""
        runner = self.runner
        assert runner is not None  # set by __post_init__
        result = runner.run([stage], items, context)[0]
        self.executed[stage.name] = runner.executed.get(stage.name)
        return result

    @property
    def items(self) -> Mapping[str, Item]:
        """The task's items by id."""
        return {it.id: it for it in self.task.items}


GradeMap = dict[str, tuple[bool | float, ...]]
Grader = Callable[[GradingContext, Mapping[str, Sequence[Graded]]], GradeMap]
GRADERS: Registry[Grader] = Registry("grader")
"""Every grader by name (what ``item.meta["grader"]`` names; :func:`grader` registers one)."""
JUDGED: set[str] = set()
"""The graders that ask a grader model (the run's ``grader`` role, else its judge)."""


def grader(name: str, summary: str = "", *, judge: bool = False) -> Callable[[Grader], Grader]:
    """Register ``fn(ctx, originals) -> {item id: per-sample correctness}`` as grader
    ``name`` (what ``item.meta["grader"]`` names). A value is a bool, or a float in [0, 1]
    (FActScore's supported fraction), or NaN where correctness is unknown. ``summary``
    says in a few words how it decides; ``judge`` that it asks the grader model."""

    def register(fn: Grader) -> Grader:
        GRADERS.add(name, fn)
        if judge:
            JUDGED.add(name)
        if summary:
            _SUMMARIES[name] = summary
        return fn

    return register


def get_grader(name: str) -> Grader:
    """The registered grader ``name``; a :class:`~credo.errors.UserError` lists the known
    ones."""
    return GRADERS[name]


def grade_originals(ctx: GradingContext, originals: Mapping[str, Sequence[Graded]]) -> GradeMap:
    """The grading stage: every item's original samples by its grader, in item order."""
    items = ctx.items
    groups: dict[str, dict[str, Sequence[Graded]]] = {}
    for item_id, samples in originals.items():
        name = items[item_id].meta.get("grader") or DEFAULT_GRADER
        groups.setdefault(name, {})[item_id] = samples
    graded: GradeMap = {}
    for name, group in groups.items():
        try:
            fn = get_grader(name)
        except ValueError as e:
            first = next(iter(group))
            raise UserError(f"item {first!r}: {e}") from None
        graded.update(fn(ctx, group))
    return {i: graded[i] for i in originals}


@grader(DEFAULT_GRADER)
def grade_exactly(ctx: GradingContext, originals: Mapping[str, Sequence[Graded]]) -> GradeMap:
    """Each answer by its format's correctness rule (:func:`is_correct`); for programs,
    the number of passing samples goes into the stats."""
    items, fmt = ctx.items, ctx.task.format
    out: GradeMap = {
        i: tuple(is_correct(s.answer, items[i], fmt) for s in samples)
        for i, samples in originals.items()
    }
    if fmt is AnswerFormat.CODE:
        ctx.stats["code_samples_passing"] = int(sum(sum(v) for v in out.values()))
    return out
