"""LUQ: long-text uncertainty (Zhang et al., EMNLP 2024, "LUQ: Long-text Uncertainty
Quantification for LLMs"), each sentence of a sample checked against the other samples.

For sample a split into sentences s_1..s_J and every other sample b of the n,

    S(a, b) = (1/J) Σ_j P(s_j | b),     LUQ(a) = 1 − 1/(n−1) Σ_{b≠a} S(a, b),

where the paper's ``P(s | b)`` is an NLI model's entailment probability of sentence s
given b, normalised over entailment and contradiction. credo's is the embedding kernel
between the sentence and b's whole text (cosine similarity, clipped at 0): a
similarity, not an entailment, so a sentence that restates b's topic with another fact
scores higher than an NLI would give it. The credibility is ``1 − LUQ(a) = 1/(n−1)
Σ_{b≠a} S(a, b)`` in [0, 1] (a mean of kernel values), the response score of sample a;
the item's value is their mean (the paper's item uncertainty is the mean LUQ).

Sentences are credo's sentence split of long answers (:func:`credo.tasks.longform.claims`:
sentences of 3 words or more); a text without one is a single sentence. Under the
indicator kernel a sentence would count only where it equals another sample's whole
text, and the judge kernel judges answer pairs, not sentences, so the method scores with
the embedding kernel (``luq`` is ``luq@embedding``; no other kernel is accepted).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, ItemSamples, Score, mean_confidence, method
from credo.tasks.longform import claims as sentence_split

__all__ = ["luq_confidence", "score_luq", "sentences"]

EMBEDDING = "embedding"


def sentences(text: str) -> list[str]:
    """The sentences LUQ checks one by one: credo's sentence split of a long answer, or
    the whole text (stripped) when it has no sentence of 3 words."""
    found = sentence_split(text)
    return found if found else [text.strip()]


def luq_confidence(texts: Sequence[str], kernel: Kernel) -> list[float]:
    """``1 − LUQ(a)`` of every text (module docstring): the mean over the other texts b
    of the mean kernel between a's sentences and b. Needs 2 texts."""
    n = len(texts)
    if n < 2:
        raise ValueError(f"LUQ checks a sample against the others: needs 2, got {n}")
    out = []
    for a, text in enumerate(texts):
        others = [t for b, t in enumerate(texts) if b != a]
        gram = np.clip(np.asarray(kernel(sentences(text), others), dtype=float), 0.0, 1.0)
        out.append(mean_confidence([float(v) for v in gram.mean(axis=0)]))
    return out


@method("luq", needs=(ORIGINAL,), min_samples={ORIGINAL: 2}, kernel=EMBEDDING,
        summary="mean similarity of each sample's sentences to the other samples "
                "(LUQ, Zhang et al. 2024)")
def score_luq(samples: ItemSamples, kernel: Kernel) -> Score:
    """``1 − LUQ`` of every original sample (module docstring), in [0, 1]; the item's
    value their mean. Not available below 2 samples."""
    conf = luq_confidence([s.text for s in samples.sets[ORIGINAL]], kernel)
    return Score(mean_confidence(conf), tuple(conf), ORIGINAL)
