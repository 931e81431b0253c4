"""The task registry: ``@task_loader("name")`` registers a benchmark's loader.

Task modules (:mod:`credo.tasks.builtin`, ``mcqa``, ``factual``, ``science``,
``humaneval``, ``longform``) register themselves with :func:`task_loader`; ``credo.tasks``
imports them all, so ``from credo.tasks import load_task`` (or ``credo.tasks.builtin.load_task``)
knows every task. This module imports nothing else of credo's tasks, so no task module
imports another one back.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from credo.errors import UserError
from credo.plugins import Plugin
from credo.registry import Registry
from credo.tasks.base import AnswerFormat, Task

TaskLoader = Callable[[str | None], Task]
"""``loader(argument) -> Task``; the argument is what follows ``name:`` in the spec."""


@dataclass(frozen=True)
class _Registered:
    loader: TaskLoader
    variants: Callable[[], list[str]] | None
    fmt: AnswerFormat | None = None
    grader: str | None = None
    source: str | None = None
    usage: str | None = None


_TASKS: Registry[_Registered] = Registry("task")


def task_loader(
    name: str,
    *,
    variants: Callable[[], list[str]] | None = None,
    fmt: AnswerFormat | None = None,
    grader: str | None = None,
    source: str | None = None,
    usage: str | None = None,
) -> Callable[[TaskLoader], TaskLoader]:
    """Register the decorated ``loader(argument)`` as built-in task ``name``.

    ``variants`` lists the full specs (``"name:arg"``) the loader accepts, for
    :func:`list_tasks`. ``fmt`` and ``grader`` describe a task that loads only from the
    user's file (``credo tasks`` shows them without a file; a task that loads on its own
    is described by its items). ``source`` says where a task's data come from when
    loading it needs more than this machine may have (lm-eval's registry, the Hub):
    ``credo tasks`` then describes it by its registration and ``usage`` without loading.
    """

    return _TASKS.register(name, lambda fn: _Registered(fn, variants, fmt, grader, source, usage))


class TaskSpecError(UserError):
    """A task spec that names no task, or gives a task an argument it does not take
    (``gsm8k:foo``, ``mmlu:underwater_basketry``, ``file:PATH`` without a preset); the
    message lists what is known (exit 2 and one line, found before any model
    is built)."""


def check_argument(name: str, arg: str | None, allowed: Sequence[str] = ()) -> None:
    """Raise :class:`TaskSpecError` unless ``arg`` (what follows ``name:``) is empty or
    one of ``allowed``; the message lists every spec the task accepts."""
    if not arg or arg in allowed:
        return
    takes = "takes no argument" + (f" or one of {list(allowed)}" if allowed else "")
    known = ", ".join([name, *(f"{name}:{a}" for a in allowed)])
    raise TaskSpecError(f"task {name!r} {takes}, got {arg!r}; known: {known}")


def required_argument(arg: str | None, needs: str) -> str:
    """``arg`` (what follows ``name:``) of a task that loads from the user's file; when it is
    empty, a :class:`TaskSpecError` saying ``needs`` (what the task needs, and how to
    give it)."""
    if not arg:
        raise TaskSpecError(needs)
    return arg


def package_data(package: str, *parts: str) -> Path:
    """The path of a data file inside an installed package, without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package!r} is not installed; it ships the task data")
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*parts)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: data file missing from package {package!r}")
    return path


def list_tasks() -> list[str]:
    """Every built-in task spec :func:`load_task` accepts (``file:`` specs aside)."""
    out: list[str] = []
    for name, reg in sorted(_TASKS.items()):
        out.append(name)
        if reg.variants is not None:
            out.extend(reg.variants())
    return out


def registered_loader(name: str) -> TaskLoader | None:
    """The loader registered as ``name``, or None; a name plug-ins share is a
    :class:`TaskSpecError` naming their qualified names."""
    if _TASKS.ambiguous(name):
        raise TaskSpecError(str(_TASKS.unknown(name)))
    reg = _TASKS.get(name)
    return reg.loader if reg is not None else None


def split_spec(spec: str) -> tuple[str, str]:
    """``(name, argument)`` of a task spec: ``gsm8k`` -> ``("gsm8k", "")``,
    ``mmlu:anatomy`` -> ``("mmlu", "anatomy")``; a plug-in's qualified name keeps its
    colon (``dist:task:arg`` -> ``("dist:task", "arg")``) when the first part names no
    task. The name is lower case."""
    name, _, arg = spec.partition(":")
    name = name.strip().lower()
    inner, sep, after = arg.partition(":")
    qualified = f"{name}:{inner.strip().lower()}"
    if name not in _TASKS and qualified in _TASKS:
        return qualified, after if sep else ""
    return name, arg


def plugin_of(name: str) -> Plugin | None:
    """The plug-in that registered task ``name`` (None: credo's own, or no task)."""
    return _TASKS.plugin(name)


def declared(name: str) -> tuple[AnswerFormat | None, str | None]:
    """The answer format and grader task ``name`` was registered with (None: not
    declared; read them off its items)."""
    reg = _TASKS[name]
    return reg.fmt, reg.grader


def declared_source(name: str) -> tuple[str, str] | None:
    """``(source, usage)`` of a task registered with a ``source`` (described without
    loading it), else None."""
    reg = _TASKS[name]
    return (reg.source, reg.usage or name) if reg.source else None


def registered_names() -> list[str]:
    """The registered task names, sorted."""
    return sorted(_TASKS)
