"""``credo certify-claims FILE`` and ``credo filter-claims CERT FILE``: which
claims of long answers to keep, with Mohri & Hashimoto's conformal factuality guarantee
(docs/claims.md)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from rich.console import Console

from credo.cli.command import command

__all__ = ["cmd_certify_claims", "cmd_filter_claims"]


def _certify_claims_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, metavar="FILE", help="annotated claim file")
    p.add_argument("--alpha", type=float, default=0.1,
                   help="the allowed share of answers whose retained claims fail (default 0.1)")
    p.add_argument("--a", type=float, default=1.0, dest="share",
                   help="the share of retained claims that must be correct (default 1: all)")
    p.add_argument("--delta", type=float,
                   help="high-probability variant: the chance the calibration draw misleads")
    p.add_argument("--score", help="the claim score to threshold, e.g. frequency+gpt-score "
                   "(default: the only score the claims have)")
    p.add_argument("--tie-break", help="a per-claim value added to the score to break ties, "
                   "e.g. noise (the paper's)")
    p.add_argument("--out", type=Path, help="certificate file (default: print only)")


def _filter_claims_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("certificate", type=Path, metavar="CERT",
                   help="a claim certificate from `credo certify-claims`")
    p.add_argument("file", type=Path, metavar="FILE", help="claim file with the same score")
    p.add_argument("--out", type=Path, required=True, help="JSON Lines output")


@command(
    "certify-claims",
    help="a claim-score threshold: the retained claims of a new answer are all correct "
    "with probability >= 1 - alpha",
    description=(
        "Calibrate, on an annotated claim file (docs/claims.md: JSON Lines or JSON, the "
        "paper's released files included), the threshold above which claims are kept: "
        "for a new answer from the same distribution, every retained claim is correct "
        "(or at least a share A of them) with probability at least 1 - ALPHA (split "
        "conformal calibration over items, Mohri & Hashimoto 2024); with --delta, with "
        "probability 1 - DELTA over the calibration draw the share of new answers that "
        "fail is at most ALPHA (Learn then Test). Assumes exchangeable items."
    ),
    flags=_certify_claims_flags,
)
def cmd_certify_claims(args: argparse.Namespace) -> int:
    """Certify and print the threshold (exit 0 even when there is none: the message and
    the file say so and how many items would be needed)."""
    from credo.app.claims import certify_claim_file
    from credo.errors import UserError

    if not _level(args.alpha, open_top=True):
        raise UserError(f"--alpha must lie strictly between 0 and 1; got {args.alpha:g}")
    if not (_level(args.share, open_top=False)):
        raise UserError(f"--a must lie in (0, 1]; got {args.share:g}")
    if args.delta is not None and not _level(args.delta, open_top=True):
        raise UserError(f"--delta must lie strictly between 0 and 1; got {args.delta:g}")
    cert = certify_claim_file(args.file, args.alpha, a=args.share, delta=args.delta,
                              score=args.score, tie_break=args.tie_break, out=args.out)
    console = Console(soft_wrap=True)
    console.print(cert.message, markup=False, highlight=False)
    if args.out is not None:
        console.print(f"certificate: {args.out}", markup=False, highlight=False)
    return 0


@command(
    "filter-claims",
    help="keep, in each answer of a claim file, the claims a claim certificate retains",
    description="Apply a certificate from `credo certify-claims` to a claim file (labels "
    "not needed) and write one JSON row per answer: id, prompt, retained and removed "
    "claims.",
    flags=_filter_claims_flags,
)
def cmd_filter_claims(args: argparse.Namespace) -> int:
    from credo.app.claims import filter_claim_file

    done = filter_claim_file(args.certificate, args.file, args.out)
    Console(soft_wrap=True).print(
        f"{done.retained}/{done.claims} claims retained in {done.items} answers "
        f"({done.certificate.procedure}, alpha={done.certificate.alpha:g}); {done.out}",
        markup=False, highlight=False)
    return 0


def _level(x: float, *, open_top: bool) -> bool:
    return math.isfinite(x) and 0.0 < x and (x < 1.0 if open_top else x <= 1.0)
