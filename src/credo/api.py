"""``credo.run``: the pipeline of a run plus its run folder, the Python API's entry point."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from credo.config import RunConfig
    from credo.models.base import Model
    from credo.models.embedders import Embedder
    from credo.pipeline.runner import RunResult
    from credo.tasks.base import Task

__all__ = ["run"]


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

    with ModelPool(
        cache_path=config.cache_path,
        seed=config.seed,
        max_block=config.max_block,
        show_progress=show_progress,
        embedder=embedder,
    ) as pool:
        for role, given in ((MODEL, model), (WRITER, perturber), (JUDGE, judge)):
            if given is not None:
                pool.assign(role, model=given)
        result = run_pipeline(config, pool, task)
    if write:
        from credo.report.writer import write_run

        write_run(result, config.out)
    return result
