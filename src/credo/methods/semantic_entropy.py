"""Semantic entropy of the sampled answers (Kuhn et al., ICLR 2023; Farquhar et al.,
Nature 2024), in its discrete form over K samples."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np

from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, ItemSamples, method
from credo.methods.graph import semantic_clusters


def semantic_entropy(
    answers: Sequence[Hashable | None], kernel: str | Kernel = "indicator"
) -> float:
    """``SE = −Σ_c p_c ln p_c`` in nats, ``p_c = |c| / K`` (Farquhar et al. 2024, the
    discrete semantic entropy of the "black-box" setting).

    The clusters c are :func:`credo.methods.graph.semantic_clusters`: connected
    components of the graph with an edge where the kernel is ≥ 0.5 both ways; an
    unparsable answer (``None``) is a cluster of its own. SE lies in [0, ln K]: 0 when
    all K answers agree, ln K when all differ. Needs K >= 2.
    """
    # sorted: the sum's order (hence its last bit) must not depend on the answers' order,
    # or items with the same clusters would rank by rounding noise
    counts = np.sort(np.bincount(semantic_clusters(answers, kernel)))
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


@method(
    "semantic_entropy",
    needs=(ORIGINAL,),
    summary="1 − SE / ln K, discrete semantic entropy of the n samples (Farquhar et al. 2024)",
)
def score_semantic_entropy(samples: ItemSamples, kernel: Kernel) -> float:
    """Confidence ``1 − SE / ln K`` in [0, 1]: 1 when the K original samples form one
    semantic cluster, 0 when every sample is a cluster of its own (SE's maximum ln K)."""
    answers = samples.answers(ORIGINAL)
    return 1.0 - semantic_entropy(answers, kernel) / math.log(len(answers))
