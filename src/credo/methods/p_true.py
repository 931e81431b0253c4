"""P(True) (Kadavath et al. 2022; Müller et al., §3.5).

Each original sample is shown back to the model as a proposed answer with the question
"Is the proposed answer: (A) True (B) False"; the confidence is the probability of the
True label normalised over the two labels, read from the first generated token's top
logprobs: ``P(True) = p(A) / (p(A) + p(B))``. Token variants (" A", "(A", "True") count
for their label. When neither label is among the top alternatives the sample has no
score (None).
"""

from __future__ import annotations

import math

import numpy as np

from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, P_TRUE, ItemSamples, Score, mean_confidence, method
from credo.tasks.followups import normalise_label_token
from credo.types import TokenLogprob

_TRUE = {"A", "TRUE"}
_FALSE = {"B", "FALSE"}


def p_true_from_logprobs(logprobs: tuple[TokenLogprob, ...] | None) -> float | None:
    """``p(True) / (p(True) + p(False))`` at the first token; None when unreadable."""
    if not logprobs:
        return None
    first = logprobs[0]
    alts = first.top or ((first.token, first.logprob),)
    p_true = p_false = 0.0
    for tok, lp in alts:
        if math.isnan(lp):  # no probability to read (a malformed record)
            continue
        label = normalise_label_token(tok)
        if label in _TRUE:
            p_true += math.exp(lp)
        elif label in _FALSE:
            p_false += math.exp(lp)
    if p_true + p_false <= 0.0:
        return None
    return p_true / (p_true + p_false)


@method(
    "p_true",
    needs=(ORIGINAL, P_TRUE),
    summary="probability of 'True' for the model's own answer (Kadavath et al.)",
    logprobs=True,
    min_samples={ORIGINAL: 1, P_TRUE: 1},
)
def score_p_true(samples: ItemSamples, kernel: Kernel) -> Score:
    """P(True) per original sample that was asked about, in [0, 1]; the item's value is
    their mean, in [0, 1] (NaN with the reason when no reply has a readable label)."""
    n = len(samples.sets[ORIGINAL])
    conf: list[float | None] = [None] * n
    for s in samples.sets[P_TRUE]:
        if s.ref and 0 <= s.ref[0] < n:  # a follow-up about an original sample there is
            conf[s.ref[0]] = p_true_from_logprobs(s.logprobs)
    vals = [c for c in conf if c is not None]
    if not vals:
        return Score(np.nan, tuple(conf), ORIGINAL, unavailable="no label among top logprobs")
    return Score(mean_confidence(vals), tuple(conf), ORIGINAL)
