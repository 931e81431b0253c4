"""``credo``: the command line, thin over the Python API."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table

console = Console(stderr=False)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``credo`` command."""
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=Console(stderr=True), show_path=False)],
    )
    return int(args.func(args) or 0)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="credo", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="log what each stage does")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="sample, score (C3 and baselines) and evaluate a task")
    r.add_argument("--config", type=Path, help="YAML run config; flags below override it")
    r.add_argument("--task", help="gsm8k, mmlu:<subject>, truthfulqa_mc1 (see `credo tasks`)")
    r.add_argument("--model", help="embedded model name, a .gguf path, or openai:<model>")
    r.add_argument("--base-url", help="OpenAI-compatible server URL (with --model openai:...)")
    r.add_argument("--n", type=int, help="samples from the original prompt (paper: 30)")
    r.add_argument("--m", type=int, help="perturbed samples, one per perturbation (paper: 30)")
    r.add_argument("--limit", type=int, help="first N items of the task")
    r.add_argument(
        "--methods",
        help="comma-separated, e.g. c3,self_consistency,verbalized,p_true,label_prob,"
        "answer_consistency,paraphrase,ccp (see `credo methods`)",
    )
    r.add_argument("--bootstrap", type=int, help="bootstrap resamples for CIs (0 = none)")
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
    r.set_defaults(func=_cmd_run)

    c = sub.add_parser("cache", help="inspect the generation cache")
    c.add_argument("action", choices=["stats"])
    c.add_argument("--cache", type=Path, help="SQLite cache (default ~/.cache/credo)")
    c.set_defaults(func=_cmd_cache)

    t = sub.add_parser("tasks", help="list the runnable benchmarks")
    t.set_defaults(func=_cmd_tasks)
    m = sub.add_parser("methods", help="list the scoring methods")
    m.set_defaults(func=_cmd_methods)

    from credo.perturb.cli import add_perturb_parser
    from credo.report.cli import add_report_parser
    from credo.strength.cli import add_strength_parser

    add_report_parser(sub)
    add_perturb_parser(sub)
    add_strength_parser(sub)
    return p


def _cmd_run(args: argparse.Namespace) -> int:
    from credo.api import run
    from credo.config import RunConfig
    from credo.report.writer import metrics_table_rows, response_table_rows

    overrides = {
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
    }
    if args.methods:
        overrides["methods"] = [s.strip() for s in args.methods.split(",") if s.strip()]
    try:
        if args.config:
            cfg = RunConfig.from_yaml(args.config, **overrides)
        else:
            cfg = RunConfig(**{k: v for k, v in overrides.items() if v is not None})
        updates = {}
        if args.max_tokens:
            updates["sampling"] = cfg.sampling.model_copy(update={"max_tokens": args.max_tokens})
        if args.base_url:
            updates["model_options"] = {**cfg.model_options, "base_url": args.base_url}
        if args.followups:
            updates["baselines"] = cfg.baselines.model_copy(update={"followups": args.followups})
        if updates:
            cfg = cfg.model_copy(update=updates)
    except ValueError as e:
        console.print(f"[red]invalid configuration:[/red] {e}")
        return 2
    result = run(cfg, show_progress=not args.quiet)
    title = (
        f"{result.task.name} · {cfg.model} · {len(result.items)} items "
        f"· n={cfg.n} m={cfg.m} · accuracy {result.accuracy:.3f}"
    )
    console.print(_table(metrics_table_rows(result), title + " · per item"))
    if result.response_metrics:
        console.print(_table(response_table_rows(result), "per generation (002)"))
    for name, why in result.unavailable.items():
        console.print(f"[yellow]{name}[/yellow]: {why}")
    console.print(f"report: {cfg.out / 'report.md'}")
    return 0


def _table(rows: list[list[str]], title: str) -> Table:
    table = Table(title=title)
    for h in rows[0]:
        table.add_column(h, justify="left" if h == "method" else "right")
    for row in rows[1:]:
        table.add_row(*row)
    return table


def _cmd_cache(args: argparse.Namespace) -> int:
    from credo.config import default_cache_dir
    from credo.generation.store import GenerationStore

    path = args.cache or default_cache_dir() / "generations.sqlite"
    if not path.exists():
        console.print(f"no cache at {path}")
        return 1
    with GenerationStore(path) as store:
        stats = store.stats()
    console.print(
        f"{path}: {stats['requests']} requests, {stats['samples']} samples, "
        f"{stats['completion_tokens']} reported completion tokens"
    )
    return 0


def _cmd_tasks(args: argparse.Namespace) -> int:
    from credo.tasks.builtin import list_tasks

    for name in list_tasks():
        console.print(name)
    return 0


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
