"""``credo run``: flags and YAML into one validated :class:`~credo.config.RunConfig`."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

console = Console(stderr=False)
err = Console(stderr=True)

__all__ = [
    "add_executor_flags",
    "cmd_run",
    "executor_flags",
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


def executor_flags(args: argparse.Namespace) -> dict[tuple[str, str], Any]:
    """The ``executor`` section's keys the flags give (None where a flag is absent)."""
    return {
        ("executor", "kind"): args.executor,
        ("executor", "workers"): args.workers,
        ("executor", "address"): args.ray_address,
    }


def run_config_from_args(args: argparse.Namespace) -> Any:
    """The run's config: the YAML file (if any) with every given flag written over it,
    validated once by pydantic, so ``--max-tokens 0`` fails exactly as
    ``sampling: {max_tokens: 0}`` does. Raises ValueError (pydantic's ValidationError
    is one) naming the field."""
    from pydantic import ValidationError

    from credo.cli.probe import base_url_option
    from credo.config import RunConfig, read_yaml_mapping, validation_message
    from credo.errors import UserError

    data: dict[str, Any] = read_yaml_mapping(args.config) if args.config else {}
    flat = {
        "task": args.task,
        "model": args.model,
        "n": args.n,
        "m": args.m,
        "limit": args.limit,
        "prompt_style": args.prompt_style,
        "seed": args.seed,
        "out": args.out,
        "cache": args.cache,
        "kernel": args.kernel,
        "bootstrap": args.bootstrap,
        "calibrate": args.calibrate,
        "max_cost_usd": args.max_cost_usd,
    }
    data.update({k: v for k, v in flat.items() if v is not None})
    if args.methods:
        data["methods"] = [s.strip() for s in args.methods.split(",") if s.strip()]
    nested = {
        ("sampling", "max_tokens"): args.max_tokens,
        ("model_options", "base_url"): base_url_option(args.base_url),
        ("model_options", "label"): args.label,
        ("baselines", "followups"): args.followups,
        ("perturbation", "corpus"): args.corpus,
        ("perturbation", "generator"): args.writer,
        ("perturbation", "prompt"): args.writer_prompt,
        ("judge", "model"): args.judge,
        ("perturbation", "rules"): args.prefix_rules,
        ("perturbation", "neutrality"): args.neutrality,
        **executor_flags(args),
        **{("task_file", key): value for key, value in _task_file_flags(args).items()},
    }
    for (section, key), value in nested.items():
        if value is not None:
            data[section] = {**(data.get(section) or {}), key: value}
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        raise UserError(validation_message(e, str(args.config or "options"))) from None


def _task_file_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The ``task_file`` section's keys the flags give (None where a flag is absent);
    ``a,b`` in a field flag names several fields."""

    def fields(value: str | None) -> str | list[str] | None:
        if value is None:
            return None
        names = [v.strip() for v in value.split(",") if v.strip()]
        return names[0] if len(names) == 1 else names

    return {
        "path": args.task_file,
        "format": args.answer_format,
        "question": fields(args.question_field),
        "choices": fields(args.choices_field),
        "gold": args.gold_field,
        "gold_is_index": args.gold_is_index,
        "id": args.id_field,
        "domain": args.domain,
        "grader": args.grader,
    }


def cmd_run(args: argparse.Namespace) -> int:
    """Run ``credo run``: validate the config, run, print the tables, write the folder."""
    from credo.api import run
    from credo.errors import UserError

    try:
        cfg = run_config_from_args(args)
    except UserError as e:
        raise UserError(f"invalid configuration: {e}") from None
    if args.dry_run:
        from credo.api import dry_run

        return print_estimate(dry_run(cfg))
    from credo.errors import NeutralityFailed

    try:
        result = run(cfg, show_progress=not args.quiet)
    except NeutralityFailed as e:  # the folder is written; the tables are printed too
        result = e.result
    return print_result(result)


def print_result(result: Any) -> int:
    """The tables of a finished run (or score), its unavailable methods, the folder, and
    what its outcome says (issue 22: :class:`~credo.pipeline.ending.Outcome`); the exit
    status of the outcome (:data:`~credo.pipeline.ending.EXIT_STATUS`): 3 when items are
    incomplete (the budget, or requests failed), 4 when the prefixes failed the neutrality
    gate, else 0."""
    from credo.pipeline.ending import EXIT_STATUS, Outcome
    from credo.report.writer import (
        FEW_NOTE,
        few_in_class,
        metrics_table_rows,
        neutrality_line,
        response_table_rows,
    )

    cfg = result.config
    title = (
        f"{result.task.name} · {cfg.model} · {len(result.items)} items "
        f"· n={cfg.n} m={cfg.m} · accuracy {result.accuracy:.3f}"
    )
    from credo.report.terminal import terminal_table

    width = console.width
    console.print(terminal_table(metrics_table_rows(result, compact=True),
                                 title + " · per item", width))
    if result.response_metrics:
        console.print(terminal_table(response_table_rows(result, compact=True),
                                     "per generation (002)", width))
    if few_in_class(result.metrics) or few_in_class(result.response_metrics):
        console.print(FEW_NOTE, markup=False, highlight=False)
    if not result.metrics and result.items:
        from credo.report.writer import UNLABELLED_NOTE

        console.print(UNLABELLED_NOTE, markup=False, highlight=False)
    for name, why in result.unavailable.items():
        console.print(f"[yellow]{name}[/yellow]: {why}")
    console.print(f"report: {cfg.out / 'report.md'}")
    outcome = result.outcome
    if outcome is Outcome.INCOMPLETE_BUDGET:
        from credo.report.ledger import fmt_usd

        spent = fmt_usd((result.ledger.get("total") or {}).get("cost_usd") or 0.0)
        err.print(
            f"cost budget reached: {spent} of max_cost_usd {cfg.max_cost_usd} USD spent "
            f"({len(result.incomplete)} items incomplete); rerun with a higher max_cost_usd "
            "to resume",
            markup=False, highlight=False, soft_wrap=True,
        )
        return EXIT_STATUS[outcome]
    gate = cfg.perturbation.neutrality
    if result.neutrality and not result.neutrality["neutral"] and gate != "off":
        line = neutrality_line(result.neutrality)
        err.print(("error: " if gate == "fail" else "warning: ") + line,
                  markup=False, highlight=False, soft_wrap=True)
    if outcome is Outcome.INCOMPLETE_FAILURES:
        failures = result.stats.get("request_failures")
        retries = result.stats.get("request_retries")
        err.print(
            f"{failures} requests failed after {retries} retries "
            f"({len(result.incomplete)} items incomplete); rerun to retry them",
            markup=False, highlight=False,
        )
    return EXIT_STATUS[outcome]


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
    lines = [f"dry run: {estimate.task} · {estimate.items} items · no model called", ""]
    lines += _aligned(rows)
    lines.append("")
    lines += [f"{s.stage}: {s.model}{' · ' + s.note if s.note else ''}" for s in estimate.stages]
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
