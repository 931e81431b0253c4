"""``credo probe``: ask a served model's server what it does with ``n``, seeds, logprobs
and grammars, show the answers and store them for later runs."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from credo.cli.command import command
from credo.cli.flags import add_cache_flag, base_url_option

__all__ = ["base_url_option", "cmd_probe"]

console = Console(stderr=False)


def _probe_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="openai:<served model name>")
    p.add_argument(
        "--base-url", action="append", required=True,
        help="server URL; repeat it or separate URLs by commas for replicas (the first is asked)",
    )
    p.add_argument("--label", help="what the name does not say (a weights revision): openai:<m>@L")
    p.add_argument("--api-key-env", help="environment variable holding the key (OPENAI_API_KEY)")
    add_cache_flag(p, "SQLite cache whose folder keeps probes.json")


def _uses(found: Any) -> list[str]:
    """What ``credo run`` does with the answers (explicit model_options still win)."""
    if not found.complete:
        return []
    together = found.honours_n and found.seed_contract is not False
    lines = ["one call with n per request" if together
             else "one call per sample, seeded seed + j"]
    if found.deterministic is False:
        lines.append("samples are not reproducible (the cache still holds them)")
    if found.logprobs is False:
        lines.append("methods that need logprobs are not available")
    if found.grammar:
        lines.append(f"label answers restricted by a grammar (field {found.grammar})")
    return lines


@command(
    "probe",
    help="what a served model's server does with n, seeds, logprobs and grammars",
    description=(
        "Send a handful of tiny requests to an OpenAI-compatible server and report "
        "whether it honours n, whether a seed reproduces its sample, whether child j "
        "of a call with seed s is the single call with seed s + j (credo's seed "
        "contract), whether it returns logprobs (how many alternatives) and whether it "
        "obeys a GBNF grammar. The answers are stored per model identity in probes.json "
        "beside the cache; `credo run` uses them (one call per sample where the "
        "contract is broken, no logprob methods without logprobs)."
    ),
    flags=_probe_flags,
)
def cmd_probe(args: argparse.Namespace) -> int:
    """Probe (:func:`credo.app.probe.probe`), print the answers: exit 0 once they are stored,
    or 3 when the probe did not finish (nothing is stored then)."""
    from credo.app.probe import probe

    done = probe(args.model, base_url_option(args.base_url), label=args.label,
                 api_key_env=args.api_key_env, cache=args.cache)
    found = done.probe
    table = Table(title=f"{found.identity} · {found.requests} requests · {found.seconds:.1f} s")
    table.add_column("question")
    table.add_column("answer")
    for question, answer in found.rows():
        table.add_row(question, answer)
    console.print(table)
    for line in _uses(found):
        console.print(f"credo run: {line}", highlight=False)
    if done.stored is None:
        why = (f"did not finish[/red]: {found.errors[0]}" if found.errors else
               f"is not stored[/red]: an empty reply left {', '.join(found.unsettled)} "
               "unknown; probe again")
        console.print(f"[red]the probe {why}", highlight=False)
        return 3
    console.print(f"stored in {done.stored}", highlight=False)
    return 0
