"""Semantic entropy of the sampled answers (Kuhn et al., ICLR 2023; Farquhar et al.,
Nature 2024), in its discrete form over K samples."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np

from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, sample_set_method
from credo.methods.graph import semantic_clusters


def semantic_entropy(
    answers: Sequence[Hashable | None], kernel: str | Kernel = "indicator"
) -> float:
    """``SE = −Σ_c p_c ln p_c`` in nats, ``p_c = |c| / K`` (Farquhar et al. 2024, the
    discrete semantic entropy of the "black-box" setting).

    The clusters c are :func:`credo.methods.graph.semantic_clusters`: connected
    components of the graph with an edge where the kernel is ≥ 0.5 both ways; an
    unparsable answer (``None``) is a cluster of its own. SE lies in [0, ln K], exactly:
    0 when all K answers agree, ln K when all differ. Needs K >= 2.

    Computed as ``ln K − Σ_c p_c ln |c|`` (the same sum: ``ln p_c = ln |c| − ln K``), whose
    extremes are exact in floating point: one cluster gives ``ln K − 1·ln K = 0`` and K
    singletons ``ln K − Σ p_c·0 = ln K``. The textbook form ``−Σ p_c ln p_c`` gave ln 5 +
    2.2e−16 for five distinct answers, so the confidence ``1 − SE/ln K`` came out as
    −2.2e−16 and the evaluation refused it.
    """
    mean_log_size = _mean_log_size(answers, kernel)  # raises below 2 answers
    return math.log(len(answers)) - mean_log_size


def _mean_log_size(answers: Sequence[Hashable | None], kernel: str | Kernel) -> float:
    """``Σ_c p_c ln |c|``, in [0, ln K]: 0 for K singletons, ln K for one cluster."""
    # fsum: exactly rounded, so the last bit does not depend on the clusters' order (items
    # with the same clusters must tie, not rank by rounding noise); math.log for ln K and
    # ln |c| alike, so that one cluster gives exactly ln K (numpy's log may differ by 1 ulp)
    counts = np.bincount(semantic_clusters(answers, kernel))
    k = len(answers)
    return math.fsum(int(c) / k * math.log(int(c)) for c in counts)


@sample_set_method(
    "semantic_entropy", reads=ORIGINAL,
    summary="1 − SE / ln K, discrete semantic entropy of the n samples (Farquhar et al. 2024)",
)
def semantic_entropy_confidence(answers: Sequence[Hashable | None], kernel: Kernel) -> float:
    """Confidence ``1 − SE / ln K`` in [0, 1], exactly: 1 when the K original samples form
    one semantic cluster, 0 when every sample is a cluster of its own (SE's maximum ln K).
    Computed as ``Σ_c p_c ln |c| / ln K`` (the same value, see :func:`semantic_entropy`),
    which is exactly 1 and 0 at the two extremes. Not available below 2 samples."""
    return _mean_log_size(answers, kernel) / math.log(len(answers))
