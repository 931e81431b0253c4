"""``credo toy-server``: the loopback toy model the tutorials run against
(:mod:`credo.devtools.toy_server`), until Ctrl-C."""

from __future__ import annotations

import argparse

from rich.console import Console

from credo.cli.command import command

__all__ = ["cmd_toy_server"]


def _toy_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=8000,
                   help="the port to listen on (default 8000: the tutorials' "
                   "http://localhost:8000/v1)")
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--ignore-seeds", action="store_true",
                   help="answer like a server that ignores seeds: each repeat of one request "
                   "is a fresh draw, as lm-eval's repeats and inspect's epochs expect")


@command(
    "toy-server",
    help="start a small loopback model that answers sums, to try credo without a model",
    description="Serve a toy model behind an OpenAI-compatible API on this machine, so the "
    "tutorials and your first runs work without a model of your own: it answers sums "
    "right more often when the numbers are small, and writes context prefixes when asked. "
    "Point credo at it with --model openai:NAME --base-url http://localhost:8000/v1 (any "
    "NAME). It runs until Ctrl-C.",
    flags=_toy_flags,
)
def cmd_toy_server(args: argparse.Namespace) -> int:
    """Listen until interrupted; exit 2 (a user error) when the port is taken."""
    from credo.devtools.toy_server import ToyModelServer
    from credo.errors import UserError

    try:
        server = ToyModelServer(port=args.port, host=args.host,
                                ignore_seeds=args.ignore_seeds)
    except OSError as e:
        raise UserError(f"--port {args.port}: cannot listen on {args.host}:{args.port} "
                        f"({e.strerror or e}); choose another port") from None
    console = Console(soft_wrap=True)
    console.print(f"toy model at {server.url} (any model name; Ctrl-C stops it)",
                  markup=False, highlight=False)
    try:
        server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0
