"""Claim methods: a credibility in [0, 1] for every claim of a long answer.

Each method is a pure function of one item's :class:`~credo.plan.claims.ClaimEvidence`
(cached generations only) returning one score per claim (higher = more credible; NaN
where the method has no evidence for a claim), registered in :data:`CLAIM_METHODS` with
the evidence it needs (:class:`ClaimMethod`), so a run plans only the stages its claim
methods need. Notation: for claim ``j``, ``v_jk`` in {+1 support, 0 neither, -1
contradict} is the judge's verdict on sample ``k`` (unreadable verdicts left out).

``frequency``   Mohri & Hashimoto 2024 (§4, "frequency"): the share of the item's *other
                original samples* supporting the claim, a contradiction cancelling a
                support: ``max(0, (S - C) / K)`` over the ``K`` readable verdicts. Without
                contradictions it is the paper's count of supporting samples over K.
``claim_c3``    C3's idea (Wu et al., §3) one level down: the same support measured under the
                *perturbed prompts'* samples, ``f_p``, against the original's, ``f_o``;
                ``min(f_o, f_p) = (f_o + f_p)/2 - |f_o - f_p|/2``: the mean support
                minus half its shift, so a claim the model drops when the context
                shifts is fragile, and one it asserts either way keeps its support.
``verbalized``  the model under test's stated probability that the claim is true
                (Tian et al. 2023; Mohri & Hashimoto's "GPT-4 confidence").
``ordinal``     the position baseline (Mohri & Hashimoto's ``baseline-score``): claim
                ``j`` of ``J`` (0-based) scores ``1 - j / J``; earlier claims first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from credo.plan.claims import ClaimEvidence
from credo.registry import Registry
from credo.ties import settle

__all__ = [
    "CLAIM_METHODS",
    "CONFIDENCE",
    "SUPPORT_ORIGINAL",
    "SUPPORT_PERTURBED",
    "ClaimMethod",
    "claim_method",
    "score_claims",
    "support_share",
]

SUPPORT_ORIGINAL = "support_original"
SUPPORT_PERTURBED = "support_perturbed"
CONFIDENCE = "confidence"
"""What a claim method reads: the support verdicts of the other original samples, of the
perturbed samples, and the verbalised confidence."""

ClaimScorer = Callable[[ClaimEvidence], list[float]]


@dataclass(frozen=True)
class ClaimMethod:
    """A registered claim method: its name, the evidence it needs, its scorer and one
    line for tables."""

    name: str
    needs: frozenset[str]
    score: ClaimScorer
    summary: str = ""


CLAIM_METHODS: Registry[ClaimMethod] = Registry("claim method")


def claim_method(name: str, needs: Sequence[str] = (), summary: str = ""
                 ) -> Callable[[ClaimScorer], ClaimScorer]:
    """Register the decorated scorer as claim method ``name`` needing ``needs``."""
    return CLAIM_METHODS.register(
        name, lambda fn: ClaimMethod(name, frozenset(needs), fn, summary))


def support_share(verdicts: Sequence[int | None]) -> float:
    """``max(0, (S - C) / K)`` over the readable verdicts (module docstring); NaN when
    none is readable."""
    read = [v for v in verdicts if v is not None]
    if not read:
        return math.nan
    return max(0.0, sum(read) / len(read))


@claim_method("frequency", [SUPPORT_ORIGINAL],
              "share of the other original samples supporting the claim")
def frequency(ev: ClaimEvidence) -> list[float]:
    """Mohri & Hashimoto's frequency score (module docstring)."""
    if not ev.original:
        return [math.nan] * len(ev.claims)
    return [support_share(row) for row in ev.original]


@claim_method("claim_c3", [SUPPORT_ORIGINAL, SUPPORT_PERTURBED],
              "support under the perturbed prompts against the original's: min of the two")
def claim_c3(ev: ClaimEvidence) -> list[float]:
    """``min(f_o, f_p)`` (module docstring); NaN without both."""
    if not ev.original or not ev.perturbed:
        return [math.nan] * len(ev.claims)
    out = []
    for o, p in zip(ev.original, ev.perturbed, strict=True):
        fo, fp = support_share(o), support_share(p)
        out.append(math.nan if math.isnan(fo) or math.isnan(fp) else min(fo, fp))
    return out


@claim_method("verbalized", [CONFIDENCE], "the model's stated probability the claim is true")
def verbalized(ev: ClaimEvidence) -> list[float]:
    if not ev.confidence:
        return [math.nan] * len(ev.claims)
    return [math.nan if c is None else float(c) for c in ev.confidence]


@claim_method("ordinal", [], "position baseline: 1 - j/J for claim j of J")
def ordinal(ev: ClaimEvidence) -> list[float]:
    n = len(ev.claims)
    return [1.0 - j / n for j in range(n)]


def score_claims(ev: ClaimEvidence, methods: Sequence[str]) -> dict[str, list[float]]:
    """Every method of ``methods`` on ``ev``: name -> one score per claim, settled
    (:func:`credo.ties.settle`: claims scored equal within rounding tie)."""
    out = {}
    for name in methods:
        scores = CLAIM_METHODS[name].score(ev)
        if len(scores) != len(ev.claims):
            raise ValueError(f"claim method {name!r} gave {len(scores)} scores for "
                             f"{len(ev.claims)} claims")
        out[name] = [settle(float(v)) for v in scores]
    return out
