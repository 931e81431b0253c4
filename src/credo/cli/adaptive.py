"""``credo adaptive RUN_DIR``: what adaptive sampling would have drawn and scored, replayed
from a finished full run's cache with no model call
(:func:`credo.app.adaptive.simulate_adaptive`): samples saved per stage against the change
in AUROC, ECE and PRR with paired bootstrap CIs, as a table and a figure."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from credo.cli.command import command
from credo.registry import STOPPING_RULES

__all__ = ["cmd_adaptive"]

console = Console(stderr=False)


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        msg = f"not a comma-separated list of numbers: {text!r}"
        raise argparse.ArgumentTypeError(msg) from None


def _adaptive_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR|FILE",
                   help="a finished full run's folder, or a samples file `credo score` reads "
                   "(credo JSONL, lm-eval samples, an inspect log): samples from any API")
    p.add_argument("--rule", action="append", metavar="RULE", choices=STOPPING_RULES,
                   help="stopping rule, one of %(choices)s; repeat for several (default: all "
                   "that apply)")
    p.add_argument("--epsilon", type=_floats,
                   help="the interval rule's tolerances (the most an item's score may differ "
                   "from the full run's), comma-separated (default 0.05,0.1,0.2)")
    p.add_argument("--threshold", type=float,
                   help="the decision rule's score threshold (without it: no decision rule)")
    p.add_argument("--round", type=int, help="samples per round (default 4)")
    p.add_argument("--min", type=int, help="samples before any rule is read (default 4)")
    p.add_argument("--scores", type=lambda t: [x.strip() for x in t.split(",") if x.strip()],
                   help="the scores the interval and decision rules read, comma-separated "
                   "(default: self_consistency,semantic_entropy,c3,c3_cross)")
    p.add_argument("--method", help="the method the table and figure show (default c3)")
    p.add_argument("--bootstrap", type=int, default=1000, help="paired bootstrap resamples")
    p.add_argument("--out", type=Path, help="output folder (default RUN_DIR/adaptive, or "
                   "FILE's stem + -adaptive beside it)")
    g = p.add_argument_group("a samples file (FILE)")
    g.add_argument("--orders", type=int, default=1, help="random orders of each item's "
                   "samples to average over (seeded; default 1: the file's order)")
    g.add_argument("--seed", type=int, help="seed of the orders (default 0)")
    g.add_argument("--format", dest="answer_format",
                   choices=["number", "choice", "short_text", "code", "long_form"],
                   help="the answers' format, as for `credo score` (default short_text)")
    g.add_argument("--lm-eval-filter", help="lm-eval's filter whose responses are read")
    g.add_argument("--recompute-correctness", action="store_true",
                   help="grade every answer against its item's gold (not the file's own)")
    g.add_argument("--methods", type=lambda t: [x.strip() for x in t.split(",") if x.strip()],
                   help="the methods to score (default: what the file allows)")


@command(
    "adaptive",
    help="replay adaptive sampling from a full run's cache: samples saved vs Δmetrics",
    description=(
        "Replay a finished full run from its cache, then each stopping rule (and each "
        "epsilon of the interval rule) as an adaptive run would have drawn it, with no "
        "model call; write RUN_DIR/adaptive/adaptive.md, adaptive.json and adaptive.png "
        "(samples saved vs ΔAUROC, one point per rule and epsilon). A samples file "
        "`credo score` reads is replayed the same way, averaged over --orders random "
        "orders of each item's samples."
    ),
    flags=_adaptive_flags,
)
def cmd_adaptive(args: argparse.Namespace) -> int:
    """Run :func:`credo.app.adaptive.simulate_adaptive` and print its table."""
    from credo.app.adaptive import simulate_adaptive
    from credo.report.adaptive import adaptive_table

    rules = args.rule or [name for name, rule in STOPPING_RULES.items()
                          if args.threshold or not rule.needs_threshold]
    options = {k: v for k, v in (("threshold", args.threshold), ("round", args.round),
                                 ("min", args.min), ("scores", args.scores)) if v is not None}
    given = {"answer_format": args.answer_format or "short_text",
             "lm_eval_filter": args.lm_eval_filter, "methods": args.methods,
             "seed": 0 if args.seed is None else args.seed,
             "recompute_correctness": args.recompute_correctness} \
        if args.run_dir.is_file() else _refuse_file_flags(args)
    sim = simulate_adaptive(
        args.run_dir, rules, args.epsilon or [0.05, 0.1, 0.2], options=options, out=args.out,
        method=args.method, n_resamples=args.bootstrap, orders=args.orders, given=given,
    )
    orders = max((p.orders for p in sim.points), default=1)
    console.print(f"method: {sim.method}" + (f"; the mean over {orders} sample orders"
                                              if orders > 1 else ""))
    console.print(adaptive_table(sim.points, sim.method), markup=False, highlight=False,
                  soft_wrap=True)
    for point in sim.points:
        if point.not_replayable:
            console.print(f"{point.rule}: {len(point.not_replayable)} items not in the cache "
                          "(left out)", markup=False)
    for what, path in sim.files.items():
        console.print(f"{what}: {path}", markup=False)
    return 0


_FILE_FLAGS = (("seed", "--seed"), ("answer_format", "--format"),
               ("lm_eval_filter", "--lm-eval-filter"),
               ("recompute_correctness", "--recompute-correctness"), ("methods", "--methods"))
"""The flags that apply to a samples file (FILE) only: (attribute, flag)."""


def _refuse_file_flags(args: argparse.Namespace) -> None:
    """A :class:`~credo.errors.UserError` naming a samples file's flag given with a run
    folder (whose config says what it was scored with), where it would be ignored."""
    from credo.errors import UserError

    if not args.run_dir.is_dir():
        return  # no such file or folder: the replay says so
    for dest, flag in _FILE_FLAGS:
        if getattr(args, dest) not in (None, False):
            raise UserError(f"{flag} applies to a samples file (credo adaptive FILE) only; "
                            f"{args.run_dir} is a run folder, replayed with what its "
                            "config.yaml says: leave it out")
