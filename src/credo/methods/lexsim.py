"""Lexical similarity of the samples (Fomicheva et al. 2020; Kuhn et al. 2023's baseline;
LM-Polygraph's ``LexicalSimilarity``): the mean ROUGE-L F-measure over pairs of the
original samples' texts.

ROUGE-L (Lin 2004) of two token sequences a and b is the F-measure of their longest
common subsequence: ``P = LCS/|b|``, ``R = LCS/|a|``, ``F = 2PR/(P + R)`` (0 when the
LCS is empty), symmetric in a and b. Texts are tokenised as the ``rouge_score`` package
tokenises them: lower case, every run of characters other than ``a-z0-9`` a separator.
Unlike LM-Polygraph's default (``use_stemmer=True``) no stemmer is applied: "runs" and
"run" are different words here (a Porter stemmer is not among credo's dependencies).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, ItemSamples, Score, mean_confidence, method

__all__ = ["lcs_length", "lexical_similarity", "rouge_l", "tokens"]

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def tokens(text: str) -> list[str]:
    """The words of ``text`` as ``rouge_score``'s tokenizer makes them (no stemming):
    lower case, split at every run of characters other than ``a-z0-9``."""
    return _NON_ALNUM.sub(" ", text.lower()).split()


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of ``a`` and ``b``, bit-parallel
    (Allison & Dix 1986; Hyyrö 2004): one machine word per 64 tokens of ``a`` for each
    token of ``b``, instead of the dynamic programme's ``|a|·|b|`` cells. Bit ``i`` of
    ``v`` is 0 where row ``i`` of the programme's table steps up; the LCS is the number
    of zero bits."""
    if not a or not b:
        return 0
    masks: dict[str, int] = {}
    for i, tok in enumerate(a):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for tok in b:
        u = v & masks.get(tok, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def rouge_l(a: Sequence[str], b: Sequence[str]) -> float:
    """ROUGE-L F-measure of two token sequences (module docstring), in [0, 1]: 1 for
    equal non-empty sequences, 0 when they share no token or one is empty."""
    common = lcs_length(a, b)
    if common == 0:
        return 0.0
    precision, recall = common / len(b), common / len(a)
    return 2.0 * precision * recall / (precision + recall)


def lexical_similarity(texts: Sequence[str]) -> list[float]:
    """Per text, its mean ROUGE-L F-measure with each of the other texts; their mean is
    the mean over pairs (ROUGE-L's F is symmetric). Needs 2 texts."""
    if len(texts) < 2:
        raise ValueError(f"lexical similarity compares texts: needs 2, got {len(texts)}")
    toks = [tokens(t) for t in texts]
    n = len(toks)
    sim = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            sim[i][j] = sim[j][i] = rouge_l(toks[i], toks[j])
    return [mean_confidence([sim[i][j] for j in range(n) if j != i]) for i in range(n)]


@method("lexsim", needs=(ORIGINAL,), min_samples={ORIGINAL: 2},
        summary="mean pairwise ROUGE-L of the n sample texts (lexical similarity)")
def score_lexsim(samples: ItemSamples, kernel: Kernel) -> Score:
    """Lexical similarity of the original samples' texts: per sample, its mean ROUGE-L
    F-measure with the others (the response scores); the item's value their mean, the
    mean over pairs, in [0, 1] (LM-Polygraph's uncertainty is its negative). Reads the
    texts, not the answers: the kernel is not used. Not available below 2 samples."""
    conf = lexical_similarity([s.text for s in samples.sets[ORIGINAL]])
    return Score(mean_confidence(conf), tuple(conf), ORIGINAL)
