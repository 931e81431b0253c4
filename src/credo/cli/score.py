"""``credo score SAMPLES``: score generations a user already has, flags and
YAML through the same :class:`~credo.config.RunConfig` as ``credo run``."""

from __future__ import annotations

import argparse
from pathlib import Path

from credo.cli.command import command
from credo.cli.flags import add_cache_flag, add_quiet_flag
from credo.cli.run import add_evaluation_flags

__all__ = ["cmd_score"]


def _score_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("samples", type=Path, metavar="SAMPLES",
                   help="the generations: credo's JSONL, an lm-eval --log_samples file or an "
                   "inspect_ai log (.eval or .json)")
    p.add_argument("--config", type=Path, help="YAML run config (methods, kernel, judge, ...)")
    p.add_argument("--methods", help="comma-separated methods (see `credo methods`)")
    p.add_argument("--kernel", help="how two answers are compared: indicator (equal "
                   "answers), embedding (cosine) or judge (an LLM says whether they agree)")
    p.add_argument("--format", default="short_text",
                   help="answer format: number, choice, short_text, code, long_form")
    p.add_argument("--judge", help="judge model for the judge kernel or grading")
    p.add_argument("--lm-eval-filter", help="lm-eval filter to read (default: each doc's first)")
    p.add_argument("--scorer", help="the inspect_ai scorer whose values and answers are read "
                   "from a log with several (default: the log's first; the report names "
                   "the others)")
    p.add_argument("--given", metavar="NAME[,NAME]",
                   help="the scores the file gives (scores: {NAME: value} per sample, "
                   "item_scores per item) to evaluate beside credo's methods, as methods "
                   "given:NAME; default every one the file gives, 'none' for none")
    p.add_argument("--columns", metavar="FIELD=COLUMN[,...]",
                   help="for a CSV table: which column holds each field, e.g. "
                   "item=question_id,answer=prediction,scores.judge=judge_prob")
    p.add_argument(
        "--recompute-correctness", action="store_true",
        help="grade every answer against its item's gold answer (--format) instead of using"
        " the file's own correctness (lm-eval's metric per response, inspect's scorer value,"
        " the 'correct' field)",
    )
    add_evaluation_flags(p)
    p.add_argument("--certificate", type=Path, help="a certificate `credo certify` made on "
                   "a `credo score` folder: which answers to act on at its risk, written to "
                   "answers.jsonl")
    p.add_argument("--seed", type=int, help="seed of the judge's requests and the "
                   "bootstrap (default 0)")
    p.add_argument("--out", type=Path, help="run folder (default runs/latest)")
    add_cache_flag(p, "SQLite cache for judge calls")
    add_quiet_flag(p)


@command(
    "score",
    help="score generations you already have (credo JSONL, lm-eval samples, inspect logs)",
    description=(
        "Score existing generations with credo's methods and write the run folder "
        "`credo run` writes (so `credo report` works on it). SAMPLES is credo's JSONL "
        "(one object per sample: item, set, answer, correct; a run's samples.jsonl too), "
        "a CSV table of the same columns (comma or semicolon separated; --columns maps "
        "other names), an lm-evaluation-harness --log_samples file, or an inspect_ai eval "
        "log (.json or .eval). Correctness is the file's own (lm-eval's metric per "
        "response, inspect's scorer) unless --recompute-correctness; without --methods, the "
        "methods its sample sets allow are scored. Scores the file gives (a reward model's, "
        "a judge's, a confidence from another tool) are evaluated beside them as methods "
        "given:NAME, and can be certified (credo certify DIR --method given:NAME). No model "
        "is called unless a method needs a judge."
    ),
    flags=_score_flags,
)
def cmd_score(args: argparse.Namespace) -> int:
    """Run ``credo score``: validate, score, print the tables, write the folder."""
    from credo.app.score import score
    from credo.cli.flags import SCORE_FLAGS, config_from_flags
    from credo.cli.run import print_result
    from credo.config import RunConfig

    config = config_from_flags(RunConfig, args, SCORE_FLAGS, config=args.config,
                               prefix="invalid configuration: ")
    result = score(args.samples, config, answer_format=args.format,
                   lm_eval_filter=args.lm_eval_filter,
                   recompute_correctness=args.recompute_correctness,
                   show_progress=not args.quiet, given=_names(args.given),
                   columns=_columns(args.columns), scorer=args.scorer)
    return print_result(result, quiet=args.quiet)


def _names(flag: str | None) -> list[str] | None:
    """``--given``: None (every score the file gives), [] for ``none``, else the names."""
    if flag is None:
        return None
    names = [n.strip() for n in flag.split(",") if n.strip()]
    return [] if names == ["none"] else names


def _columns(flag: str | None) -> dict[str, str] | None:
    """``--columns field=column,...`` as a mapping; a malformed one is a user error."""
    if not flag:
        return None
    from credo.errors import UserError

    out = {}
    for part in flag.split(","):
        field, sep, column = part.partition("=")
        if not sep or not field.strip() or not column.strip():
            raise UserError(f"--columns: {part!r} is not FIELD=COLUMN (e.g. "
                            "item=question_id,scores.judge=judge_prob)")
        out[field.strip()] = column.strip()
    return out
