"""``credo certify RUN_DIR``: a threshold on a finished run's scores with a guarantee
(issue 23): answer the items whose score is at least the threshold, and the error rate
among the answered ones is at most α with probability at least 1 − δ."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

__all__ = ["add_certify_parser", "cmd_certify"]


def add_certify_parser(sub: Any) -> None:
    """Register ``credo certify`` on the top-level subparsers."""
    c = sub.add_parser(
        "certify",
        help="a score threshold with a guarantee: risk <= alpha among accepted answers",
        description=(
            "Certify, on a finished labelled run, the threshold of one method's scores above "
            "which its answers are acted on: for new items from the same distribution, "
            "answered with the same model and settings, the error rate among accepted "
            "answers is at most ALPHA with probability at least 1 - DELTA (Learn then Test "
            "with exact binomial tails; assumes exchangeable items). The file records what "
            "must match when `credo run --certificate` uses it."
        ),
    )
    c.add_argument("run", type=Path, metavar="RUN_DIR")
    c.add_argument("--method", required=True, help="the scores to threshold, e.g. "
                   "self_consistency")
    c.add_argument("--alpha", type=float, default=0.1, help="risk: the most errors among "
                   "accepted answers (default 0.1)")
    c.add_argument("--delta", type=float, default=0.1, help="the chance the guarantee "
                   "fails over the calibration draw (default 0.1)")
    c.add_argument("--procedure", default="ltt", help="ltt (default), sgr, fixed-sequence, "
                   "or crc (expected risk, no delta)")
    c.add_argument("--out", type=Path, help="certificate file (default RUN_DIR/certificate.json)")
    c.set_defaults(func=cmd_certify)


def cmd_certify(args: argparse.Namespace) -> int:
    """Certify, write the file, print the threshold and coverage (exit 0 even when nothing
    could be certified: the file says so, and ``credo run --certificate`` accepts none)."""
    from credo.api import certify_run
    from credo.errors import UserError

    if not 0.0 < args.alpha < 1.0 or not 0.0 < args.delta < 1.0:
        raise UserError("--alpha and --delta must lie strictly between 0 and 1")
    out = args.out or args.run / "certificate.json"
    try:
        cert = certify_run(args.run, args.method, alpha=args.alpha, delta=args.delta,
                           procedure=args.procedure, out=out)
    except ValueError as e:  # a procedure name or level the evaluation refuses
        raise UserError(f"credo certify: {e}") from None
    c = cert.certificate
    console = Console(soft_wrap=True)
    if c.threshold is None:
        console.print(f"nothing certified for {args.method} at alpha={c.alpha:g}, "
                      f"delta={c.delta}: {c.message}", markup=False, highlight=False)
    else:
        console.print(
            f"{args.method}: answer when score >= {c.threshold:.4g}; covers {c.coverage:.1%} "
            f"of {c.n} calibration items with selective risk <= {c.alpha:g} at confidence "
            f"{1 - (c.delta or 0):.0%} ({c.method})", markup=False, highlight=False)
    console.print(f"certificate: {out}", markup=False, highlight=False)
    return 0
