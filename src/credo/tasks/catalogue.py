"""What each registered task is, for ``credo tasks``: where its items come
from, how many there are, their answer format, how correctness is decided and whether
they are multiple choice.

A task that loads on its own (its data ship in a package) is described by its items, so
the table cannot drift from what a run would load; a task that needs the user's file is
described by what its registration declares (:func:`credo.tasks.registry.task_loader`'s
``fmt`` and ``grader``) and by the spec that names the file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from credo.tasks.base import AnswerFormat, Task
from credo.tasks.builtin import list_tasks, load_task
from credo.tasks.grading import DEFAULT_GRADER, describe_grader
from credo.tasks.registry import declared, declared_source, plugin_of, split_spec

__all__ = ["TaskInfo", "task_catalogue"]

@dataclass(frozen=True)
class TaskInfo:
    """One row of ``credo tasks``. ``items`` is None for a task that needs the user's
    file; ``answer_format`` None where that file decides it (SciQ: choice or text)."""

    spec: str
    source: str
    items: int | None
    answer_format: str | None
    grader: str
    correctness: str
    multiple_choice: bool | None
    usage: str = ""
    domain: str = ""

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON object (``credo tasks --json``)."""
        return asdict(self)


def task_catalogue() -> list[TaskInfo]:
    """Every task spec :func:`~credo.tasks.builtin.load_task` accepts (``file:`` aside),
    described. Loads every task that ships its data (a few seconds for all of MMLU)."""
    return [_of_plugin(_describe(spec)) for spec in list_tasks()]


def _of_plugin(info: TaskInfo) -> TaskInfo:
    """``info`` with the plug-in that registered its task as its source."""
    plugin = plugin_of(split_spec(info.spec)[0])
    if plugin is None:
        return info
    where = f"plug-in: {plugin}"
    return replace(info, source=where if info.items is not None else f"{where}; {info.source}")


def _describe(spec: str) -> TaskInfo:
    name, arg = split_spec(spec)
    if not arg and declared_source(name) is not None:
        return _declared(spec)
    try:
        task = load_task(spec)
    except (ValueError, FileNotFoundError) as exc:  # its data package is not installed
        return _unavailable(spec, exc)
    return _from_items(spec, task)


def _from_items(spec: str, task: Task) -> TaskInfo:
    first = task.items[0]
    graders = {it.meta.get("grader") for it in task.items}
    grader = (graders.pop() if len(graders) == 1 else None) or DEFAULT_GRADER
    return TaskInfo(
        spec=spec,
        source=_package_of(first.source) or first.source,
        items=len(task.items),
        answer_format=task.format.value,
        grader=grader,
        correctness=describe_grader(grader, task.format),
        multiple_choice=task.format is AnswerFormat.CHOICE,
        usage=spec,
        domain=task.domain,
    )


def _declared(spec: str) -> TaskInfo:
    """A task described by its registration, not loaded: the user's file holds its data,
    or the network or an optional package does (lm-eval tasks)."""
    fmt, grader = declared(spec)
    found = declared_source(spec)
    assert found is not None
    source, usage = found
    grader = grader or DEFAULT_GRADER
    return TaskInfo(
        spec=spec,
        source=source,
        items=None,
        answer_format=fmt.value if fmt else None,
        grader=grader,
        correctness=describe_grader(grader, fmt),
        multiple_choice=(fmt is AnswerFormat.CHOICE) if fmt else None,
        usage=usage,
    )


def _unavailable(spec: str, exc: Exception) -> TaskInfo:
    """A task that ships its data in a package this machine lacks."""
    return TaskInfo(spec=spec, source=f"unavailable here: {exc}", items=None,
                    answer_format=None, grader=DEFAULT_GRADER, correctness="",
                    multiple_choice=None, usage=spec)


def _package_of(source: str) -> str | None:
    """The installed package a file lies in (its import folder), else None."""
    parts = Path(source.split(":", 1)[0]).parts
    for folder in ("site-packages", "dist-packages"):
        if folder not in parts:
            continue
        i = parts.index(folder)
        if i + 1 < len(parts):
            return parts[i + 1]
    return None
