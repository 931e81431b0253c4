"""``credo certify-claims`` and ``credo filter-claims`` (conformal factuality on claim
files): :func:`certify_claim_file` certifies a claim threshold on an annotated claim
file, :func:`filter_claim_file` applies a claim certificate to one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from credo import jsonio
from credo.errors import UserError

if TYPE_CHECKING:
    from credo.evaluate.claims import ClaimCertificate

__all__ = ["ClaimFilterResult", "certify_claim_file", "filter_claim_file"]


@dataclass(frozen=True)
class ClaimFilterResult:
    """What ``credo filter-claims`` wrote: items, claims in them, claims retained."""

    certificate: ClaimCertificate
    items: int
    claims: int
    retained: int
    out: Path


def certify_claim_file(
    path: str | Path,
    alpha: float = 0.1,
    *,
    a: float = 1.0,
    delta: float | None = None,
    score: str | None = None,
    tie_break: str | None = None,
    out: str | Path | None = None,
    option: str = "--score",
) -> ClaimCertificate:
    """:func:`credo.evaluate.claims.certify_claims` on the annotated claim file at ``path``
    (:func:`credo.tasks.claims.read_claims`), written to ``out`` when given (the
    certificate's fields and ``calibration_file``). A malformed file, an unlabelled claim
    or a score a claim lacks is a :class:`~credo.errors.UserError` naming the file and
    item; nothing is written then. ``out`` is checked before the file is read: a folder
    that cannot take it, or ``out`` being the claim file itself, is a user error; the
    missing folders above it are made. ``option`` is the flag that names the score (the
    message asking for one names it: ``credo certify --claims`` takes ``--method``)."""
    from credo.evaluate.claims import certify_claims
    from credo.pipeline.certificate import write_certificate
    from credo.tasks.claims import read_claims, score_names

    if out is not None:
        jsonio.check_not_input(out, [path], "the certificate (--out)")
        jsonio.check_file_writable(out, "the certificate (--out)")
    items = read_claims(path)
    names = score_names(items)
    if score is None and any(item.claims for item in items) and len(names) != 1:
        have = f"{len(names)}: {', '.join(names)}" if names else "none in common"
        raise UserError(f"{path}: name the claim score to threshold with {option}: the "
                        f"claims have {have}")
    try:
        cert = certify_claims(items, alpha, a=a, delta=delta, score=score, tie_break=tie_break)
    except ValueError as e:
        raise UserError(f"{e}" if str(path) in str(e) else f"{path}: {e}") from None
    if out is not None:
        write_certificate(out, {**cert.to_dict(), "calibration_file": str(path)}, indent=2,
                          strict=True)
    return cert


def filter_claim_file(
    certificate: str | Path, path: str | Path, out: str | Path
) -> ClaimFilterResult:
    """Apply the claim certificate in the file ``certificate`` to the claim file at
    ``path`` (labels not needed) and write one JSON row per item to ``out``: ``id``,
    ``prompt``, ``retained`` and ``removed`` claims (text, scores, label when known).
    ``out`` is checked first: neither input, and a folder that takes it (the missing
    folders above it are made)."""
    from credo.evaluate.claims import apply_claim_certificate
    from credo.pipeline.certificate import read_claim_certificate
    from credo.tasks.claims import read_claims

    jsonio.check_not_input(out, [certificate, path], "the filtered claims (--out)")
    jsonio.check_file_writable(out, "the filtered claims (--out)")
    cert = read_claim_certificate(certificate)
    items = read_claims(path)
    try:
        filtered = apply_claim_certificate(cert, items)
    except ValueError as e:
        raise UserError(f"{e}") from None
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    jsonio.write_jsonl(out, [f.to_dict() for f in filtered])
    return ClaimFilterResult(cert, len(items), sum(len(i.claims) for i in items),
                             sum(len(f.retained) for f in filtered), Path(out))
