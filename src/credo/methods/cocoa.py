"""CoCoA: confidence and consistency combined (Vashurin et al. 2025, "Uncertainty
quantification for LLMs through minimum Bayes risk: bridging confidence and
consistency").

For a response y, its confidence-based uncertainty u(y) and its mean dissimilarity to
the other samples,

    U_CoCoA(y) = u(y) · (1/M) Σ_j (1 − s(y, y_j)),

with ``u = −ln p(y | x)`` (``cocoa``, the paper's CoCoA_MSP) or ``u = −(1/L) ln p(y | x)``,
the log-perplexity (``cocoa_ppl``, CoCoA_PPL), and s a similarity in [0, 1]: the run's
kernel on the answers. U lies in [0, ∞), 0 for a certain response (p = 1) or one that
every other sample agrees with. credo's credibility is

    c(y) = exp(−U_CoCoA(y)) = p(y)^{D(y)}   (``cocoa_ppl``: p̃(y)^{D(y)}),

a decreasing function of U (the same ranking, every threshold on c one on U) in (0, 1]:
the sequence probability discounted by disagreement, 1 when the samples agree with y, p(y)
when none does (D(y) is the mean dissimilarity).

The paper's y is the greedy response and the M others are samples; credo has n samples
and no greedy one, so each original sample with logprobs is y in turn against the other
n − 1 (the response scores), and the item's value is their mean.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np

from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, ItemSamples, Score, mean_confidence, method
from credo.types import TokenLogprob

__all__ = ["cocoa", "mean_dissimilarity", "score_cocoa", "score_cocoa_ppl"]


def mean_dissimilarity(answers: Sequence[Hashable | None], kernel: Kernel) -> np.ndarray:
    """``D(y_i) = 1/(n−1) Σ_{j≠i} (1 − k(y_i, y_j))`` per answer, in [0, 1]. Needs 2."""
    n = len(answers)
    if n < 2:
        raise ValueError(f"CoCoA compares a response with the others: needs 2, got {n}")
    gram = np.clip(np.asarray(kernel(list(answers), list(answers)), dtype=float), 0.0, 1.0)
    off = gram.sum(axis=1) - np.diag(gram)
    return np.clip(1.0 - off / (n - 1), 0.0, 1.0)


def cocoa(
    logprobs: Sequence[Sequence[TokenLogprob] | None],
    dissimilarity: Sequence[float],
    per_token: bool = False,
) -> list[float | None]:
    """``exp(−u_i · D_i)`` per response (module docstring): ``u_i = −Σ_t ln p_t`` (or its
    mean over the L tokens with ``per_token``); None for a response without logprobs
    or with a NaN among them."""
    out: list[float | None] = []
    for lps, d in zip(logprobs, dissimilarity, strict=True):
        values = [t.logprob for t in lps] if lps else []
        if not values or any(math.isnan(v) for v in values):
            out.append(None)
            continue
        u = -math.fsum(values) / (len(values) if per_token else 1)
        # agreement with every sample (D = 0) leaves no uncertainty, even where p = 0
        out.append(1.0 if d <= 0.0 else math.exp(-max(u, 0.0) * float(d)))
    return out


def _score(samples: ItemSamples, kernel: Kernel, per_token: bool) -> Score:
    originals = samples.sets[ORIGINAL]
    d = mean_dissimilarity([s.key for s in originals], kernel)
    conf = cocoa([s.logprobs for s in originals], d, per_token)
    known = [c for c in conf if c is not None]
    if not known:
        return Score.not_available("no sample has token logprobs")
    return Score(mean_confidence(known), tuple(conf), ORIGINAL)


@method("cocoa", needs=(ORIGINAL,), logprobs=True, min_samples={ORIGINAL: 2},
        summary="p(y)^D(y): sequence probability discounted by the samples' disagreement "
                "(CoCoA_MSP, Vashurin et al. 2025)")
def score_cocoa(samples: ItemSamples, kernel: Kernel) -> Score:
    """CoCoA_MSP of each original sample with logprobs, ``exp(−U)`` in (0, 1] (module
    docstring); the item's value their mean. Not available when no sample has logprobs."""
    return _score(samples, kernel, per_token=False)


@method("cocoa_ppl", needs=(ORIGINAL,), logprobs=True, min_samples={ORIGINAL: 2},
        summary="p̃(y)^D(y): per-token probability discounted by the samples' "
                "disagreement (CoCoA_PPL, Vashurin et al. 2025)")
def score_cocoa_ppl(samples: ItemSamples, kernel: Kernel) -> Score:
    """CoCoA_PPL of each original sample with logprobs: the geometric mean token
    probability raised to the mean dissimilarity, in (0, 1]; the item's value their
    mean. Not available when no sample has logprobs."""
    return _score(samples, kernel, per_token=True)
