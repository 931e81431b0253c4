"""``credo study``: every task with every model over one cache, one run folder each and
the comparison report (:func:`study`)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from credo.app.common import (
    HelperModels,
    check_neutral,
    check_writable,
    config_pool,
    given_roles,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from credo.config import RunConfig, StudyConfig
    from credo.generation.pool import ModelPool
    from credo.models.base import Model
    from credo.pipeline.runner import RunResult
    from credo.tasks.base import Task

__all__ = ["StudyResult", "StudyRun", "study"]


@dataclass
class StudyRun:
    """One finished run of a study: its task, model (spec and label), folder, result,
    and the seconds it took."""

    task: str
    model: str
    label: str
    folder: Path
    result: RunResult
    seconds: float


@dataclass
class StudyResult:
    """A finished study: its runs in order and the comparison report's page (None when
    nothing was written)."""

    config: StudyConfig
    runs: list[StudyRun] = field(default_factory=list)
    report: Path | None = None

    @property
    def incomplete(self) -> bool:
        """Whether some run has items whose requests failed (rerun to complete them)."""
        return any(r.result.incomplete for r in self.runs)


def study(
    config: StudyConfig,
    *,
    models: Mapping[str, Model] | None = None,
    show_progress: bool = True,
    on_run: Callable[[int, int, StudyRun], None] | None = None,
    write: bool = True,
    **handed: Unpack[HelperModels],
) -> StudyResult:
    """Run every task of ``config`` with every model, over one cache; write one run
    folder per (task, model) and the comparison report ``out/report/index.html``.

    One :class:`~credo.generation.pool.ModelPool` per model serves all its tasks, so a
    model (and its Ray actors) is loaded once; a rerun finds every sample in the cache
    and regenerates nothing. ``models`` (spec -> ready backend) and the keywords
    of :class:`~credo.app.common.HelperModels` (``writer``, ``judge``, ``embedder``)
    replace what the config names (tests pass scripted models); nothing passed in is
    modified or closed. ``on_run(i, total, run)`` is
    called after each run (the command line prints a line). With the Ray executor, Ray
    is started once for the whole study (unless already running) and shut down after.
    Every run's methods are checked before the first. A run whose prefixes fail the
    neutrality gate (``neutrality: fail``) stops the study: its folder and the report of
    the runs so far are written, then :class:`~credo.errors.NeutralityFailed` is raised
    (``study``: this result).
    """
    # the model: per study model below
    given = given_roles(handed, "study", HelperModels)
    from contextlib import ExitStack

    from credo.generation.pool import MODEL
    from credo.pipeline.checks import method_specs
    from credo.pipeline.runner import configured_task

    config = _lm_eval_groups(config)
    configs = config.run_configs()
    for cfg in configs:
        method_specs(cfg.methods)  # an unknown method fails before anything runs
    # every task is read before the first run: a bad one leaves no run folder
    tasks = {cfg.task: configured_task(cfg) for cfg in configs}
    if write:
        check_writable(config.out, "the study folder (out)")
    result = StudyResult(config)
    per_model = len(config.tasks)
    with ExitStack() as stack:
        if config.executor.kind == "ray":
            from credo.generation.ray_executor import RaySession

            stack.enter_context(RaySession(config.executor)).ensure()
        for m, study_model in enumerate(config.models):
            start = m * per_model
            first = configs[start]
            roles = {**given, MODEL: (models or {}).get(first.model)}
            with config_pool(
                first, show_progress=show_progress, roles=roles, embedder=handed.get("embedder"),
                executor=config.executor,
            ) as pool:
                going = _study_runs(configs[start:start + per_model], pool, study_model.name,
                                    result, len(configs), on_run, write, tasks)
            if not going:
                break
    if write:
        from credo.report.html import write_report
        from credo.report.writer import write_study_config

        write_study_config(config, config.out)
        result.report = write_report([r.folder for r in result.runs], config.out / "report")
    if result.runs:
        check_neutral(result.runs[-1].result, result)
    return result


def _lm_eval_groups(config: StudyConfig) -> StudyConfig:
    """``config`` with each ``lm-eval:<group>`` task replaced by the group's tasks
    (lm-eval is imported only when a task names it)."""
    if not any(t.startswith("lm-eval:") for t in config.tasks):
        return config
    from credo.tasks.lm_eval import expand_lm_eval_specs

    tasks = expand_lm_eval_specs(config.tasks, config.run.lm_eval.include_path)
    return config.model_copy(update={"tasks": tasks})


def _study_runs(
    configs: Sequence[RunConfig],
    pool: ModelPool,
    label: str,
    result: StudyResult,
    total: int,
    on_run: Callable[[int, int, StudyRun], None] | None,
    write: bool,
    tasks: Mapping[str, Task],
) -> bool:
    """Run one model's ``configs`` over its ``pool`` (each task read already, in
    ``tasks``), appending each to ``result.runs`` (its folder written first); False when
    a run failed the neutrality gate (the study stops there)."""
    from credo.pipeline.ending import Outcome
    from credo.pipeline.runner import run_pipeline

    for cfg in configs:
        t0 = time.perf_counter()
        done = run_pipeline(cfg, pool, tasks[cfg.task])
        if write:
            from credo.report.writer import write_run

            write_run(done, cfg.out)
        entry = StudyRun(cfg.task, cfg.model, label, cfg.out, done, time.perf_counter() - t0)
        result.runs.append(entry)
        if on_run is not None:
            on_run(len(result.runs), total, entry)
        if done.outcome is Outcome.NEUTRALITY_FAILED:
            return False
    return True
