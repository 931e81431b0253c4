"""``credo report RUN_DIR [RUN_DIR ...]``: HTML reports from run folders, no model needed.

The pages read the run folders only. This command is the one place that may load a model
for them: before rendering, a run folder lacking ``perturbation_similarity.json`` (000
App. A.2 diversity check) gets it from the sentence embedder, loaded lazily here, so every
later report reads the file without the embedder.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from credo import jsonio
from credo.errors import UserError

if TYPE_CHECKING:
    from credo.report.rundata import RunData

log = logging.getLogger(__name__)


def add_report_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``credo report`` on the top-level subparsers."""
    p = sub.add_parser(
        "report",
        help="HTML report of one run, or a comparison of several (figures, CIs, quadrants)",
        description=(
            "Write self-contained HTML reports from run folders. One run without --out: "
            "RUN_DIR/report.html. Several runs (or --out): DIR/index.html comparing them "
            "(method x metric table with bootstrap CIs, paired tests, reliability diagrams, "
            "diagnosis quadrants, neutrality) and DIR/<run>.html per run. Parquet exports "
            "are written into each run folder."
        ),
    )
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="run folders")
    p.add_argument("--out", type=Path, help="output folder (default: see above; credo-report)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (1000)")
    p.add_argument("--confidence", type=float, default=0.95, help="CI level (0.95)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--pairs", help="paired tests as A:B,C:D (default: c3 against each method)")
    p.add_argument("--reference", help="method compared with every other (default c3)")
    p.add_argument("--c3-method", default="c3", help="score on the quadrant plot's C3 axis")
    p.add_argument("--strength", type=Path, action="append", default=[],
                   help="strength run folder with flip_rates.csv (repeatable)")
    p.add_argument("--embedder", default=None,
                   help="sentence embedder for the diversity check of run folders without "
                        "perturbation_similarity.json (default: the run's; 'none' to skip)")
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    """Run ``credo report``."""
    from pydantic import ValidationError
    from rich.console import Console

    from credo.config import validation_message
    from credo.report.html import ReportOptions, load_flip_rates, write_report, write_run_report
    from credo.report.rundata import load_run

    console = Console()
    runs = [load_run(r) for r in args.runs]
    pairs = _parse_pairs(args.pairs) if args.pairs else None
    for a, b in pairs or []:
        for r in runs:
            if a not in r.methods or b not in r.methods:
                raise UserError(f"--pairs {a}:{b}: {r.path} has methods {r.methods}")
    try:
        flips = load_flip_rates(args.strength)
    except FileNotFoundError as e:
        raise UserError(f"--strength: {e}") from None
    try:
        opts = ReportOptions(
            n_resamples=args.resamples, confidence=args.confidence, seed=args.seed,
            pairs=pairs, reference=args.reference, c3_method=args.c3_method, flip_rates=flips,
        )
    except ValidationError as e:
        raise UserError(validation_message(e, "options")) from None
    write_missing_similarities(runs, args.embedder)
    if len(runs) == 1 and args.out is None:
        page = write_run_report(runs[0].path, opts)
    else:
        page = write_report([r.path for r in runs], args.out or Path("credo-report"), opts)
    console.print(f"report: {page}")
    _say_unfinished(runs)
    return 0


_UNFINISHED = {
    "incomplete": "incomplete: some requests failed, its items are left out; rerun its "
                  "config to complete it",
    "interrupted": "incomplete: no run_status.json, credo stopped while writing the folder; "
                   "rerun its config",
}


def _say_unfinished(runs: Sequence[RunData]) -> None:
    """One line on stderr per run folder that is not complete (issue 21): the page says
    it too, but a terminal that says nothing reads as a clean run."""
    from rich.console import Console

    err = Console(stderr=True, soft_wrap=True)
    for run in runs:
        if run.status != "complete":
            why = _UNFINISHED.get(run.status, run.status)
            err.print(f"warning: {run.path}: {why}", markup=False, highlight=False)


def _parse_pairs(text: str) -> list[tuple[str, str]]:
    pairs = []
    for part in text.split(","):
        a, sep, b = part.strip().partition(":")
        if not sep or not a or not b:
            raise UserError(f"--pairs expects A:B[,C:D...], got {part!r}")
        pairs.append((a, b))
    return pairs


def write_missing_similarities(runs: Sequence[RunData], embedder: str | None) -> list[Path]:
    """Write ``perturbation_similarity.json`` into each run folder that lacks it and has an
    item with two or more kept perturbations (000 App. A.2); return the files written.

    ``embedder`` names the sentence embedder (default: each run's configured one; ``none``
    skips the check). Each embedder is loaded once, only when a run needs it; a failure
    to load it or to write the file is logged and the report goes on without the figure.
    """
    from credo.report.rundata import SIMILARITY_FILE

    if embedder == "none":
        return []
    loaded: dict[str, Any] = {}
    written: list[Path] = []
    for run in runs:
        groups = [g for g in run.kept_perturbations() if len(g) >= 2]
        if SIMILARITY_FILE in run.extras or not groups:
            continue
        pert = run.config.get("perturbation") or {}
        name = embedder or pert.get("embedder")
        if not name:
            continue
        if name not in loaded:
            loaded[name] = _load_embedder(name)
        if loaded[name] is None:
            continue
        from credo.perturb.quality import similarity_record

        record = similarity_record(groups, loaded[name], pert.get("threshold"))
        target = run.path / SIMILARITY_FILE
        try:
            jsonio.write_text(target, jsonio.dumps(record))
        except OSError as e:  # a read-only run folder still gets its report
            log.warning("diversity check not saved: %s: %s", target, e)
            continue
        run.extras[SIMILARITY_FILE] = record
        written.append(target)
    return written


def _load_embedder(name: str) -> Any:
    """The sentence embedder ``name``, or None (logged) when it cannot be loaded."""
    from credo.generation.pool import shared_embedder

    try:
        return shared_embedder(name)
    except Exception as e:  # the report is still useful without the diversity figure
        log.warning("diversity check skipped: could not load embedder %r: %s", name, e)
        return None
