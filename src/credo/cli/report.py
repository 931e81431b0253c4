"""``credo report RUN_DIR [RUN_DIR ...]``: HTML reports from run folders, no model needed.

The pages read the run folders only. :func:`credo.app.report.report` is the one place that may
load a model for them: before rendering, a run folder lacking
``perturbation_similarity.json`` (Wu et al., App. A.2 diversity check) gets it from the sentence
embedder, so every later report reads the file without the embedder. This command prints
what it returns.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from credo.cli.command import command


def _report_flags(p: argparse.ArgumentParser) -> None:
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


@command(
    "report",
    help="HTML report of one run, or a comparison of several (figures, CIs, quadrants)",
    description=(
        "Write self-contained HTML reports from run folders. One run without --out: "
        "RUN_DIR/report.html. Several runs (or --out): DIR/index.html comparing them "
        "(method x metric table with bootstrap CIs, paired tests, reliability diagrams, "
        "diagnosis quadrants, neutrality) and DIR/<run>.html per run. Parquet exports "
        "are written into each run folder."
    ),
    flags=_report_flags,
)
def cmd_report(args: argparse.Namespace) -> int:
    """Run ``credo report`` (:func:`credo.app.report.report`): the page, then one line on stderr
    per run folder that is not complete."""
    from rich.console import Console

    from credo.app.report import report

    done = report(
        args.runs, out=args.out, resamples=args.resamples, confidence=args.confidence,
        seed=args.seed, pairs=args.pairs, reference=args.reference, c3_method=args.c3_method,
        strength=args.strength, embedder=args.embedder,
    )
    Console().print(f"report: {done.page}")
    _say_unfinished(done.unfinished)
    _say_lacking(done.lacking)
    return 0


_UNFINISHED = {
    "incomplete": "incomplete: some requests failed, its items are left out; rerun its "
                  "config to complete it",
    "interrupted": "incomplete: no run_status.json, credo stopped while writing the folder; "
                   "rerun its config",
}


def _say_unfinished(unfinished: list[tuple[Path, str]]) -> None:
    """One line on stderr per run folder that is not complete: the page says
    it too, but a terminal that says nothing reads as a clean run."""
    from rich.console import Console

    err = Console(stderr=True, soft_wrap=True)
    for path, status in unfinished:
        why = _UNFINISHED.get(status, status)
        err.print(f"warning: {path}: {why}", markup=False, highlight=False)


def _say_lacking(lacking: list[tuple[Path, list[str], list[str]]]) -> None:
    """One line on stderr per run folder whose status marker lists files it lacks:
    which, and whether this report wrote them again."""
    from rich.console import Console

    err = Console(stderr=True, soft_wrap=True)
    for path, names, still in lacking:
        then = (f"rerun its config to write {', '.join(still)} (every sample is cached)"
                if still else "credo report wrote them again")
        err.print(f"warning: {path}: run_status.json lists {', '.join(names)}, missing from "
                  f"the folder; {then}", markup=False, highlight=False)
