"""``credo cache stats``, ``credo tasks`` and ``credo methods``: what credo has (the
generation cache, the runnable benchmarks, the scoring methods), listed without a model."""

from __future__ import annotations

import argparse

from rich.console import Console

from credo.cli.command import command
from credo.cli.flags import add_cache_flag

__all__ = ["cmd_cache", "cmd_methods", "cmd_tasks"]

console = Console(stderr=False)


def _cache_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["stats"],
                   help="stats: count the cached requests, samples and tokens")
    add_cache_flag(p)


@command("cache", help="count the requests, samples and tokens in the generation cache",
         description="Count what the generation cache holds: requests, samples and the "
         "completion tokens the models reported. Every command reads and writes this cache, "
         "so a rerun generates nothing it already has.",
         flags=_cache_flags)
def cmd_cache(args: argparse.Namespace) -> int:
    """``credo cache stats`` (:func:`credo.api.cache_stats`): exit 1 when there is no cache."""
    from credo.app.catalogue import cache_stats
    from credo.config import default_cache_path

    stats = cache_stats(args.cache)
    if stats is None:
        console.print(f"no cache at {default_cache_path(args.cache)}", soft_wrap=True)
        return 1
    console.print(  # one line whatever the path's length: scripts and the docs read it
        f"{stats.path}: {stats.requests} requests, {stats.samples} samples, "
        f"{stats.completion_tokens} reported completion tokens", soft_wrap=True,
    )
    return 0


def _tasks_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object per task, every spec")
    p.add_argument("--all", action="store_true", help="every MMLU subject on its own row")


@command("tasks", help="list the runnable benchmarks: source, items, answer format, grader, "
         "multiple choice",
         description="List the tasks you can give credo run --task: the built-in benchmarks "
         "with their item counts and where their data comes from, and the ones that read "
         "your own copy of a benchmark (NAME:PATH), with how each answer is graded.",
         flags=_tasks_flags)
def cmd_tasks(args: argparse.Namespace) -> int:
    """The task catalogue (:func:`credo.tasks.catalogue.task_catalogue`) as a table with
    the graders' rules below it, or as JSON lines with ``--json``."""
    import json

    from rich.markup import escape
    from rich.table import Table

    from credo.tasks.catalogue import task_catalogue

    rows = task_catalogue()
    if args.json:
        for row in rows:
            print(json.dumps(row.to_json(), ensure_ascii=False))
        return 0
    subjects = [r for r in rows if r.spec.startswith("mmlu:") and r.spec != "mmlu:all"]
    table = Table(title="credo tasks  (--json: every spec, for scripts)")
    for name in ("task", "items", "format", "MC", "grader", "source"):
        table.add_column(name, justify="right" if name == "items" else "left",
                         overflow="fold")
    for r in rows:
        if args.all or r not in subjects:
            table.add_row(*map(escape, _task_cells(r)))
    if subjects and not args.all:
        sizes = [r.items or 0 for r in subjects]
        table.add_row(f"mmlu:<subject> ({len(subjects)}, --all)",
                      f"{min(sizes)}-{max(sizes)}", *map(escape, _task_cells(subjects[0])[2:]))
    console.print(table)
    for rule in sorted({r.correctness for r in rows}):
        console.print(f"  {rule}", markup=False, highlight=False)
    return 0


def _task_cells(r) -> list[str]:
    """One table row: the spec (or how to name the user's file), items, format, whether
    multiple choice, grader, source."""
    mc = {True: "yes", False: "no", None: "?"}[r.multiple_choice]
    spec = r.spec if r.items is not None else (
        f"{r.spec}:PATH" if r.source == "your file" else r.usage)
    return [spec, "-" if r.items is None else str(r.items), r.answer_format or "?", mc,
            r.grader, r.source]


@command("methods", help="list the scoring methods and the sample sets each reads",
         description="List the scoring methods you can give --methods: what each measures "
         "and which samples it needs (original, perturbed, paraphrased, follow-up "
         "questions), so you know what a run of them will generate.")
def cmd_methods(args: argparse.Namespace) -> int:
    """Each registered method (:data:`credo.methods.METHODS`): its summary, the formats
    and logprobs it needs, and the sample sets it reads."""
    from credo.methods import METHODS
    from credo.tasks.base import AnswerFormat

    for name, spec in sorted(METHODS.items()):
        if callable(spec.needs):
            needs = "; ".join(
                f"{f.value}: {', '.join(spec.needs_for(f))}"
                for f in (AnswerFormat.CHOICE, AnswerFormat.NUMBER)
            )
        elif spec.fitted:
            needs = "the scores of the methods it reads, on labelled items"
        else:
            needs = ", ".join(spec.needs)
        notes = []
        if spec.kernel:
            notes.append(f"{spec.kernel} kernel")
        if spec.formats:
            notes.append("only " + "/".join(f.value for f in spec.formats))
        if spec.logprobs:
            notes.append("needs logprobs")
        plugin = METHODS.plugin(name)
        if plugin is not None:
            notes.append(f"plug-in: {plugin}")
        extra = f" ({'; '.join(notes)})" if notes else ""
        console.print(f"{name:18s} {spec.summary}{extra}", markup=False)
        console.print(f"{'':18s} needs {needs}", markup=False)
    return 0
