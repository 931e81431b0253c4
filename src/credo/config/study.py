"""A study: every task with every model, over one cache."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from credo.config.executor import ExecutorConfig
from credo.config.files import ConfigFile
from credo.config.run import RunConfig


class StudyModel(BaseModel):
    """One model of a study: its spec, the ``model_options`` of its runs, and the label
    its run folders carry (default: from the spec)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, description="the model spec")
    model_options: dict[str, Any] = Field(
        default_factory=dict, description="its runs' model_options",
    )
    label: str | None = Field(
        None, min_length=1, description="the name its run folders carry; None = from the spec",
    )

    @property
    def name(self) -> str:
        """The label, else the spec made safe for a folder name."""
        return self.label or slug(self.model)


STUDY_RUN_FIXED = ("task", "task_file", "model", "model_options", "out", "cache", "executor")
"""RunConfig fields a study sets itself; its ``run`` section must not."""


class StudyConfig(ConfigFile):
    """A study (``credo study --config study.yaml``): every task with every model, over
    one cache, one run folder per (task, model) under ``out`` plus one comparison report
    in ``out/report``.

    ``run`` holds the RunConfig settings every run shares (n, m, limit, sampling,
    prompt style, perturbation, judge...), validated as a RunConfig; the fields a study
    sets per run (task, model and its options, out, cache, executor) are refused there.
    ``methods`` is one list for every run, or a mapping from task to its own list (open
    tasks often need the judge kernel); a task it does not name, and every task when it
    is None, gets ``run.methods``. ``models`` entries are a spec or
    ``{model, model_options, label}``.
    """

    tasks: list[str] = Field(
        min_length=1, description="the study's tasks (each a RunConfig.task spec)",
    )
    models: list[StudyModel] = Field(
        min_length=1, description="the study's models: a spec or {model, model_options, label}",
    )
    methods: list[str] | dict[str, list[str]] | None = Field(
        None, description="one list of methods for every run, or task -> its own list; None = "
        "run.methods",
    )
    run: RunConfig = Field(
        default_factory=RunConfig, description="the RunConfig settings every run shares (n, m, "
        "limit, sampling, ...)",
    )
    executor: ExecutorConfig = Field(
        default_factory=ExecutorConfig, description="where every run's samples are generated",
    )
    out: Path = Field(
        Path("runs/study"), description="the study folder: OUT/<task>__<model>/ per run, "
        "OUT/report/ the comparison",
    )
    cache: Path | None = Field(
        None, description="the SQLite generation cache all runs share; None = the default",
    )

    @field_validator("models", mode="before")
    @classmethod
    def _spec_strings(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"model": v} if isinstance(v, str) else v for v in value]
        return value

    @model_validator(mode="after")
    def _check_study(self) -> StudyConfig:
        fixed = sorted(set(STUDY_RUN_FIXED) & self.run.model_fields_set)
        if fixed:
            raise ValueError(
                f"run.{fixed[0]}: set per run by the study (tasks, models, out, cache,"
                " executor at the top level)"
            )
        if isinstance(self.methods, dict):
            unknown = sorted(set(self.methods) - set(self.tasks))
            if unknown:
                raise ValueError(f"methods: {unknown[0]!r} is not one of the study's tasks")
        for what, names in (("tasks", [slug(t) for t in self.tasks]),
                            ("models", [m.name for m in self.models])):
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"{what}: two entries share the folder name {twice[0]!r}"
                                 " (give each model a label)")
        self.run_configs()  # every run validates (options; method names: credo.study)
        return self

    def run_folder(self, task: str, model: StudyModel) -> Path:
        """``out/<task>__<model>``: the run folder of one (task, model)."""
        return self.out / f"{slug(task)}__{model.name}"

    def run_configs(self) -> list[RunConfig]:
        """The study's runs, model by model and task by task within each model."""
        exclude = set(STUDY_RUN_FIXED) | {"methods"}
        if "limit" not in self.run.model_fields_set:  # each run's own default (a file whole)
            exclude.add("limit")
        base = self.run.model_dump(exclude=exclude)
        out = []
        for model in self.models:
            for task in self.tasks:
                methods = self.methods
                if isinstance(methods, dict):
                    methods = methods.get(task)
                out.append(RunConfig.model_validate({
                    **base,
                    "methods": list(methods) if methods is not None else self.run.methods,
                    "task": task, "model": model.model, "model_options": model.model_options,
                    "out": self.run_folder(task, model), "cache": self.cache,
                    "executor": self.executor,
                }))
        return out


def slug(spec: str) -> str:
    """A task or model spec as a folder name: a file task by its file's stem
    (``file:gsm8k:/data/sums.jsonl`` -> ``sums``), every other character outside
    ``[A-Za-z0-9._-]`` as ``-`` (``openai:gpt-4o`` -> ``openai-gpt-4o``)."""
    if spec.startswith("file:") or spec.endswith(".gguf"):
        spec = Path(spec.rpartition(":")[2]).stem
    return re.sub(r"[^A-Za-z0-9._-]+", "-", spec).strip("-") or "x"


