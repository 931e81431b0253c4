"""``credo``: the command line, thin over the Python API.

Every flag goes through the same pydantic config as the YAML files, so a flag is
validated exactly like the field it sets. Heavy libraries (torch, scikit-learn,
sentence-transformers, xllamacpp, matplotlib) are imported inside the commands that need
them, never when the parser is built: ``credo --help`` starts at once.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from rich.console import Console
from rich.logging import RichHandler

from credo.cli.run import add_executor_flags, cmd_run
from credo.registry import STOPPING_RULES

console = Console(stderr=False)

DESCRIPTION = (
    "How far to trust an LLM's answers: credo samples a model many times under the "
    "original prompt and under neutral context prefixes, scores each answer's credibility "
    "(C3, self-consistency and the field's other methods) and measures how well each score "
    "predicts correctness; `credo certify` turns a score into a threshold with a guarantee. "
    "Start with `credo run --help`."
)
"""What ``credo --help`` says (issue 30 item 4: what it does for the user; how the command
line is built is this module's docstring)."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``credo`` command.

    Exit status: 0 done; 2 a user error (bad file, option, config, name, unreachable
    server), reported in one or two lines naming it, with the traceback only under
    ``-v``, found before the first model call; 3 some requests failed after the
    backend's retries, or the cost budget (``max_cost_usd``) was reached (everything else
    is cached and written; rerun to retry them); 4 the prefixes failed the neutrality test
    under ``perturbation.neutrality: fail``.
    """
    from credo.commands import RedactURLs
    from credo.errors import BudgetReached, NeutralityFailed, RequestsFailed, UserError

    parser = _parser()
    args = parser.parse_args(argv)
    handler = RichHandler(console=Console(stderr=True), show_path=False)
    handler.addFilter(RedactURLs())
    if not args.verbose:
        handler.addFilter(_own_or_errors)
    logging.basicConfig(  # force: each call's own level and handler (main() may run twice
        level=logging.INFO if args.verbose else logging.WARNING,  # in one process)
        format="%(message)s",
        handlers=[handler],
        force=True,
    )
    log = logging.getLogger("credo")
    try:
        return int(args.func(args) or 0)
    except UserError as e:
        if args.verbose:
            log.exception("the traceback of the error below")
        _error(f"error: {e}")
        return 2
    except NeutralityFailed as e:  # a command that does not print its own ending
        _error(f"error: {e}")
        return 4
    except BudgetReached as e:
        _error(f"{e}; rerun with a higher max_cost_usd to resume")
        return 3
    except RequestsFailed as e:
        if args.verbose:
            log.exception("the traceback of the failure below")
        _error(f"{len(e.failed)} requests failed after the backend's retries; rerun to retry"
               f" them (first: {e.errors[0] if e.errors else 'samples missing'})")
        return 3


def _own_or_errors(record: logging.LogRecord) -> bool:
    """Without ``-v`` the terminal shows credo's own warnings and other libraries' errors
    only: a library's retry warnings (Hugging Face Hub's, offline) are not the one line a
    user error gets."""
    return record.name.split(".")[0] == "credo" or record.levelno >= logging.ERROR


def _error(message: str) -> None:
    """One or two lines on stderr, no markup, no traceback."""
    Console(stderr=True, soft_wrap=True).print(message, markup=False, highlight=False)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="credo", description=DESCRIPTION)
    p.add_argument("-v", "--verbose", action="store_true", help="log what each stage does")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser(
        "run", help="sample, score (C3 and baselines) and evaluate a task",
        description="Ask a model every question of a task n times as written and m times "
        "under context prefixes, score each answer's credibility with the chosen methods, "
        "measure how well each score predicts correctness, and write the run folder "
        "(report.md, report.html, scores.jsonl, ...). A rerun reads every sample from the "
        "cache.",
    )
    r.add_argument("--config", type=Path, help="YAML run config; flags below override it")
    r.add_argument("--task", help="gsm8k, mmlu:<subject>, truthfulqa_mc1, lm-eval:<task> "
                   "(see `credo tasks`)")
    r.add_argument("--model", help="embedded model name, a .gguf path, or openai:<model>")
    r.add_argument(
        "--base-url", action="append",
        help="OpenAI-compatible server URL (with --model openai:...); repeat it or separate "
        "URLs by commas for replicas of one model",
    )
    r.add_argument("--label", help="served model label for its identity: openai:<model>@LABEL")
    r.add_argument("--n", type=int, help="samples from the original prompt (paper: 30)")
    r.add_argument("--m", type=int, help="perturbed samples, one per perturbation (paper: 30)")
    r.add_argument("--limit", type=int, help="first N items of the task")
    r.add_argument("--num-fewshot", type=int,
                   help="lm-eval:<task>: few-shot examples before each question (default 0)")
    r.add_argument("--include-path", type=Path, action="append",
                   help="lm-eval:<task>: a folder of custom lm-eval task YAMLs (repeatable)")
    r.add_argument(
        "--methods",
        help="comma-separated, e.g. c3,self_consistency,verbalized,p_true,label_prob,"
        "answer_consistency,paraphrase,ccp (see `credo methods`)",
    )
    r.add_argument("--bootstrap", type=int, help="bootstrap resamples for CIs (0 = none)")
    r.add_argument(
        "--calibrate",
        metavar="{none,isotonic,platt}",
        help="also report ECE and Brier after a post-hoc calibration map cross-fitted over"
        " 5 folds of items (isotonic regression or Platt scaling)",
    )
    r.add_argument(
        "--followups",
        type=int,
        help="original samples per item asked follow-ups (verbalized, P(True), CCP)",
    )
    r.add_argument("--kernel", help="answer kernel: indicator, embedding, judge (000 App. H)")
    r.add_argument("--prompt-style", choices=["direct", "brief", "expression", "cot"])
    r.add_argument("--max-tokens", type=int, help="generation length cap per answer")
    r.add_argument("--seed", type=int)
    r.add_argument("--out", type=Path, help="run folder (default runs/latest)")
    r.add_argument("--cache", type=Path, help="SQLite cache (default ~/.cache/credo)")
    r.add_argument("--quiet", action="store_true", help="no progress bars")
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="print the planned requests, samples, tokens and cost per stage (and what is "
        "cached) without calling any model",
    )
    r.add_argument(
        "--max-cost-usd",
        type=float,
        help="stop sending requests once this run's generations cost this much (US dollars, "
        "from the price_* model options); rerun to resume",
    )
    r.add_argument("--corpus", type=Path,
                   help="text file whose snippets are the context prefixes (000 App. F)")
    r.add_argument("--writer", help="model writing the context prefixes (default: the "
                   "strongest embedded model, or a served model under test itself)")
    r.add_argument("--judge", help="the LLM judge (judge kernel, CCP's NLI step, grading): "
                   "judge.model (default: the model under test)")
    r.add_argument("--writer-prompt", help="the writer prompt: v2 (default) or v1")
    r.add_argument("--certificate", type=Path, help="a certificate from `credo certify`: "
                   "which answers to act on at its risk, written to answers.jsonl")
    r.add_argument("--prefix-rules", help="neutrality rules a prefix must pass: strict "
                   "(default) or basic")
    r.add_argument("--neutrality", help="000 App. A.3's gate: warn (default), fail, off")
    r.add_argument(
        "--adaptive", metavar="RULE", choices=STOPPING_RULES,
        help="adaptive sampling: draw each item's samples in rounds of 4 (at least 4) and "
        "stop once RULE holds: consensus (the last round's answers unanimous; ESC, ICLR "
        "2024), interval (the score the full run would report within --adaptive-epsilon "
        "of the one now, at 95%%: default 0.1), decision (that interval and the score "
        "now on one side of --adaptive-threshold or the certificate's); the config's "
        "adaptive section sets the rest (the rules registered: %(choices)s)",
    )
    r.add_argument("--adaptive-epsilon", type=float,
                   help="the interval rule's tolerance: the most an item's score may differ "
                   "from the full run's (adaptive.epsilon, default 0.1)")
    r.add_argument("--adaptive-threshold", type=float,
                   help="the decision rule's score threshold (adaptive.threshold)")
    add_executor_flags(r)
    f = r.add_argument_group(
        "a task from any JSONL/JSON/CSV file (the config's task_file section; replaces --task)"
    )
    f.add_argument("--task-file", type=Path, help="the data file")
    f.add_argument("--answer-format",
                   choices=["number", "choice", "short_text", "code", "long_form"])
    f.add_argument("--question-field", help="field of the question (a,b: joined with a space)")
    f.add_argument("--choices-field",
                   help="field holding the options, or one field per option: a,b,c,d")
    f.add_argument("--gold-field", help="field of the reference answer (default: answer)")
    f.add_argument("--gold-is-index", action="store_true", default=None,
                   help="the gold is a 0-based option index")
    f.add_argument("--id-field", help="field of a unique id (default: <stem>-<line>)")
    f.add_argument("--domain", help="the perturbation writer's topic, e.g. 'school science'")
    f.add_argument("--grader", help="grader of the answers, e.g. simpleqa (default: exact)")
    f.add_argument("--task-family", help="the task the file's questions come from, e.g. "
                   "gsm8k: a certificate made on it applies (default: file:<format>)")
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("cache", help="count the requests, samples and tokens in the "
                       "generation cache")
    c.add_argument("action", choices=["stats"])
    c.add_argument("--cache", type=Path, help="SQLite cache (default ~/.cache/credo)")
    c.set_defaults(func=_cmd_cache)

    t = sub.add_parser("tasks", help="list the runnable benchmarks: source, items, answer "
                       "format, grader, multiple choice")
    t.add_argument("--json", action="store_true", help="one JSON object per task, every spec")
    t.add_argument("--all", action="store_true", help="every MMLU subject on its own row")
    t.set_defaults(func=_cmd_tasks)
    m = sub.add_parser("methods", help="list the scoring methods and the sample sets each "
                       "reads")
    m.set_defaults(func=_cmd_methods)

    from credo.cli.adaptive import add_adaptive_parser
    from credo.cli.certify import add_certify_parser
    from credo.cli.claims import add_claims_parsers
    from credo.cli.perturb import add_perturb_parser
    from credo.cli.probe import add_probe_parser
    from credo.cli.report import add_report_parser
    from credo.cli.score import add_score_parser
    from credo.cli.serve import add_serve_parser
    from credo.cli.strength import add_strength_parser
    from credo.cli.study import add_study_parser

    add_score_parser(sub)
    add_report_parser(sub)
    add_perturb_parser(sub)
    add_strength_parser(sub)
    add_probe_parser(sub)
    add_certify_parser(sub)
    add_study_parser(sub)
    add_adaptive_parser(sub)
    add_claims_parsers(sub)
    add_serve_parser(sub)
    return p


def _cmd_cache(args: argparse.Namespace) -> int:
    """``credo cache stats`` (:func:`credo.api.cache_stats`): exit 1 when there is no cache."""
    from credo.api import cache_stats
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


def _cmd_tasks(args: argparse.Namespace) -> int:
    """The task catalogue (:func:`credo.tasks.catalogue.task_catalogue`) as a table with
    the graders' rules below it, or as JSON lines with ``--json``."""
    import json

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
            table.add_row(*_task_cells(r))
    if subjects and not args.all:
        sizes = [r.items or 0 for r in subjects]
        table.add_row(f"mmlu:<subject> ({len(subjects)}, --all)",
                      f"{min(sizes)}-{max(sizes)}", *_task_cells(subjects[0])[2:])
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


def _cmd_methods(args: argparse.Namespace) -> int:
    from credo.methods import METHODS
    from credo.tasks.base import AnswerFormat

    for name, spec in sorted(METHODS.items()):
        if callable(spec.needs):
            needs = "; ".join(
                f"{f.value}: {', '.join(spec.needs_for(f))}"
                for f in (AnswerFormat.CHOICE, AnswerFormat.NUMBER)
            )
        else:
            needs = ", ".join(spec.needs)
        notes = []
        if spec.formats:
            notes.append("only " + "/".join(f.value for f in spec.formats))
        if spec.logprobs:
            notes.append("needs logprobs")
        extra = f" ({'; '.join(notes)})" if notes else ""
        console.print(f"{name:18s} {spec.summary}{extra}", markup=False)
        console.print(f"{'':18s} needs {needs}", markup=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
