"""Degree matrix uncertainty and confidence, U_Deg and C_Deg (Lin et al., TMLR 2024,
"Generating with Confidence", §4.2-4.3)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, Score, mean_confidence, sample_set_method
from credo.methods.graph import class_graph, too_many_distinct


def degree(answers: Sequence[Hashable | None], kernel: str | Kernel = "indicator") -> float:
    """``U_Deg = tr(K·I − D) / K² = 1 − Σ_ij W_ij / K²`` with D the degree matrix of the
    answers' similarity graph W (:func:`credo.methods.graph.similarity_graph`, W_ii = 1),
    read through its distinct answers (:func:`credo.methods.graph.class_graph`: ``Σ W =
    Σ_a m_a d_a``).

    Range [0, 1 − 1/K]: 0 when all K answers are equivalent (W all ones), 1 − 1/K when
    none is similar to another (W = I). With the indicator kernel ``1 − U_Deg = Σ_c
    p_c²``, the probability that two samples drawn with replacement agree. Needs K >= 2.
    """
    g = class_graph(answers, kernel)
    return float(1.0 - (g.sizes @ g.degrees) / g.k ** 2)


def degree_confidences(
    answers: Sequence[Hashable | None], kernel: str | Kernel = "indicator"
) -> np.ndarray:
    """``C_Deg(y_j) = D_jj / K`` per answer (Lin et al. §4.3): its mean similarity to the
    K answers, itself included, in [1/K, 1]; their mean is ``1 − U_Deg``."""
    g = class_graph(answers, kernel)
    return (g.degrees / g.k)[g.index]


@sample_set_method(
    "degree", reads=ORIGINAL,
    summary="1 − U_Deg, mean degree of the similarity graph / K (Lin et al. 2024)",
)
def degree_confidence(answers: Sequence[Hashable | None], kernel: Kernel) -> Score:
    """Confidence ``1 − U_Deg`` in [1/K, 1], not rescaled: rescaled to [0, 1] as
    ``(1 − U_Deg − 1/K) / (1 − 1/K)`` it is exactly self-consistency (Wu et al., eq. 2), so the
    paper's own quantity is kept. Per generation: ``C_Deg(y_j) = D_jj / K``, the item's
    value their mean (:func:`~credo.methods.base.mean_confidence`: exactly rounded, so
    K distinct answers give exactly 1/K). Not available below 2 samples, or above
    :data:`~credo.methods.graph.MAX_DISTINCT` distinct answers."""
    if why := too_many_distinct(answers):
        return Score.not_available(why)
    conf = [float(c) for c in degree_confidences(answers, kernel)]
    return Score(mean_confidence(conf), tuple(conf), ORIGINAL)
