"""Semantic density (Qiu & Miikkulainen, NeurIPS 2024): how much of the model's
probability mass lies near a response in semantic space.

For a response y and the distinct sampled responses u (each counted once, Qiu &
Miikkulainen §3.3, as LM-Polygraph's and UQLM's do: "unique" samples),

    SD(y) = Σ_u p̃(u) K(y, u) / Σ_u p̃(u),    p̃(u) = p(u | x)^{1/L_u}

where p̃ is the length-normalised sequence probability (the geometric mean of u's L_u
token probabilities, from its own logprobs) and K a kernel in [0, 1] with K(y, y) = 1.
The paper's kernel is ``1 − E[‖v − v'‖²]`` from an NLI model's three probabilities
(entailment 0, neutral ½, contradiction 1); credo's is the run's kernel on the answers
(indicator, embedding or judge: the judge's yes/no is an NLI whose verdicts are certain).
SD is a probability-weighted mean of kernel values, so it lies in [0, 1] as it is:
1 when every sample agrees with y, 0 when none does.

The paper scores one target response per question; credo has n samples and no greedy
one, so every original sample is a target in turn (the response scores) and the item's
value is their mean. A sample's own text is among the distinct responses (K = 1 with
itself), as LM-Polygraph adds its greedy response to the references with kernel 1.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np

from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, ItemSamples, Score, mean_confidence, method
from credo.types import TokenLogprob

__all__ = ["normalised_probability", "score_semantic_density", "semantic_density"]


def normalised_probability(logprobs: Sequence[TokenLogprob] | None) -> float | None:
    """``p̃ = exp(mean token logprob)``, the geometric mean of the tokens' probabilities
    (Qiu & Miikkulainen, §3.3's length normalisation); None without logprobs or with a
    NaN among them."""
    if not logprobs:
        return None
    values = [t.logprob for t in logprobs]
    if any(math.isnan(v) for v in values):
        return None
    return math.exp(math.fsum(values) / len(values))


def semantic_density(
    answers: Sequence[Hashable | None],
    texts: Sequence[str],
    probabilities: Sequence[float | None],
    kernel: Kernel,
) -> list[float] | None:
    """``SD`` of each answer (module docstring) against the distinct texts among the
    samples that have a probability (``probabilities[i]``: p̃ of sample i, None without
    logprobs). A text's p̃ is the mean over its samples' (one model's samples of one text
    have the same tokens, so the same p̃; the mean keeps the score independent of the
    samples' order), and its answer the first of its samples'. Sums are exactly rounded
    (``math.fsum``). None when no sample has a probability, or all are 0 (underflow)."""
    weights: dict[str, list[float]] = {}
    first: dict[str, int] = {}
    for i, (text, p) in enumerate(zip(texts, probabilities, strict=True)):
        if p is not None:
            weights.setdefault(text, []).append(p)
            first.setdefault(text, i)
    w = [math.fsum(v) / len(v) for v in weights.values()]
    total = math.fsum(w)
    if not w or total <= 0.0:
        return None
    refs = [answers[i] for i in first.values()]
    gram = np.asarray(kernel(list(answers), refs), dtype=float)
    return [min(max(math.fsum(float(k) * p for k, p in zip(row, w, strict=True)) / total,
                    0.0), 1.0) for row in gram]


@method("semantic_density", needs=(ORIGINAL,), logprobs=True, min_samples={ORIGINAL: 2},
        summary="probability-weighted kernel density of the samples around each one "
                "(Qiu & Miikkulainen 2024)")
def score_semantic_density(samples: ItemSamples, kernel: Kernel) -> Score:
    """Semantic density of each original sample (module docstring), in [0, 1]; the
    item's value their mean. Not available when no sample has logprobs."""
    originals = samples.sets[ORIGINAL]
    probs = [normalised_probability(s.logprobs) for s in originals]
    density = semantic_density([s.key for s in originals], [s.text for s in originals],
                               probs, kernel)
    if density is None:
        return Score.not_available("no sample has token logprobs")
    return Score(mean_confidence(density), tuple(density), ORIGINAL)
