"""``credo certify RUN_DIR``: a threshold on a finished run's scores with a guarantee: answer the
items whose score is at least the threshold, and the error rate
among the answered ones is at most α with probability at least 1 − δ."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from credo.cli.command import command

if TYPE_CHECKING:
    from credo.evaluate.certify import Certificate

__all__ = ["adaptive_line", "add_adaptive_decision_flags", "certified_line", "cmd_certify"]


def _certify_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", type=Path, metavar="RUN_DIR",
                   help="a finished run with gold answers (the calibration run)")
    p.add_argument("--method", help="the scores to threshold, e.g. self_consistency "
                   "(with --claims: the claim method, e.g. frequency; default the only one)")
    p.add_argument("--claims", action="store_true",
                   help="a claim certificate from the run's claims.jsonl (see the "
                   "claim-level factuality page): keep claims scoring above a threshold so "
                   "that every retained claim of a new answer is correct with probability "
                   ">= 1 - alpha (conformal; with --procedure ltt, with probability 1 - "
                   "delta)")
    p.add_argument("--a", type=float, dest="share",
                   help="with --claims: the share of retained claims that must be correct")
    p.add_argument("--alpha", type=float, default=0.1, help="risk: the most errors among "
                   "accepted answers (default 0.1)")
    p.add_argument("--delta", type=float, default=0.1, help="the chance the guarantee "
                   "fails over the calibration draw (default 0.1)")
    p.add_argument("--procedure", help="ltt (default), sgr, fixed-sequence, or crc "
                   "(expected risk, no delta); with --claims conformal (default) or ltt")
    p.add_argument("--out", type=Path, help="certificate file (default RUN_DIR/certificate.json)")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="certify an incomplete run or score folder on the items that "
                   "finished (refused otherwise); the certificate records it")
    p.add_argument("--adaptive", choices=["decision"],
                   help="certify the adaptive decision procedure as it runs (what `credo "
                   "serve` does): replayed from the run's cache at every candidate threshold "
                   "(sample in rounds until the score's side of it is settled, accept when "
                   "the final score is at or above it), no model call; Learn then Test over "
                   "those decisions")
    add_adaptive_decision_flags(p)


def add_adaptive_decision_flags(p: argparse.ArgumentParser) -> None:
    """``--adaptive-round``, ``--adaptive-min``, ``--adaptive-confidence``: the adaptive
    decision rule's settings, as ``credo certify --adaptive decision`` replays it and
    ``credo serve`` runs it."""
    p.add_argument("--adaptive-round", type=int, help="samples per round (default 4)")
    p.add_argument("--adaptive-min", type=int, help="samples before the rule is read "
                   "(default 4)")
    p.add_argument("--adaptive-confidence", type=float,
                   help="the rule's predictive interval level (default 0.95)")


@command(
    "certify",
    help="a score threshold with a guarantee: risk <= alpha among accepted answers",
    description=(
        "Decide which answers to act on. On a finished run with gold answers, find the "
        "score threshold above which at most ALPHA of the accepted answers are wrong, with "
        "probability at least 1 - DELTA, and write it as a certificate. `credo run "
        "--certificate` and `credo serve` then accept or abstain on new questions of the "
        "same task, asked the same model with the same settings. (Learn then Test with "
        "exact binomial tails; it assumes the new questions are drawn like the "
        "calibration ones.)"
    ),
    flags=_certify_flags,
)
def cmd_certify(args: argparse.Namespace) -> int:
    """Certify, write the file, print the threshold and coverage (exit 0 even when nothing
    could be certified: the file says so, and ``credo run --certificate`` accepts none)."""
    from credo.app.certify import certify_run
    from credo.errors import UserError

    if not 0.0 < args.alpha < 1.0 or not 0.0 < args.delta < 1.0:
        raise UserError("--alpha and --delta must lie strictly between 0 and 1")
    _refuse_other_modes(args)
    if args.claims:
        return _certify_claims(args)
    if args.method is None:
        raise UserError("credo certify: --method is required (or --claims)")
    args.procedure = args.procedure or "ltt"
    out = args.out or args.run / "certificate.json"
    replay = None
    try:
        if args.adaptive:
            from credo.app.certify import certify_adaptive

            options = {k: v for k, v in (("round", args.adaptive_round),
                                         ("min", args.adaptive_min),
                                         ("confidence", args.adaptive_confidence))
                       if v is not None}
            made = certify_adaptive(args.run, args.method, alpha=args.alpha, delta=args.delta,
                                    procedure=args.procedure, options=options, out=out,
                                    allow_incomplete=args.allow_incomplete)
            cert, replay = made.certificate, made.replay
        else:
            cert = certify_run(args.run, args.method, alpha=args.alpha, delta=args.delta,
                               procedure=args.procedure, out=out,
                               allow_incomplete=args.allow_incomplete)
    except UserError:
        raise  # names its file or option already
    except ValueError as e:  # a procedure name or level the evaluation refuses
        raise UserError(f"credo certify: {e}") from None
    c = cert.certificate
    console = Console(soft_wrap=True)
    console.print(certified_line(args.method, c), markup=False, highlight=False)
    if replay is not None:
        console.print(adaptive_line(replay), markup=False, highlight=False)
    if cert.incomplete is not None:
        console.print(incomplete_line(cert.incomplete), markup=False, highlight=False)
    console.print(f"certificate: {out}", markup=False, highlight=False)
    return 0


def incomplete_line(incomplete: dict[str, Any]) -> str:
    """What a certificate made with ``--allow-incomplete`` says of its folder."""
    left = incomplete.get("items_incomplete")
    return (f"calibrated on an {incomplete.get('status', 'incomplete')} folder "
            f"(--allow-incomplete{f': {left} items left out' if left else ''}): the "
            "guarantee holds for items like those that finished; the certificate records it")


def _certify_claims(args: argparse.Namespace) -> int:
    """``credo certify RUN_DIR --claims``: the claim certificate, its line, its file."""
    from credo.app.certify import certify_run_claims
    from credo.errors import UserError

    procedure = args.procedure or "conformal"
    if procedure not in ("conformal", "ltt"):
        raise UserError(f"--procedure {procedure!r}: with --claims conformal or ltt")
    if args.adaptive:
        raise UserError("--adaptive and --claims do not go together")
    args.share = 1.0 if args.share is None else args.share
    if not 0.0 < args.share <= 1.0:
        raise UserError(f"--a must lie in (0, 1]; got {args.share:g}")
    out = args.out or args.run / "claim_certificate.json"
    cert = certify_run_claims(args.run, args.method, alpha=args.alpha, a=args.share,
                              delta=args.delta if procedure == "ltt" else None, out=out,
                              allow_incomplete=args.allow_incomplete)
    console = Console(soft_wrap=True)
    console.print(cert.message, markup=False, highlight=False)
    console.print(f"certificate: {out}", markup=False, highlight=False)
    return 0


_MODE_FLAGS = (
    ("share", "--a", "claims", "--claims"),
    ("adaptive_round", "--adaptive-round", "adaptive", "--adaptive decision"),
    ("adaptive_min", "--adaptive-min", "adaptive", "--adaptive decision"),
    ("adaptive_confidence", "--adaptive-confidence", "adaptive", "--adaptive decision"),
)
"""The flags that apply to one mode of ``credo certify`` only: (attribute, flag, the
mode's attribute, the mode's flag)."""


def _refuse_other_modes(args: argparse.Namespace) -> None:
    """A :class:`~credo.errors.UserError` naming a flag given without the mode it
    belongs to (``--a`` without ``--claims``): the certificate would silently ignore it."""
    from credo.errors import UserError

    for dest, flag, mode, mode_flag in _MODE_FLAGS:
        if getattr(args, dest, None) is not None and not getattr(args, mode, None):
            raise UserError(f"{flag} applies to {mode_flag} only, which is not given; "
                            f"add {mode_flag} or leave {flag} out")


def adaptive_line(replay: Any) -> str:
    """What the adaptive decision procedure drew at the certified threshold, against the
    full recipe, on the calibration items."""
    rule = replay.rule
    head = (f"adaptive decision (rounds of {rule.round} from {rule.min}, confidence "
            f"{rule.confidence:g}): {replay.replays} replays from the cache")
    if replay.certificate.threshold is None:
        return head
    return (f"{head}; at the threshold it draws {replay.sample_share:.0%} of the full "
            f"recipe's samples and takes the full recipe's decision on "
            f"{replay.agreement:.0%} of the {len(replay.items)} calibration items")


def certified_line(method: str, c: Certificate) -> str:
    """What was certified, in one line, with the guarantee the procedure gives: selective
    risk at confidence 1 − δ, or for conformal risk control (``crc``) the expected share
    of answered-and-wrong items, which holds in expectation and has no δ."""
    if c.procedure == "crc":
        level = f"alpha={c.alpha:g} (in expectation; crc has no delta)"
        risk = (f"expected share of answered-and-wrong items <= {c.alpha:g}, in expectation "
                "over the calibration draw (crc: no delta)")
    else:
        level = f"alpha={c.alpha:g}, delta={c.delta:g}"
        risk = (f"selective risk <= {c.alpha:g} at confidence {1 - (c.delta or 0):.0%}")
    if c.threshold is None:
        return f"nothing certified for {method} at {level}: {c.message}"
    return (f"{method}: answer when score >= {c.threshold:.4g}; covers {c.coverage:.1%} of "
            f"{c.n} calibration items; {risk} ({c.procedure})")
