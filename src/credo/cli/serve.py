"""``credo serve --certificate cert.json``: an OpenAI-compatible gateway that answers each
question with its credibility and the certificate's accept decision (issue 32;
:func:`credo.serve.server.serve`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from credo.cli.certify import add_adaptive_decision_flags
from credo.cli.command import command
from credo.cli.flags import SKIP, Flag, base_url_option, merge_flags

__all__ = ["SERVE_FLAGS", "cmd_serve"]


def _urls(values: list[str]) -> Any:
    found = base_url_option(values)
    return SKIP if found is None else found


SERVE_FLAGS: tuple[Flag, ...] = (
    Flag("model", "model"),
    Flag("base_url", "model_options.base_url", _urls),
    Flag("label", "model_options.label"),
    Flag("cache", "cache"),
    Flag("n", "n"),
    Flag("m", "m"),
    Flag("max_tokens", "sampling.max_tokens"),
    Flag("prompt_style", "prompt_style"),
    Flag("writer", "perturbation.writer", old_names=("generator",)),
    Flag("adaptive", "adaptive"),
    Flag("adaptive_round", "adaptive_options.round"),
    Flag("adaptive_min", "adaptive_options.min"),
    Flag("adaptive_confidence", "adaptive_options.confidence"),
)
"""``credo serve``'s settings flags over the gateway's run config: each one that differs
from the certificate's recipe has the certificate refused before the gateway listens."""


def _serve_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--certificate", type=Path, required=True,
                   help="a certificate file from `credo certify`")
    p.add_argument("--config", type=Path, help="the gateway's run config (default: the "
                   "calibration run's config.yaml, else the certificate's recipe)")
    p.add_argument("--model", help="the model spec (default: the certificate's)")
    p.add_argument("--base-url", action="append", help="OpenAI-compatible server URL of "
                   "the model (repeat, or separate by commas, for replicas)")
    p.add_argument("--label", help="served model label for its identity")
    p.add_argument("--cache", type=Path, help="SQLite cache (default: the config's)")
    p.add_argument("--n", type=int, help="original samples (must be the certificate's)")
    p.add_argument("--m", type=int, help="perturbed samples (must be the certificate's)")
    p.add_argument("--max-tokens", type=int, help="generation length cap per answer")
    p.add_argument("--prompt-style", choices=["direct", "brief", "expression", "cot"])
    p.add_argument("--writer", help="model writing the context prefixes")
    p.add_argument("--adaptive", choices=["decision", "off"],
                   help="decision: sample in rounds until the accept decision is settled; "
                   "off: the full recipe (default: what the certificate was made for)")
    add_adaptive_decision_flags(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default "
                   "127.0.0.1)")
    p.add_argument("--port", type=int, default=8008, help="port (default 8008; 0: any free)")
    p.add_argument("--api-key", help="require this key (Authorization: Bearer KEY); "
                   "prefer --api-key-env, which keeps it out of the process list")
    p.add_argument("--api-key-env", metavar="VAR", help="require the key held by this "
                   "environment variable")
    p.add_argument("--log", type=Path, help="JSONL decision log, one line per question")
    p.add_argument("--on-reject", choices=["flag", "abstain"], default="flag",
                   help="flag: the answer with accept false (default); abstain: the "
                   "abstention text instead")
    p.add_argument("--abstention", help="what --on-reject abstain says")
    p.add_argument("--max-concurrent", type=int, default=64,
                   help="questions sampled together at most (one batch; default 64)")
    p.add_argument("--queue", type=int, default=256,
                   help="questions waiting beyond those; more get 429 (default 256)")
    p.add_argument("--timeout", type=float, help="seconds a request waits for its "
                   "decision before 504 (default: no limit)")
    p.add_argument("--batch-window", type=float, default=0.02,
                   help="seconds a batch waits for the next question (default 0.02; 10 "
                   "windows at most in all)")
    p.add_argument("--served-model-name", help="the model id clients name (default: the "
                   "model's identity)")


@command(
    "serve",
    help="an OpenAI-compatible gateway: each answer with its score and a certified "
    "accept flag",
    description=(
        "Serve POST /v1/chat/completions, GET /v1/models and GET /health: each "
        "question is sampled under the certificate's recipe (the adaptive decision rule "
        "at the certified threshold for a certificate of `credo certify --adaptive "
        "decision`, else the full recipe), and answered with the modal answer and a "
        "`credo` object (score, threshold, accept, alpha, delta, samples). A "
        "certificate whose recipe differs from the gateway's settings is refused before "
        "it listens. The guarantee covers questions exchangeable with the calibration "
        "questions, for this model and recipe."
    ),
    flags=_serve_flags,
)
def cmd_serve(args: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM; exit 0 once the log is closed."""
    from rich.console import Console

    from credo.errors import UserError
    from credo.serve.guard import DEFAULT_ABSTENTION
    from credo.serve.server import serve

    key = args.api_key
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            raise UserError(f"--api-key-env {args.api_key_env}: the variable is not set")
    console = Console(soft_wrap=True)
    serve(args.certificate, host=args.host, port=args.port, api_key=key, log=args.log,
          on_reject=args.on_reject, abstention=args.abstention or DEFAULT_ABSTENTION,
          max_concurrent=args.max_concurrent, max_queue=args.queue, timeout=args.timeout,
          batch_window=args.batch_window, config=args.config,
          overrides=merge_flags({}, args, SERVE_FLAGS), served_model=args.served_model_name,
          say=lambda line: console.print(line, markup=False, highlight=False))
    return 0
