"""Claim-Conditioned Probability (Fadeeva et al. 2024; Müller et al., §3.5, App. A.11.3).

For every generated token the top-k alternatives are split by an NLI step into those
that entail the sampled token's claim and those that contradict it (neutral ones are
dropped). The token's confidence is ``CCP_t = Σ_{entail} p / (Σ_{entail} p + Σ_{contra}
p)``, the sampled token counting as entailing, and the sequence confidence is the
product over tokens (Müller et al., A.11.3, "multiplicative composition"). Müller et al.
report that this product collapses on long answers; it is implemented as stated, not patched.

Which alternatives are judged: those with probability at least ``min_prob`` whose text
differs from the sampled token's after stripping whitespace and case (equal ones entail
without a judgment). Alternatives below ``min_prob`` are ignored; they move CCP_t by
at most their probability mass. Tokens stand in for LM-Polygraph's words.
"""

from __future__ import annotations

import math

import numpy as np

from credo.kernels.registry import Kernel
from credo.methods.base import NLI, ORIGINAL, ItemSamples, Score, mean_confidence, method
from credo.plan.ccp_alternatives import DEFAULT_MIN_PROB, ccp_alternatives, same_word
from credo.types import TokenLogprob


def ccp_sequence(
    logprobs: tuple[TokenLogprob, ...],
    verdicts: dict[tuple[int, int], str | None],
    min_prob: float = DEFAULT_MIN_PROB,
) -> float:
    """Product over tokens of ``CCP_t`` given NLI ``verdicts[(position, rank)]``, in [0, 1].

    A verdict of ``"entail"`` adds the alternative's probability to both sums,
    ``"contradict"`` to the denominator only; ``"neutral"``, None (unparsable) and
    missing verdicts leave it out. The sums are taken in log space, so a token whose
    probability underflows (a logprob of −9999 or −inf, as servers report) is no 0/0:
    ``CCP_t`` is 1 when nothing contradicts the sampled token and 0 when only
    contradicting mass is left.
    """
    total = 1.0
    for pos, tl in enumerate(logprobs):
        entail = [tl.logprob]
        contra: list[float] = []
        for rank, (tok, lp) in enumerate(tl.top):
            if tok == tl.token:
                continue
            if same_word(tok, tl.token):
                entail.append(lp)
            elif math.exp(lp) >= min_prob:
                v = verdicts.get((pos, rank))
                if v == "entail":
                    entail.append(lp)
                elif v == "contradict":
                    contra.append(lp)
        total *= _entailing_share(entail, contra)
    return total


def _entailing_share(entail: list[float], contra: list[float]) -> float:
    """``Σ e^a / (Σ e^a + Σ e^b)`` over logprobs a (entailing) and b (contradicting)."""
    log_contra = _logsumexp(contra)
    if log_contra == -math.inf:
        return 1.0
    gap = log_contra - _logsumexp(entail)  # ln(Σ e^b / Σ e^a), +inf when Σ e^a = 0
    return 0.0 if gap > 700.0 else 1.0 / (1.0 + math.exp(gap))


def _readable(logprobs: tuple[TokenLogprob, ...]) -> bool:
    """No NaN among the logprobs (a malformed record has no confidence to read)."""
    return not any(math.isnan(tl.logprob) or any(math.isnan(lp) for _, lp in tl.top)
                   for tl in logprobs)


def _logsumexp(logs: list[float]) -> float:
    top = max(logs, default=-math.inf)
    if top == -math.inf:
        return -math.inf
    return top + math.log(math.fsum(math.exp(x - top) for x in logs))


@method(
    "ccp",
    needs=(ORIGINAL, NLI),
    summary="claim-conditioned probability: product of NLI-filtered token confidences",
    logprobs=True,
    min_samples={ORIGINAL: 1},
)
def score_ccp(samples: ItemSamples, kernel: Kernel) -> Score:
    """CCP per original sample in the follow-up scope that has logprobs (none NaN), each
    in [0, 1] (a product of shares); the item's value is their mean, in [0, 1].

    Reads ``samples.options["ccp_min_prob"]`` (the floor the NLI verdicts were planned
    with) and ``samples.options["followups"]`` (how many original samples were judged).
    """
    originals = samples.sets[ORIGINAL]
    min_prob = float(samples.options.get("ccp_min_prob", DEFAULT_MIN_PROB))
    scope = samples.options.get("followups") or len(originals)
    verdicts: dict[int, dict[tuple[int, int], str | None]] = {}
    for s in samples.sets[NLI]:
        if len(s.ref) == 3:  # (original sample, token position, alternative's rank)
            i, pos, rank = s.ref
            verdicts.setdefault(i, {})[(pos, rank)] = s.answer.value
    conf: list[float | None] = []
    for i, s in enumerate(originals):
        if i >= scope or not s.logprobs or not _readable(s.logprobs):
            conf.append(None)
        else:
            conf.append(ccp_sequence(s.logprobs, verdicts.get(i, {}), min_prob))
    vals = [c for c in conf if c is not None]
    if not vals:
        return Score(np.nan, tuple(conf), ORIGINAL, unavailable="no token logprobs")
    return Score(mean_confidence(vals), tuple(conf), ORIGINAL)

__all__ = ["DEFAULT_MIN_PROB", "ccp_alternatives", "ccp_sequence", "same_word", "score_ccp"]
