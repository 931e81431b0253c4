"""Tasks read from the user's own files and through lm-evaluation-harness."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

AnswerFormatName = Literal["number", "choice", "short_text", "code", "long_form"]
"""The values of :class:`credo.tasks.base.AnswerFormat` (config sits below the tasks)."""


class TaskFileConfig(BaseModel):
    """A task read from any JSON Lines, JSON or CSV file (``.gz`` too) by naming its
    fields (``credo run --task-file``); it replaces ``RunConfig.task``, and the task is
    named after the file's stem.

    ``question`` is one field or several joined with a space (SVAMP: ``[Body,
    Question]``); ``choices`` one field holding a list of options (or ARC's ``{label,
    text}``), or one field per option, and is required exactly for the ``choice``
    format; ``gold`` holds a letter, an option label, or a 0-based index with
    ``gold_is_index``. ``id`` None numbers the items ``<stem>-<line>``. ``domain`` is the
    perturbation writer's topic (Wu et al., §3). ``grader`` names a registered grader (e.g.
    ``simpleqa``: SimpleQA-style grades by the judge, the gold as the accepted answer);
    ``rel_tol`` grades a ``number`` within that relative error (SciBench: 0.05);
    ``gold_transform`` names one of ``credo.tasks.loaders.GOLD_TRANSFORMS`` (``gsm8k``).
    ``family`` declares the task the file's questions are drawn from (``gsm8k``,
    ``mmlu:high_school_geography``): a certificate made on that task applies to the file
    (default ``file:<format>``); it changes no prompt and no request.
    """

    model_config = ConfigDict(extra="forbid")

    path: Path = Field(description="the data file: JSON Lines, JSON or CSV (.gz too)")
    format: AnswerFormatName = Field(
        description="the answer format, which picks the answer extraction and the grader"
    )
    question: str | list[str] = Field(
        "question", description="the field of the question, or several fields joined with a space",
    )
    choices: str | list[str] | None = Field(
        None, description="the field holding the options, or one field per option (required for "
        "format choice, only for it)",
    )
    gold: str = Field(
        "answer", description="the field of the reference answer; a task file in which no row has "
        "it is a set of questions without gold answers",
    )
    gold_is_index: bool = Field(
        False, description="the gold is a 0-based option index (format choice)",
    )
    id: str | None = Field(None, description="the field of a unique item id; None = <stem>-<line>")
    domain: str = Field(
        "", description="the perturbation writer's topic (Wu et al., §3), e.g. 'school science'",
    )
    grader: str | None = Field(
        None, description="a registered grader (e.g. simpleqa); None = the format's exact rule",
    )
    rel_tol: float | None = Field(
        None, ge=0.0, lt=1.0, description="grade a number within this relative error (format "
        "number; SciBench: 0.05)",
    )
    gold_transform: str | None = Field(
        None, description="a named transform applied to the gold text first "
        "(credo.tasks.loaders.GOLD_TRANSFORMS, e.g. gsm8k)",
    )
    family: str | None = Field(
        None, min_length=1, description="the task the file's questions are drawn from (e.g. "
        "gsm8k, mmlu:high_school_geography): a certificate made on that task applies to the "
        "file; None = file:<format>; changes no prompt and no request",
    )

    @model_validator(mode="after")
    def _check_fields(self) -> TaskFileConfig:
        if isinstance(self.question, list) and not self.question:
            raise ValueError("question: name at least one field")
        if isinstance(self.choices, list) and len(self.choices) < 2:
            raise ValueError("choices: name one field holding the options, or two or more")
        if (self.format == "choice") != (self.choices is not None):
            raise ValueError("choices is required for format 'choice' and only for it")
        if self.gold_is_index and self.format != "choice":
            raise ValueError("gold_is_index applies to format 'choice' only")
        if self.rel_tol is not None and self.format != "number":
            raise ValueError("rel_tol applies to format 'number' only")
        return self


class LmEvalConfig(BaseModel):
    """How an ``lm-eval:<task>`` task is read through lm-evaluation-harness (the optional
    ``lm-eval`` extra): ``num_fewshot`` examples before each question (None: zero-shot,
    whatever the task's YAML says), ``include_path`` folders of custom task YAMLs (as
    lm-eval's ``--include_path``), ``revision`` the dataset revision: a Hub commit to pin,
    and what the run records (for a local ``data_files`` dataset, a digest of its files).
    """

    model_config = ConfigDict(extra="forbid")

    num_fewshot: int | None = Field(
        None, ge=0, description="few-shot examples before each question; None = zero-shot, "
        "whatever the task's YAML says",
    )
    include_path: list[Path] = Field(
        default_factory=list, description="folders of custom lm-eval task YAMLs (lm-eval's "
        "--include_path)",
    )
    revision: str | None = Field(
        None, description="the dataset revision: a Hub commit to pin; the run records the one it "
        "read",
    )


