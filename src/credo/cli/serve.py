"""``credo serve --certificate cert.json``: an OpenAI-compatible gateway that answers each
question with its credibility and the certificate's accept decision
(:func:`credo.serve.server.serve`)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from credo.cli.certify import add_adaptive_decision_flags
from credo.cli.command import command
from credo.cli.flags import SKIP, Flag, add_cache_flag, base_url_option, merge_flags
from credo.serve.limits import (
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_JSON_DEPTH,
    DEFAULT_MAX_QUESTION_CHARS,
)

__all__ = ["SERVE_FLAGS", "cmd_serve"]


def _urls(values: list[str]) -> Any:
    found = base_url_option(values)
    return SKIP if found is None else found


SERVE_FLAGS: tuple[Flag, ...] = (
    Flag("model"),
    Flag("base_url", "model_options.base_url", _urls),
    Flag("label", "model_options.label"),
    Flag("cache"),
    Flag("n"),
    Flag("m"),
    Flag("max_tokens", "sampling.max_tokens"),
    Flag("prompt_style"),
    Flag("include_path", "lm_eval.include_path", lambda paths: [str(p) for p in paths]),
    Flag("writer", "perturbation.writer", old_names=("generator",)),
    Flag("adaptive"),
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
    add_cache_flag(p, "SQLite cache (default: the config's)")
    p.add_argument("--n", type=int, help="original samples (must be the certificate's)")
    p.add_argument("--m", type=int, help="perturbed samples (must be the certificate's)")
    p.add_argument("--max-tokens", type=int, help="generation length cap per answer")
    p.add_argument("--prompt-style", choices=["direct", "brief", "expression", "cot"],
                   help="the prompt template (must be the certificate's)")
    p.add_argument("--include-path", type=Path, action="append",
                   help="a certificate of an lm-eval:<task>: the folder of its custom task "
                   "YAMLs (default: the calibration run's; repeatable)")
    p.add_argument("--writer", help="model writing the context prefixes")
    p.add_argument("--adaptive", choices=["decision", "off"],
                   help="decision: sample in rounds until the accept decision is settled; "
                   "off: the full recipe (default: what the certificate was made for)")
    add_adaptive_decision_flags(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default "
                   "127.0.0.1)")
    p.add_argument("--port", type=int, default=8008, help="port (default 8008; 0: any free)")
    p.add_argument("--api-key", help="require this key (Authorization: Bearer KEY); "
                   "prefer --api-key-env or --api-key-file, which keep it out of the "
                   "process list")
    p.add_argument("--api-key-env", metavar="VAR", help="require a key held by this "
                   "environment variable (several separated by commas: old and new during "
                   "a rotation)")
    p.add_argument("--api-key-file", type=Path, metavar="FILE", help="require a key listed "
                   "in this file, one per line; the file is read again when it changes, so "
                   "keys are rotated without a restart")
    p.add_argument("--log", type=Path, help="JSONL decision log, one line per question "
                   "(answered, rejected or failed with its cause)")
    p.add_argument("--on-reject", choices=["flag", "abstain"], default="flag",
                   help="flag: the answer with accept false (default); abstain: the "
                   "abstention text instead")
    p.add_argument("--abstention", help="what --on-reject abstain says")
    p.add_argument("--max-concurrent", type=int, default=64,
                   help="questions sampled at once, each as soon as it arrives (default 64)")
    p.add_argument("--queue", type=int, default=256,
                   help="questions waiting beyond those; more get 429 (default 256)")
    p.add_argument("--timeout", type=float, help="seconds a question may take; then 504 "
                   "and its model calls are cancelled (what was drawn is cached; default: "
                   "no limit)")
    p.add_argument("--drain-timeout", type=float, default=DEFAULT_DRAIN_TIMEOUT,
                   help="on SIGTERM or Ctrl-C, seconds the questions in flight get to "
                   f"finish before the rest get 503 (default {DEFAULT_DRAIN_TIMEOUT:g})")
    p.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES,
                   help="largest request body; larger ones get 413 unread (default 1 MiB)")
    p.add_argument("--max-question-chars", type=int, default=DEFAULT_MAX_QUESTION_CHARS,
                   help="longest question in characters; longer ones get 400 (default "
                   f"{DEFAULT_MAX_QUESTION_CHARS:,})")
    p.add_argument("--max-json-depth", type=int, default=DEFAULT_MAX_JSON_DEPTH,
                   help="deepest JSON nesting of a request; deeper ones get 400 (default "
                   f"{DEFAULT_MAX_JSON_DEPTH})")
    p.add_argument("--otlp-endpoint", metavar="URL", help="send OpenTelemetry traces (a "
                   "span per question and per sampling round) to this OTLP/HTTP collector "
                   "endpoint, e.g. http://127.0.0.1:4318/v1/traces (needs credo[otel])")
    p.add_argument("--batch-window", type=float, help=argparse.SUPPRESS)  # no effect now
    p.add_argument("--served-model-name", help="the model id clients name (default: the "
                   "model's identity)")


@command(
    "serve",
    help="answer questions behind an OpenAI-compatible API, or abstain where the "
    "certificate does not vouch for the answer",
    description=(
        "Put a certificate in front of your model: any OpenAI client asks its questions "
        "here, credo samples the model under the certificate's recipe and replies with "
        "the answer, its score and whether the certificate accepts it (or an abstention, "
        "with --on-reject abstain). Each question is sampled as soon as it arrives and "
        "answered as soon as its decision is settled; /metrics serves Prometheus "
        "metrics; SIGTERM drains for --drain-timeout seconds. A certificate made for "
        "other settings is refused before the gateway listens. The guarantee covers "
        "questions like the calibration questions, for this model and recipe."
    ),
    flags=_serve_flags,
)
def cmd_serve(args: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM; exit 0 once the log is closed."""
    from rich.console import Console

    from credo.serve.guard import DEFAULT_ABSTENTION
    from credo.serve.server import serve

    keys = _api_keys(args)
    if args.batch_window is not None:
        logging.getLogger(__name__).warning(
            "--batch-window has no effect: questions are no longer batched (each is "
            "sampled as soon as it arrives); deprecated since credo 0.1.0, it goes in 0.2.0")
    console = Console(soft_wrap=True)
    serve(args.certificate, host=args.host, port=args.port, api_key=keys, log=args.log,
          on_reject=args.on_reject, abstention=args.abstention or DEFAULT_ABSTENTION,
          max_concurrent=args.max_concurrent, max_queue=args.queue, timeout=args.timeout,
          drain_timeout=args.drain_timeout, max_body_bytes=args.max_body_bytes,
          max_json_depth=args.max_json_depth, max_question_chars=args.max_question_chars,
          otlp_endpoint=args.otlp_endpoint, config=args.config,
          overrides=merge_flags({}, args, SERVE_FLAGS), served_model=args.served_model_name,
          say=lambda line: console.print(line, markup=False, highlight=False))
    return 0


def _api_keys(args: argparse.Namespace) -> Any:
    """The keys of --api-key, --api-key-env or --api-key-file (one of them), checked
    before anything starts: an empty key is refused (exit 2)."""
    from credo.errors import UserError
    from credo.serve.app import ApiKeys, keys_from_environment

    given = [f for f in ("api_key", "api_key_env", "api_key_file")
             if getattr(args, f) is not None]
    if len(given) > 1:
        raise UserError(f"--{given[0].replace('_', '-')} and --{given[1].replace('_', '-')}"
                        ": give the keys one way")
    if args.api_key is not None:
        return ApiKeys([args.api_key], where="--api-key")
    if args.api_key_env is not None:
        return ApiKeys(keys_from_environment(args.api_key_env),
                       where=f"--api-key-env {args.api_key_env}")
    if args.api_key_file is not None:
        return ApiKeys(file=args.api_key_file, where="--api-key-file")
    return None
