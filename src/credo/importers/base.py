"""What every importer gives: the generations of a file, as :func:`credo.importers.read_generations`
returns them (the samples, the items they belong to, what the file says of its
correctness and sampling)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from credo.registry import Registry
from credo.tasks.loaders import DatasetError
from credo.types import TokenLogprob

__all__ = [
    "IMPORTERS",
    "Generations",
    "GivenItem",
    "GivenSample",
    "Importer",
    "ReadOptions",
]
"""What :mod:`credo.importers` re-exports; :data:`Rows`, :func:`finite_number`,
:func:`score_name`, :func:`score_value` and :func:`with_item_scores` are the importer
modules' (and a new importer's) helpers."""

Rows = Iterator[tuple[int, Mapping[str, Any]]]
"""``(line, row)`` for each row of a JSON Lines file."""


@dataclass(frozen=True)
class GivenSample:
    """One generation as given: its item, sample set, text, answer and correctness."""

    item: str
    set: str
    text: str
    answer: str | float | bool | None
    correct: bool | float | None = None
    ref: tuple[int, ...] = ()
    prefix: str | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None
    where: str = field(default="", compare=False, repr=False)
    """The file and line (or log member) it was read from, for a message naming it."""
    scores: Mapping[str, float | None] = field(default_factory=dict)
    """The scores the file gives this sample, by name (a reward model's, a judge's, a
    confidence computed elsewhere), each in [0, 1]; None where the file says null."""


@dataclass(frozen=True)
class GivenItem:
    """What the file says about one item (empty where it says nothing)."""

    id: str
    question: str = ""
    gold: str = ""
    choices: tuple[str, ...] = ()
    scores: Mapping[str, float | None] = field(default_factory=dict)
    """The scores the file gives the item as a whole, by name, each in [0, 1]."""
    where: str = field(default="", compare=False, repr=False)
    """The file and line of the item's first row, for a message naming it."""


@dataclass
class Generations:
    """Every given sample, in file order, and the items they belong to."""

    source: str
    layout: str
    items: list[GivenItem] = field(default_factory=list)
    samples: list[GivenSample] = field(default_factory=list)
    correctness: str = ""
    """What the given ``correct`` values are: the tool's own metric or scorer, or 'given'."""
    failed: dict[str, int] = field(default_factory=dict)
    """Per item, the samples the log marks errored, left out."""
    cancelled: dict[str, int] = field(default_factory=dict)
    """Per item, the samples that started and were cancelled (the log holds them with
    inspect_ai's cancellation error), left out."""
    not_started: dict[str, int] = field(default_factory=dict)
    """Per item, the samples an unfinished eval planned (its sample ids times its epochs)
    and never started: absent from the log, neither errored nor cancelled."""
    status: str = ""
    """The log's own status when it is not a finished one ('error', 'cancelled')."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The sampling settings the file records (``temperature``, ``max_tokens``, ...;
    ``repeats`` / ``epochs``)."""
    answers: str = ""
    """How the answers were read from the responses, where the file's layout says more
    than 'as given' (lm-eval: its filter)."""
    task: str = ""
    """The task the file says its samples answer (inspect_ai: the log's ``eval.task``;
    lm-eval: the ``samples_<task>_<date>.jsonl`` name); empty when it does not say."""
    model: str = ""
    """The model the file says wrote them (inspect_ai: ``eval.model``; lm-eval: the
    ``model_name`` of the results file written with it); empty when it does not say."""
    tool_accuracy: float | None = None
    """The accuracy the tool that wrote the file reports (lm-eval: the mean of its logged
    per-document metric; inspect_ai: the log's own metric of the scorer used); None where
    the file holds none."""
    tool_accuracy_is: str = ""
    """What :attr:`tool_accuracy` averages, in words (which metric, over what)."""
    compared: str = ""
    """How the file's own tool compares its answers, when the answers are already in that
    form (lm-eval: what its filter keeps, normalised as the task's ``exact_match``
    compares): credo then compares them as given instead of by ``--format``'s rule, as
    ``credo run`` of the same task does; empty: by ``--format``'s rule."""
    not_read: dict[str, int] = field(default_factory=dict)
    """Fields of the file's rows that credo does not read, with the rows holding each
    (a ``confidence`` number that is not under ``scores`` is no score: it is said, not
    dropped without a word)."""
    score_fields: dict[str, str] = field(default_factory=dict)
    """Where in the file each given score is read, by name (``scores.conf``, ``column
    'p_true'``), per sample or per item (the name is in :attr:`GivenSample.scores` or
    :attr:`GivenItem.scores`)."""
    scorers: tuple[str, ...] = ()
    """The scorers whose scores the file holds (inspect_ai: every scorer of the task;
    the one read is named in :attr:`correctness`); empty where it names none."""

    @property
    def family(self) -> str:
        """The task family a certificate on these generations binds:
        ``given:<layout>``, with ``:<task>`` where the file names its task."""
        return f"given:{self.layout}" + (f":{self.task}" if self.task else "")

    @property
    def model_label(self) -> str:
        """The model under test as a ``credo score`` run names it: ``given:<layout>``,
        with ``:<model>`` where the file names its model."""
        return f"given:{self.layout}" + (f":{self.model}" if self.model else "")


def finite_number(value: Any) -> bool:
    """Whether ``value`` is a finite int or float (a bool is not)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


SCORE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
"""A given score's name: letters, digits, ``_``, ``.`` and ``-`` (it becomes method
``given:<name>``, and ``--given`` lists names with commas)."""


def score_name(name: Any, where: str) -> str:
    """``name`` when it is a valid given score's name (:data:`SCORE_NAME`), else a
    :class:`DatasetError` naming ``where``."""
    if not isinstance(name, str) or not SCORE_NAME.fullmatch(name):
        raise DatasetError(f"{where}: score name {name!r} must be letters, digits, '_', '.' or"
                           " '-' (it becomes method given:<name>)")
    return name


def score_value(value: Any, where: str) -> float | None:
    """A given score: a finite number in [0, 1], or None for null; anything else is a
    :class:`DatasetError` naming ``where`` (credo does not guess a map into [0, 1]: a
    logit, a log-probability or an unbounded reward is the user's to map, and to name)."""
    if value is None:
        return None
    if not finite_number(value):
        raise DatasetError(f"{where} must be a number in [0, 1] or null, got {value!r}")
    if not 0.0 <= value <= 1.0:
        raise DatasetError(
            f"{where} = {value!r} lies outside [0, 1]: credo refuses it rather than guess a "
            "map; map the score into [0, 1] yourself (a logistic for a logit, exp for a "
            "log-probability, 1 - x/max for an entropy) and give the result")
    return float(value)


def with_item_scores(item: GivenItem, given: Mapping[str, float | None], where: str) -> GivenItem:
    """``item`` with the item scores ``given`` by one more of its rows (read at ``where``);
    a value that differs from the one an earlier row gave is a :class:`DatasetError`."""
    merged = dict(item.scores)
    for name, value in given.items():
        if name in merged and merged[name] != value:
            raise DatasetError(f"{where}: item_scores.{name} = {value!r}, but an earlier row "
                               f"of item {item.id!r} gives {merged[name]!r}")
        merged[name] = value
    return replace(item, scores=merged) if given else item


@dataclass(frozen=True)
class ReadOptions:
    """What ``credo score`` is told of a file: the lm-eval filter to read (None: each
    document's first), ``recompute`` (credo grades the answers, so the file's own
    correctness is not rebuilt), for a CSV file, ``columns``: which column holds each
    field (``{"item": "question_id", "scores.conf": "p_true"}``), and the inspect_ai
    scorer whose scores to read (None: the log's first)."""

    lm_eval_filter: str | None = None
    recompute: bool = False
    columns: Mapping[str, str] = field(default_factory=dict)
    scorer: str | None = None


@dataclass(frozen=True)
class Importer:
    """One layout of generations a file may hold (an importer is one module
    and one registration in :data:`IMPORTERS`). A file whose suffix is one of
    ``suffixes`` is this layout's and ``read`` gets no rows (it reads the file whole);
    a JSON Lines file is the layout whose ``claims`` holds for its first row, and
    ``read`` gets its rows, the first included."""

    read: Callable[[Path, Rows | None, ReadOptions], Generations]
    suffixes: tuple[str, ...] = ()
    claims: Callable[[Mapping[str, Any]], bool] | None = None


IMPORTERS: Registry[Importer] = Registry(
    "importer", load=("credo.importers.credo_jsonl", "credo.importers.csv_table",
                      "credo.importers.lm_eval", "credo.importers.inspect_log"),
)
"""Every layout :func:`credo.importers.read_generations` reads, by name."""
