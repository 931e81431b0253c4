"""``credo certify RUN_DIR``: a threshold on a finished run's scores with a guarantee
(issue 23): answer the items whose score is at least the threshold, and the error rate
among the answered ones is at most α with probability at least 1 − δ."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:
    from credo.evaluate.certify import Certificate

__all__ = ["add_certify_parser", "certified_line", "cmd_certify"]


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
    except UserError:
        raise  # names its file or option already
    except ValueError as e:  # a procedure name or level the evaluation refuses
        raise UserError(f"credo certify: {e}") from None
    c = cert.certificate
    console = Console(soft_wrap=True)
    console.print(certified_line(args.method, c), markup=False, highlight=False)
    console.print(f"certificate: {out}", markup=False, highlight=False)
    return 0


def certified_line(method: str, c: Certificate) -> str:
    """What was certified, in one line, with the guarantee the procedure gives: selective
    risk at confidence 1 − δ, or for conformal risk control (``crc``) the expected share
    of answered-and-wrong items, which holds in expectation and has no δ (issue 34)."""
    if c.method == "crc":
        level = f"alpha={c.alpha:g} (in expectation; crc has no delta)"
        risk = (f"expected share of answered-and-wrong items <= {c.alpha:g}, in expectation "
                "over the calibration draw (crc: no delta)")
    else:
        level = f"alpha={c.alpha:g}, delta={c.delta:g}"
        risk = (f"selective risk <= {c.alpha:g} at confidence {1 - (c.delta or 0):.0%}")
    if c.threshold is None:
        return f"nothing certified for {method} at {level}: {c.message}"
    return (f"{method}: answer when score >= {c.threshold:.4g}; covers {c.coverage:.1%} of "
            f"{c.n} calibration items; {risk} ({c.method})")
