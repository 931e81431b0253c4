"""Paraphrase consistency (Portillo Wightman et al. 2023; Wu et al., App. J).

The question is rephrased by an LLM (meaning-preserving paraphrases, ``perturb/
paraphrase.py``), the model answers each paraphrase, and the score is the generalized
consistency of those answers, ``C(Y) = 1/(K(K-1)) Σ_i Σ_{j≠i} k(y_i, y_j)`` (Wu et al., eq. 2).
"""

from __future__ import annotations

from credo.kernels.registry import Kernel
from credo.methods.base import PARAPHRASED, ItemSamples, Score, method
from credo.methods.self_consistency import self_consistency


@method(
    "paraphrase",
    needs=(PARAPHRASED,),
    summary="agreement of answers to LLM paraphrases of the question (Wu et al., App. J)",
    min_samples={PARAPHRASED: 2},
)
def score_paraphrase(samples: ItemSamples, kernel: Kernel) -> float | Score:
    """Generalized consistency over the answers to the paraphrased prompts, in [0, 1]: 1
    when they all agree. Not available below 2 paraphrased samples."""
    answers = samples.answers(PARAPHRASED)
    if len(answers) < 2:
        return Score.not_available(f"{len(answers)} paraphrased samples; 2 are needed")
    return self_consistency(answers, kernel)
