"""The Python API's entry points: a pipeline plus the folder it writes.

- :func:`run`: ``credo run`` (C3 and the baselines) and its run folder.
- :func:`run_strength`: ``credo strength run`` (paper 003) and its output folder.
- :func:`score`: ``credo score``, generations a user already has, scored and written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from credo.config import RunConfig, StrengthConfig
    from credo.models.base import Model
    from credo.models.embedders import Embedder
    from credo.pipeline.runner import RunResult
    from credo.strength.pipeline import StrengthResult
    from credo.tasks.base import Task

__all__ = ["check_writable", "run", "run_strength", "score"]


def run(
    config: RunConfig,
    *,
    model: Model | None = None,
    perturber: Model | None = None,
    embedder: Embedder | None = None,
    task: Task | None = None,
    judge: Model | None = None,
    show_progress: bool = True,
    write: bool = True,
) -> RunResult:
    """Run C3 and the selected baselines on a task, write the run folder, return the results.

    ``model``, ``perturber`` (writes context prefixes and paraphrases), ``judge`` (the
    LLM judge: CCP's NLI step, the judge kernel, open-ended grading), ``embedder`` and
    ``task`` replace what ``config`` names (tests pass scripted models); nothing passed
    in is modified or closed. With ``write`` the run folder ``config.out`` is written
    (:mod:`credo.report.writer`).
    """
    from credo.generation.pool import JUDGE, MODEL, WRITER, ModelPool
    from credo.pipeline.runner import run_pipeline

    if write:
        check_writable(config.out, "the run folder (out)")
    with ModelPool(
        cache_path=config.cache_path,
        seed=config.seed,
        max_block=config.max_block,
        show_progress=show_progress,
        embedder=embedder,
        executor=config.executor,
    ) as pool:
        for role, given in ((MODEL, model), (WRITER, perturber), (JUDGE, judge)):
            if given is not None:
                pool.assign(role, model=given)
        result = run_pipeline(config, pool, task)
    if write:
        from credo.report.writer import write_run

        write_run(result, config.out)
    return result


def run_strength(
    config: StrengthConfig,
    *,
    models: Mapping[str, Model] | None = None,
    embedder: Embedder | None = None,
    scorer: Model | None = None,
    task: Task | None = None,
    show_progress: bool = True,
    write: bool = True,
) -> StrengthResult:
    """Run 003's strength pipeline, write its output folder, return the rows.

    ``models`` (model specs to ready backends), ``embedder``, ``scorer`` (the surprisal
    scorer) and ``task`` replace what ``config`` names (tests pass scripted models);
    nothing passed in is modified or closed.
    With ``write`` the folder ``config.out`` is written (:mod:`credo.report.strength`).
    """
    from credo.generation.pool import ModelPool
    from credo.strength.pipeline import assign_roles, run_strength_pipeline, strength_task

    task = strength_task(config, task)  # a bad task fails before the cache is opened
    if write:
        check_writable(config.out, "the output folder (out)")
    with ModelPool(
        cache_path=config.cache_path,
        seed=config.seed,
        max_block=config.max_block,
        show_progress=show_progress,
        embedder=embedder,
    ) as pool:
        assign_roles(pool, config, models, scorer)
        result = run_strength_pipeline(config, pool, task)
    if write:
        from credo.report.strength import write_strength_run

        write_strength_run(result, config.out)
    return result


def check_writable(folder: str | Path, what: str) -> None:
    """Fail with a :class:`UserError` naming ``folder`` unless a file can be written there,
    before any model is called (the folder is created if missing)."""
    from credo.errors import UserError

    path = Path(folder)
    probe = path / f".credo-write-check-{os.getpid()}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as e:
        raise UserError(f"{path}: cannot write {what}: {e.strerror or e}") from None


def score(
    samples: str | Path,
    config: RunConfig | None = None,
    *,
    answer_format: str = "short_text",
    lm_eval_filter: str | None = None,
    embedder: Embedder | None = None,
    judge: Model | None = None,
    show_progress: bool = True,
    write: bool = True,
) -> RunResult:
    """Score generations a user already has (``credo score``) and write the run folder.

    ``samples`` is credo's JSONL (a run folder's ``samples.jsonl`` too), an
    lm-evaluation-harness ``--log_samples`` file or an inspect_ai eval log
    (:mod:`credo.tasks.generations`); ``config`` gives the methods, kernel, bootstrap,
    ``out`` and the judge/grader models (no model is called for methods that read only
    samples); ``answer_format`` says how gold answers grade and which methods apply.
    """
    from credo.config import RunConfig
    from credo.generation.pool import JUDGE, ModelPool
    from credo.pipeline.score import score_generations
    from credo.tasks.base import AnswerFormat
    from credo.tasks.generations import read_generations

    config = config or RunConfig()
    try:
        fmt = AnswerFormat(answer_format)
    except ValueError:
        from credo.errors import UserError

        known = ", ".join(f.value for f in AnswerFormat)
        raise UserError(
            f"unknown answer format {answer_format!r} (--format); known: {known}"
        ) from None
    generations = read_generations(samples, lm_eval_filter=lm_eval_filter)
    config = config.model_copy(
        update={"task": str(samples), "model": f"given:{generations.layout}"}
    )
    if write:
        check_writable(config.out, "the run folder (out)")
    with ModelPool(
        cache_path=config.cache_path,
        seed=config.seed,
        max_block=config.max_block,
        show_progress=show_progress,
        embedder=embedder,
    ) as pool:
        if judge is not None:
            pool.assign(JUDGE, model=judge)
        result = score_generations(config, generations, pool, fmt)
    if write:
        from credo.report.writer import write_run

        write_run(result, config.out)
    return result
