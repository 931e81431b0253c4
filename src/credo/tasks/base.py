"""Items and tasks: what a benchmark is, independent of any model (design.md, ``tasks/``)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum


class AnswerFormat(StrEnum):
    """How an answer is extracted from a generation and compared with the gold answer."""

    NUMBER = "number"
    CHOICE = "choice"
    SHORT_TEXT = "short_text"
    CODE = "code"
    LONG_FORM = "long_form"


@dataclass(frozen=True)
class Item:
    """One benchmark question.

    ``question`` is the bare question text (the part a context perturbation is prefixed
    to); ``choices`` holds the option texts for multiple choice (lettered A, B, C, ...),
    and ``gold`` the reference answer in normalised form: a number as a string for
    :attr:`AnswerFormat.NUMBER`, a letter for :attr:`AnswerFormat.CHOICE`.
    ``source`` names the file and line the item came from, for error messages.
    """

    id: str
    question: str
    gold: str
    choices: tuple[str, ...] = ()
    meta: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    source: str = ""


@dataclass(frozen=True)
class ToolSampling:
    """The sampling settings a task's own tool sets for its answers (lm-eval's
    ``generation_kwargs``), as credo's sampling fields: a run takes each one its config
    does not set (:func:`credo.pipeline.runner.with_task_sampling`).

    ``source`` says where they come from (``lm-eval task gsm8k's generation_kwargs``);
    ``settings`` maps :class:`~credo.types.SamplingParams` fields (``max_tokens``,
    ``stop``, ``temperature``) to the tool's values; ``not_taken`` maps a field the tool
    sets and credo does not take to why (a greedy decoding: credo samples to measure
    agreement)."""

    source: str
    settings: dict[str, object] = field(default_factory=dict)
    not_taken: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Task:
    """A named list of items sharing one answer format and one prompt template.

    ``family`` names the distribution the questions are drawn from when that is not
    ``name``: a task read from a file is named after the file, and its family is the
    layout (``file:gsm8k``, ``file:number``) or what the user declares it holds; a
    certificate is bound to the family, not to the file. Empty: the
    family is the name (a built-in task's spec, ``mmlu:high_school_statistics``).
    ``sampling``: the sampling settings the task's own tool sets (:class:`ToolSampling`),
    None for a task that sets none.
    """

    name: str
    items: tuple[Item, ...]
    format: AnswerFormat
    domain: str = ""
    family: str = ""
    sampling: ToolSampling | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        ids = [it.id for it in self.items]
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            dup = next(i for i in ids if i in seen or seen.add(i))  # type: ignore[func-returns-value]
            raise ValueError(f"task {self.name!r}: duplicate item id {dup!r}")

    def head(self, limit: int | None) -> Task:
        """The first ``limit`` items (all when ``limit`` is None)."""
        if limit is None:
            return self
        return replace(self, items=self.items[:limit])
