"""``credo run``: flags and YAML into one validated :class:`~credo.config.RunConfig`
(:mod:`credo.cli.flags`), then :func:`credo.app.run.run` and its tables."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from credo.cli.command import command
from credo.cli.flags import add_cache_flag, add_dry_run_flag, add_quiet_flag, item_limit
from credo.registry import STOPPING_RULES

console = Console(stderr=False)
err = Console(stderr=True)

__all__ = [
    "add_evaluation_flags",
    "add_executor_flags",
    "cmd_run",
    "print_estimate",
    "print_result",
    "run_config_from_args",
]


def add_executor_flags(parser: argparse.ArgumentParser) -> None:
    """``--executor``, ``--workers``, ``--ray-address``: the config's ``executor`` section."""
    g = parser.add_argument_group("where samples are generated (the config's executor section)")
    g.add_argument("--executor", choices=["local", "ray"],
                   help="local (this process, default) or ray (actors; this process writes "
                        "the cache)")
    g.add_argument("--workers", type=int, help="Ray actors per model (default 2)")
    g.add_argument("--ray-address",
                   help="Ray cluster to join ('auto': this machine's); default: a local one")


def add_evaluation_flags(parser: argparse.ArgumentParser) -> None:
    """``--bootstrap``, ``--calibrate`` and the fitted scores (``--combine``,
    ``--combine-model``, ``--calibrated-by``): how ``credo run`` and ``credo score``
    report the metrics (the config's ``bootstrap``, ``calibrate`` and ``combine``)."""
    parser.add_argument("--bootstrap", type=int, help="bootstrap resamples for CIs (0 = none)")
    parser.add_argument(
        "--calibrate",
        metavar="{none,isotonic,platt}",
        help="also report ECE and Brier after a post-hoc calibration map cross-fitted over"
        " 5 folds of items (isotonic regression or Platt scaling)",
    )
    parser.add_argument(
        "--combine", metavar="M1,M2,...",
        help="also score method 'combined': these methods' scores combined by a model fitted "
        "on the labelled items, each item scored by a model fitted on the other folds; "
        "certifiable like any method",
    )
    parser.add_argument(
        "--combine-model", choices=["logistic", "isotonic"],
        help="how --combine fits: logistic regression (default), or isotonic regression "
        "on its linear score",
    )
    parser.add_argument(
        "--calibrated-by", choices=["platt", "isotonic"],
        help="how a method calibrated:NAME (in --methods) maps NAME's score: Platt scaling "
        "(default) or isotonic regression, cross-fitted",
    )


def _run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, help="YAML run config; flags below override it")
    p.add_argument("--task", help="gsm8k, mmlu:<subject>, truthfulqa_mc1, lm-eval:<task> "
                   "(see `credo tasks`)")
    p.add_argument("--model", help="embedded model name, a .gguf path, or openai:<model>")
    p.add_argument(
        "--base-url", action="append",
        help="OpenAI-compatible server URL (with --model openai:...); repeat it or separate "
        "URLs by commas for replicas of one model",
    )
    p.add_argument("--label", help="served model label for its identity: openai:<model>@LABEL")
    p.add_argument("--n", type=int, help="samples from the original prompt (paper: 30)")
    p.add_argument("--m", type=int, help="perturbed samples, one per perturbation (paper: 30)")
    p.add_argument("--limit", type=item_limit, metavar="N|all",
                   help="the first N items of the task, or all (default: 20 items of a "
                   "built-in benchmark, every item of your own --task-file or file: task)")
    p.add_argument("--num-fewshot", type=int,
                   help="lm-eval:<task>: few-shot examples before each question (default 0)")
    p.add_argument("--include-path", type=Path, action="append",
                   help="lm-eval:<task>: a folder of custom lm-eval task YAMLs (repeatable)")
    p.add_argument(
        "--methods",
        help="comma-separated, e.g. c3,self_consistency,verbalized,p_true,label_prob,"
        "answer_consistency,paraphrase,ccp (see `credo methods`)",
    )
    add_evaluation_flags(p)
    p.add_argument(
        "--followups",
        type=int,
        help="original samples per item asked follow-ups (verbalized, P(True), CCP)",
    )
    p.add_argument("--kernel", help="how two answers are compared: indicator (equal "
                   "answers), embedding (cosine) or judge (an LLM says whether they agree)")
    p.add_argument("--prompt-style", choices=["direct", "brief", "expression", "cot"],
                   help="how each question is asked: direct (the answer only; the "
                   "default), brief (the key calculations, then the answer), expression (one "
                   "arithmetic expression credo evaluates) or cot (step by step first: give "
                   "--max-tokens room)")
    p.add_argument("--max-tokens", type=int, help="generation length cap per answer")
    p.add_argument("--seed", type=int, help="the run seed (default 0): part of every "
                   "request's cache key, so another seed draws other samples")
    p.add_argument("--out", type=Path, help="run folder (default runs/latest)")
    add_cache_flag(p)
    add_quiet_flag(p)
    add_dry_run_flag(p)
    p.add_argument(
        "--max-cost-usd",
        type=float,
        help="stop sending requests once this run's generations cost this much (US dollars, "
        "from the price_* model options); rerun to resume",
    )
    p.add_argument("--corpus", type=Path,
                   help="text file whose snippets are the context prefixes instead of a "
                   "writer model's sentences")
    p.add_argument("--writer", help="model writing the context prefixes (default: the "
                   "strongest embedded model, or a served model under test itself)")
    p.add_argument("--judge", help="the LLM judge (judge kernel, CCP's NLI step, grading): "
                   "judge.model (default: the model under test)")
    p.add_argument("--writer-prompt", help="the writer prompt: v2 (default) or v1")
    p.add_argument("--certificate", type=Path, help="a certificate from `credo certify`: "
                   "which answers to act on at its risk, written to answers.jsonl")
    p.add_argument("--claims", metavar="METHODS",
                   help="long-form tasks: split each answer into claims and score them by "
                   "these claim methods, comma-separated: frequency, claim_c3, verbalized, "
                   "ordinal (the config's claims section; docs/claims.md)")
    p.add_argument("--claim-split", choices=["sentences", "model"],
                   help="how answers are split into claims (claims.split; default "
                   "sentences, no model); alone it turns the claim stage on with every "
                   "claim method")
    p.add_argument("--prefix-rules", help="neutrality rules a prefix must pass: strict "
                   "(default) or basic")
    p.add_argument("--neutrality", help="what to do when the prefixes change the model's "
                   "accuracy (the neutrality test): warn (default), fail (exit 4) or off")
    p.add_argument(
        "--adaptive", metavar="RULE", choices=STOPPING_RULES,
        help="adaptive sampling: draw each item's samples in rounds of 4 (at least 4) and "
        "stop once RULE holds: consensus (the last round's answers unanimous; ESC, ICLR "
        "2024), interval (the score the full run would report within --adaptive-epsilon "
        "of the one now, at 95%%: default 0.1), decision (that interval and the score "
        "now on one side of --adaptive-threshold or the certificate's); the config's "
        "adaptive section sets the rest (the rules registered: %(choices)s)",
    )
    p.add_argument("--adaptive-epsilon", type=float,
                   help="the interval rule's tolerance: the most an item's score may differ "
                   "from the full run's (adaptive.epsilon, default 0.1)")
    p.add_argument("--adaptive-threshold", type=float,
                   help="the decision rule's score threshold (adaptive.threshold)")
    add_executor_flags(p)
    f = p.add_argument_group(
        "a task from any JSONL/JSON/CSV file (the config's task_file section; replaces --task)"
    )
    f.add_argument("--task-file", type=Path, help="the data file")
    f.add_argument("--answer-format",
                   choices=["number", "choice", "short_text", "code", "long_form"],
                   help="what the answers are, which decides how they are read and graded: "
                   "number, choice (an option letter), short_text, code or long_form")
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


def run_config_from_args(args: argparse.Namespace) -> Any:
    """The run's config: the YAML file (if any) with every given flag written over it
    (:data:`credo.cli.flags.RUN_FLAGS`), validated once by pydantic, so ``--max-tokens 0``
    fails exactly as ``sampling: {max_tokens: 0}`` does. Raises a
    :class:`~credo.errors.UserError` naming the field."""
    from credo.cli.flags import RUN_FLAGS, config_from_flags
    from credo.config import RunConfig

    return config_from_flags(RunConfig, args, RUN_FLAGS, config=args.config)


@command(
    "run", help="sample, score (C3 and baselines) and evaluate a task",
    description="Ask a model every question of a task n times as written and m times "
    "under context prefixes, score each answer's credibility with the chosen methods, "
    "measure how well each score predicts correctness, and write the run folder "
    "(report.md, report.html, scores.jsonl, ...). A rerun reads every sample from the "
    "cache.",
    flags=_run_flags,
)
def cmd_run(args: argparse.Namespace) -> int:
    """Run ``credo run``: validate the config, run, print the tables, write the folder."""
    from credo.app.run import run
    from credo.errors import UserError

    try:
        cfg = run_config_from_args(args)
    except UserError as e:
        raise UserError(f"invalid configuration: {e}") from None
    if args.dry_run:
        from credo.app.run import dry_run

        return print_estimate(dry_run(cfg))
    from credo.errors import NeutralityFailed

    try:
        result = run(cfg, show_progress=not args.quiet)
    except NeutralityFailed as e:  # the folder is written; the tables are printed too
        result = e.result
    return print_result(result, quiet=args.quiet)


def print_result(result: Any, *, quiet: bool = False) -> int:
    """The tables of a finished run (or score), its unavailable methods, the folder, and
    what its outcome says (:class:`~credo.pipeline.ending.Outcome`); the exit
    status of the outcome (:data:`~credo.pipeline.ending.EXIT_STATUS`): 3 when items are
    incomplete (the budget, or requests failed), 4 when the prefixes failed the neutrality
    gate, else 0. ``quiet`` (``--quiet``): an incomplete run says its one line on stderr
    and nothing else (its tables are in the run folder)."""
    from credo.pipeline.ending import EXIT_STATUS, Outcome
    from credo.report.markdown import neutrality_line

    cfg = result.config
    outcome = result.outcome
    brief = quiet and outcome in (Outcome.INCOMPLETE_BUDGET, Outcome.INCOMPLETE_FAILURES)
    if not brief:
        _print_tables(result)
    from credo.cli.held import folded

    not_read = result.stats.get("given_fields_not_read")
    if not_read and not brief:  # a score under a name credo does not read is said
        err.print(f"warning: {result.source}: fields credo does not read: {not_read}",
                  markup=False, highlight=False, soft_wrap=True)
    if outcome is Outcome.INCOMPLETE_BUDGET:
        from credo.report.ledger import fmt_usd

        spent = fmt_usd((result.ledger.get("total") or {}).get("cost_usd") or 0.0)
        err.print(
            folded(f"cost budget reached: {spent} of max_cost_usd {cfg.max_cost_usd} USD "
                   f"spent ({len(result.incomplete)} items incomplete); rerun with a higher "
                   "max_cost_usd to resume"),
            markup=False, highlight=False, soft_wrap=True,
        )
        return EXIT_STATUS[outcome]
    gate = cfg.perturbation.neutrality
    if result.neutrality and not result.neutrality["neutral"] and gate != "off" and not brief:
        line = neutrality_line(result.neutrality)
        err.print(("error: " if gate == "fail" else "warning: ") + line,
                  markup=False, highlight=False, soft_wrap=True)
    if outcome is Outcome.INCOMPLETE_FAILURES and result.source:
        from credo.pipeline.score import given_incomplete_line

        err.print(folded(given_incomplete_line(result)), markup=False, highlight=False,
                  soft_wrap=True)
    elif outcome is Outcome.INCOMPLETE_FAILURES:
        err.print(folded(failed_requests_line(result)), markup=False, highlight=False,
                  soft_wrap=True)
    return EXIT_STATUS[outcome]


def failed_requests_line(result: Any) -> str:
    """What a run whose requests failed says: how many failed, each after the backend's
    own retries, how many retries the whole run made (of every request, those that
    succeeded in the end included), and the items that leaves incomplete."""
    failures = result.stats.get("request_failures")
    retries = result.stats.get("request_retries")
    made = f"; {retries} retries in the whole run" if retries else ""
    return (f"{failures} requests failed after the backend's retries "
            f"({len(result.incomplete)} items incomplete{made}); rerun to retry them")


def _print_tables(result: Any) -> None:
    """The per-item and per-generation tables, the headline lines, the notes, the
    unavailable methods and where the report is."""
    from credo.report.markdown import (
        FEW_NOTE,
        few_in_class,
        metrics_table_rows,
        response_table_rows,
        result_m,
    )
    from credo.report.md_pieces import fmt_number

    cfg = result.config
    title = (
        f"{result.task.name} · {cfg.model} · {_items(result)} "
        f"· n={cfg.n} m={result_m(result)}"
        f" · accuracy {fmt_number(result.accuracy)}"  # n/a without gold answers
    )
    from credo.report.terminal import terminal_table

    width = console.width
    console.print(terminal_table(metrics_table_rows(result, compact=True),
                                 title + " · per item", width))
    if result.response_metrics:
        console.print(terminal_table(response_table_rows(result, compact=True),
                                     "per generation (Müller et al.)", width))
    from credo.report.coverage import headline_lines

    for line in headline_lines(result.coverage, result.degenerate):
        console.print(line, markup=False, highlight=False)
    if result.stats.get("identical_repeats"):  # why the scores say nothing
        console.print(result.stats["identical_repeats"], markup=False, highlight=False,
                      soft_wrap=True)
    if few_in_class(result.metrics) or few_in_class(result.response_metrics):
        console.print(FEW_NOTE, markup=False, highlight=False)
    if not result.metrics and result.items:
        from credo.report.markdown import UNLABELLED_NOTE

        console.print(UNLABELLED_NOTE, markup=False, highlight=False)
    for name, why in result.unavailable.items():
        console.print(f"[yellow]{name}[/yellow]: {why}")
    if result.certificate is not None:
        console.print(result.certificate.line(), markup=False, highlight=False)
    if "tool_accuracy" in result.stats:  # the tool's own number beside credo's
        from credo.report.markdown import accuracy_line

        console.print(accuracy_line(result), markup=False, highlight=False)
    console.print(f"report: {cfg.out / 'report.md'}")


def _items(result: Any) -> str:
    """The title's item count (:func:`_item_count`)."""
    return _item_count(len(result.items), result.task_size, result.config.limit)


def _item_count(items: int, size: int | None, limit: int | None) -> str:
    """``"12 items"``; with the task's size when ``limit`` cut it: ``"20 of 1319 items
    (limit 20; --limit all: every item)"``."""
    if size is None or limit is None or size <= limit:
        return f"{items} items"
    return f"{items} of {size} items (limit {limit}; --limit all: every item)"


def print_estimate(estimate: Any) -> int:
    """The table of ``credo run --dry-run`` (a :class:`~credo.pipeline.estimate.RunEstimate`):
    one aligned plain-text row per stage, then each stage's model and note and what the
    numbers rest on; exit status 0."""
    from credo.pipeline.estimate import CHARS_PER_TOKEN
    from credo.report.ledger import fmt_usd

    rows = [["stage", "basis", "requests", "samples", "cached", "calls",
             "prompt tokens ~", "completion tokens <=", "cost USD ~"]]
    for s in [*estimate.stages, estimate.total()]:
        unknown = s.basis == "unknown"
        counts = (s.requests, s.samples, s.cached_samples, s.calls, s.prompt_tokens,
                  s.completion_tokens)
        rows.append([
            s.stage, s.basis if s.stage != "total" else "",
            *("?" if unknown or v is None else str(v) for v in counts),
            "?" if unknown else fmt_usd(s.cost_usd),
        ])
    lines = [f"dry run: {estimate.task} · "
             f"{_item_count(estimate.items, estimate.task_size, estimate.limit)} · "
             "no model called", ""]
    lines += _aligned(rows)
    lines.append("")
    lines += [f"{s.stage}: {s.model}{' · ' + s.note if s.note else ''}" for s in estimate.stages]
    lines += estimate.notes
    lines += [
        "",
        "planned: the requests the run sends (cache counted); estimated: from n, m and the "
        "config (cache unknown, ?); unknown: depends on the samples.",
        f"Prompt tokens: characters/{CHARS_PER_TOKEN} of the messages, once per call; "
        "completion tokens: max_tokens per missing sample; cost: both at the price_* "
        "model_options (- unpriced).",
    ]
    out = Console(soft_wrap=True)
    for line in lines:
        out.print(line, markup=False, highlight=False)
    return 0


def _aligned(rows: list[list[str]]) -> list[str]:
    """``rows`` as lines of space-padded columns: the first two left, the rest right."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(
            row, widths, strict=True))).rstrip()
        for row in rows
    ]
