"""``credo study --config study.yaml``: every task with every model, one run folder each
under the study's ``out`` and one comparison report (``out/report/index.html``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from credo.cli.command import command
from credo.cli.flags import add_cache_flag, add_quiet_flag
from credo.cli.run import add_executor_flags

console = Console()

__all__ = ["cmd_study", "study_config_from_args"]


def _study_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, required=True, help="YAML study config")
    p.add_argument("--out", type=Path, help="study folder (default runs/study)")
    add_cache_flag(p)
    add_quiet_flag(p)
    add_executor_flags(p)


def study_config_from_args(args: argparse.Namespace) -> Any:
    """The study's config: the YAML file with the given flags written over it, validated
    once; a :class:`~credo.errors.UserError` names the bad field."""
    from credo.cli.flags import STUDY_FLAGS, config_from_flags
    from credo.config import StudyConfig

    return config_from_flags(StudyConfig, args, STUDY_FLAGS, config=args.config,
                             prefix="invalid study: ")


@command(
    "study",
    help="every task x every model: one run folder each and one comparison report",
    description=(
        "Run a study: the YAML names tasks, models (a spec or {model, model_options, "
        "label}), optionally methods (a list, or task -> list), and a run: section of "
        "settings every run shares (n, m, limit, sampling, ...). Runs share one "
        "cache, so a rerun regenerates nothing; each (task, model) is written to "
        "OUT/<task>__<model>, the comparison report to OUT/report/index.html."
    ),
    flags=_study_flags,
)
def cmd_study(args: argparse.Namespace) -> int:
    """Run ``credo study``: a line per finished run, then the report's path; exit 3 when
    some run has items whose requests failed (a rerun completes them), 4 when a run's
    prefixes failed the neutrality gate (``neutrality: fail``; the study stops there,
    its folders and report written)."""
    from credo.app.study import study
    from credo.errors import NeutralityFailed
    from credo.pipeline.ending import EXIT_STATUS, Outcome

    cfg = study_config_from_args(args)
    try:
        result = study(cfg, show_progress=not args.quiet, on_run=_print_run)
    except NeutralityFailed as e:
        console.print(f"report: {e.study.report}")
        Console(stderr=True, soft_wrap=True).print(
            f"error: {e}; the study stopped after {len(e.study.runs)} of "
            f"{len(cfg.run_configs())} runs", markup=False, highlight=False)
        return EXIT_STATUS[Outcome.NEUTRALITY_FAILED]
    console.print(f"report: {result.report}")
    if result.incomplete:
        console.print("some requests failed after the backend's retries; rerun to retry them",
                      markup=False, highlight=False)
        return 3
    return 0


def _print_run(i: int, total: int, run: Any) -> None:
    """``[i/total] task · label (model) · items, accuracy, generated/cached · seconds · folder``."""
    from credo.report.md_pieces import fmt_number

    r = run.result
    console.print(
        f"[{i}/{total}] {r.task.name} · {run.label} ({run.model}) · {len(r.items)} items"
        f" · accuracy {fmt_number(r.accuracy)} · {r.stats.get('generated_samples', 0)} generated, "
        f"{r.stats.get('cached_samples', 0)} cached · {run.seconds:.1f} s · {run.folder}",
        markup=False, highlight=False, soft_wrap=True,
    )
